package levers

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/router"
)

// capture is a provider that records what it was sent and answers with
// its name, or fails every request with err.
type capture struct {
	name string
	err  *chat.Error

	mu   sync.Mutex
	sent []chat.Request
}

func (p *capture) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		p.mu.Lock()
		p.sent = append(p.sent, *req.Clone())
		p.mu.Unlock()
		if p.err != nil {
			e := *p.err
			yield(chat.Chunk{}, &e)
			return
		}
		if yield(chat.Chunk{Text: "from " + p.name}, nil) {
			yield(chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 3, OutputTokens: 2}}, nil)
		}
	}
}

func (p *capture) requests() []chat.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]chat.Request(nil), p.sent...)
}

// ruleSetup is the trap: chat's short-questions rule sends to
// fast, whose only deployment is unreachable.
func ruleSetup(t *testing.T, c cache.Cache) (*Levers, *capture, *capture) {
	t.Helper()
	down := &capture{name: "local", err: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "dial tcp 127.0.0.1:9000: connection refused", Retryable: true}}
	up := &capture{name: "openai"}
	r, err := router.New(router.Config{Seed: 1, Aliases: []router.Alias{
		{Name: "chat", Deployments: []router.Deployment{{ProviderName: "openai", Model: "gpt-4o", Provider: up}}},
		{Name: "fast", MaxAttempts: 1, Deployments: []router.Deployment{{ProviderName: "local", Model: "small", Provider: down}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	chatLevers := Alias{MaxTokens: 500, Coalesce: true, Rules: []Rule{{Name: "short-questions", MaxInputTokens: 24, Use: "fast"}}}
	chatLevers.Cache.Enabled = true
	fastLevers := Alias{MaxTokens: 50, Brevity: "Be brief.", Coalesce: true}
	fastLevers.Cache.Enabled = true
	return New(Options{Inner: r, Cache: c, Aliases: map[string]Alias{"chat": chatLevers, "fast": fastLevers}}), down, up
}

// stream reads a request to the end: its text and error.
func stream(t *testing.T, l *Levers, req *chat.Request, rep *Report) (string, error) {
	t.Helper()
	text := ""
	for c, err := range streamReport(l, t.Context(), req, rep) {
		if err != nil {
			return text, err
		}
		text += c.Text
	}
	return text, nil
}

func TestRuleTargetDownFallsBackToAskedAlias(t *testing.T) {
	for _, deterministic := range []bool{false, true} { // true: through the cache and a coalescing flight
		name := "streamed"
		if deterministic {
			name = "cached and coalesced"
		}
		t.Run(name, func(t *testing.T) {
			c, err := cache.NewMemory(1 << 20)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l, down, up := ruleSetup(t, c)
			req := &chat.Request{Model: "chat", MaxTokens: 1000, Messages: []chat.Message{{Role: chat.RoleUser, Content: "What is 2+2?"}}}
			if deterministic {
				req.Temperature = new(0.0)
			}
			var rep Report
			text, err := stream(t, l, req, &rep)
			if err != nil || text != "from openai" {
				t.Fatalf("text %q, err %v: want chat's deployment to answer", text, err)
			}
			if rep.Rule != "short-questions" || rep.Requested != "chat" || rep.Alias != "fast, fell back to chat" || rep.Deployment != "openai/gpt-4o" {
				t.Errorf("report: rule %q, requested %q, alias %q, deployment %q", rep.Rule, rep.Requested, rep.Alias, rep.Deployment)
			}
			// Each alias's request is shaped by its own levers.
			tried, served := down.requests(), up.requests()
			if len(tried) != 1 || len(served) != 1 {
				t.Fatalf("fast was sent %d requests, chat %d", len(tried), len(served))
			}
			if tried[0].MaxTokens != 50 || tried[0].Messages[0].Content != "Be brief." {
				t.Errorf("fast was sent max_tokens %d, first message %q: want its cap and brevity", tried[0].MaxTokens, tried[0].Messages[0].Content)
			}
			if served[0].MaxTokens != 500 || served[0].Model != "gpt-4o" || len(served[0].Messages) != 1 {
				t.Errorf("chat was sent max_tokens %d, model %q, %d messages: want chat's cap and no brevity", served[0].MaxTokens, served[0].Model, len(served[0].Messages))
			}
			if !deterministic {
				return
			}
			if err := l.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			var again Report
			if text, err := stream(t, l, req, &again); err != nil || text != "from openai" || !again.Cached || again.Rule != "short-questions" {
				t.Errorf("again: text %q, err %v, cached %v, rule %q", text, err, again.Cached, again.Rule)
			}
		})
	}
}

// A rule's answer shared by a coalescing flight keeps each subscriber's
// own rule in its report.
func TestCoalescedKeepsItsRule(t *testing.T) {
	l, _, _ := ruleSetup(t, nil)
	req := &chat.Request{Model: "chat", Temperature: new(0.0), Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}
	var rep Report
	if _, err := stream(t, l, req, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Rule != "short-questions" || rep.Requested != "chat" {
		t.Errorf("rule %q, requested %q", rep.Rule, rep.Requested)
	}
}

// PROVIDER/MODEL names get levers as an alias does: Unlisted's, by
// default the response cache and coalescing.
func TestPassthroughNameGetsLevers(t *testing.T) {
	newLevers := func(unlisted *Alias) (*Levers, *capture, cache.Cache) {
		up := &capture{name: "openai"}
		r, err := router.New(router.Config{Seed: 1, Passthrough: &router.Passthrough{Providers: map[string]provider.Provider{"openai": up}}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cache.NewMemory(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return New(Options{Inner: r, Cache: c, Unlisted: unlisted}), up, c
	}
	ask := func(model string) *chat.Request {
		return &chat.Request{Model: model, Temperature: new(0.0), Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}
	}

	l, up, _ := newLevers(nil)
	for i, wantCached := range []bool{false, true} {
		var rep Report
		text, err := stream(t, l, ask("openai/gpt-4o-mini"), &rep)
		if err != nil || text != "from openai" || rep.Cached != wantCached {
			t.Errorf("request %d: text %q, err %v, cached %v", i+1, text, err, rep.Cached)
		}
		if err := l.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("upstream asked %d times, want once: the second was a cache hit", n)
	}

	capped := Alias{MaxTokens: 16, Brevity: "Be brief."}
	l, up, _ = newLevers(&capped)
	req := ask("openai/gpt-4o-mini")
	req.MaxTokens = 4000
	if _, err := stream(t, l, req, &Report{}); err != nil {
		t.Fatal(err)
	}
	got := up.requests()[0]
	want := []chat.Message{{Role: chat.RoleSystem, Content: "Be brief."}, {Role: chat.RoleUser, Content: "hi"}}
	if diff := cmp.Diff(want, got.Messages); diff != "" || got.MaxTokens != 16 || got.Model != "gpt-4o-mini" {
		t.Errorf("sent model %q, max_tokens %d, messages (-want +got):\n%s", got.Model, got.MaxTokens, diff)
	}

	var rep Report
	_, err := stream(t, l, ask("azure/gpt-4o"), &rep)
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Category != chat.CategoryNotFound {
		t.Errorf("unknown provider: %v, want not found", err)
	}
	if _, err := l.Timeout("azure/gpt-4o"); !errors.Is(err, router.ErrUnknownModel) {
		t.Errorf("Timeout: %v", err)
	}
	if d, err := l.Timeout("openai/o3"); err != nil || d != router.DefaultTimeout {
		t.Errorf("Timeout = %v, %v", d, err)
	}
}
