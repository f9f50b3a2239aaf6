package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
)

// recorder answers "ok" and records the upstream model of each request.
type recorder struct {
	mu     sync.Mutex
	models []string
}

func (p *recorder) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	p.mu.Lock()
	p.models = append(p.models, req.Model)
	p.mu.Unlock()
	return func(yield func(chat.Chunk, error) bool) {
		if yield(chat.Chunk{Text: "ok"}, nil) {
			yield(chat.Chunk{FinishReason: chat.FinishStop}, nil)
		}
	}
}

func passthroughRouter(t *testing.T, pt Passthrough, aliases ...Alias) *Router {
	t.Helper()
	r, err := New(Config{Aliases: aliases, Passthrough: &pt, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPassthroughRoutesToProviderAndModel(t *testing.T) {
	openai := &recorder{}
	r := passthroughRouter(t, Passthrough{Providers: map[string]provider.Provider{"openai": openai}})
	if d, err := r.Timeout("openai/gpt-4o-mini"); err != nil || d != DefaultTimeout {
		t.Fatalf("Timeout = %v, %v, want the default timeout", d, err)
	}
	req := ask("hi")
	req.Model = "openai/gpt-4o-mini"
	res := route(t, r, context.Background(), req)
	if res.err != nil || res.text != "ok" {
		t.Fatalf("err %v, text %q", res.err, res.text)
	}
	if diff := cmp.Diff([]string{"gpt-4o-mini"}, openai.models); diff != "" {
		t.Errorf("upstream models (-want +got):\n%s", diff)
	}
	if res.rep.Alias != "openai/gpt-4o-mini" || res.rep.Deployment != "openai/gpt-4o-mini" || res.rep.Model != "gpt-4o-mini" {
		t.Errorf("report: alias %q, deployment %q, model %q", res.rep.Alias, res.rep.Deployment, res.rep.Model)
	}
	// The model part may hold slashes: it is the upstream's business.
	req.Model = "openai/org/model:tag"
	if res := route(t, r, context.Background(), req); res.err != nil || openai.models[1] != "org/model:tag" {
		t.Errorf("err %v, models %q", res.err, openai.models)
	}
}

func TestPassthroughRefusals(t *testing.T) {
	allowed := atomic.Bool{}
	allowed.Store(true)
	r := passthroughRouter(t, Passthrough{
		Providers: map[string]provider.Provider{"openai": &recorder{}},
		Allow:     allowed.Load,
		Max:       2,
	}, Alias{Name: "chat", Deployments: []Deployment{dep(&recorder{}, "openai", "gpt-4o", 0)}})
	for _, tc := range []struct {
		name string
		want error
	}{
		{"chat", nil},
		{"openai/a", nil},
		{"azure/gpt-4o", ErrUnknownModel},     // no such provider
		{"openai/", ErrUnknownModel},          // no model
		{"openai/two words", ErrUnknownModel}, // not a model name
		{"gpt-4o-mini", ErrUnknownModel},      // no provider
		{"openai/b", nil},
		{"openai/c", ErrPassthroughFull}, // Max is 2
		{"openai/a", nil},                // still served
	} {
		if _, err := r.Timeout(tc.name); !errors.Is(err, tc.want) {
			t.Errorf("Timeout(%q) = %v, want %v", tc.name, err, tc.want)
		}
	}
	allowed.Store(false)
	if _, err := r.Timeout("openai/a"); !errors.Is(err, ErrPassthroughOff) {
		t.Errorf("with Allow false: %v, want ErrPassthroughOff", err)
	}
	if _, err := r.Timeout("chat"); err != nil {
		t.Error("an alias is served whatever Allow says")
	}
	req := ask("hi")
	req.Model = "openai/a"
	res := route(t, r, context.Background(), req)
	var ce *chat.Error
	if !errors.As(res.err, &ce) || ce.Category != chat.CategoryNotFound || !strings.Contains(ce.Message, "set models_passthrough") {
		t.Errorf("routing an off name: %v", res.err)
	}
}

// A PROVIDER/MODEL name and a configured deployment of that provider and
// model are one upstream: one health, one breaker, one latency record.
func TestPassthroughSharesHealth(t *testing.T) {
	r := passthroughRouter(t, Passthrough{Providers: map[string]provider.Provider{"openai": &recorder{}}, Template: Alias{Timeout: 7 * time.Second}},
		Alias{Name: "chat", Deployments: []Deployment{dep(&recorder{}, "openai", "gpt-4o", 0)}})
	if d, _ := r.Timeout("openai/gpt-4o"); d != 7*time.Second {
		t.Errorf("timeout %v, want the template's 7s", d)
	}
	r.Timeout("openai/o3")
	if r.pt.names["openai/gpt-4o"].deps[0].health != r.aliases["chat"].deps[0].health {
		t.Error("openai/gpt-4o has a health of its own")
	}
	var got []string
	for _, s := range r.Health() {
		got = append(got, s.Alias+" "+s.Deployment)
	}
	want := []string{"chat openai/gpt-4o", "openai/gpt-4o openai/gpt-4o", "openai/o3 openai/o3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Health (-want +got):\n%s", diff)
	}
}

func TestPassthroughModels(t *testing.T) {
	allowed := atomic.Bool{}
	allowed.Store(true)
	p := &recorder{}
	r := passthroughRouter(t, Passthrough{Providers: map[string]provider.Provider{"openai": p, "sim": p}, Allow: allowed.Load},
		Alias{Name: "chat", Deployments: []Deployment{dep(p, "openai", "gpt-4o", 0), dep(p, "sim", "medium", 1)}},
		Alias{Name: "fast", Deployments: []Deployment{dep(p, "sim", "small", 0), dep(p, "openai", "gpt-4o", 1)}},
		Alias{Name: "sim/small", Deployments: []Deployment{dep(p, "sim", "large", 0)}}) // an alias takes the name
	want := []PassthroughModel{{"openai/gpt-4o", "openai"}, {"sim/large", "sim"}, {"sim/medium", "sim"}}
	if diff := cmp.Diff(want, r.PassthroughModels()); diff != "" {
		t.Errorf("PassthroughModels (-want +got):\n%s", diff)
	}
	allowed.Store(false)
	if got := r.PassthroughModels(); got != nil {
		t.Errorf("off: %v, want none", got)
	}
}

// Concurrent first uses of a name make one alias.
func TestPassthroughConcurrentFirstUse(t *testing.T) {
	r := passthroughRouter(t, Passthrough{Providers: map[string]provider.Provider{"openai": &recorder{}}, Max: 4})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			req := ask("hi")
			req.Model = fmt.Sprintf("openai/m%d", i%4)
			if res := route(t, r, context.Background(), req); res.err != nil {
				t.Error(res.err)
			}
		})
	}
	wg.Wait()
	if n := len(r.pt.names); n != 4 {
		t.Errorf("%d names, want 4", n)
	}
}
