package levers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/anthropic"
	"github.com/firstword/firstword/internal/provider/sim"
	"github.com/firstword/firstword/internal/router"
	wire "github.com/firstword/firstword/internal/wire/anthropic"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// streamer is a provider.
type streamer interface {
	Stream(ctx context.Context, req *chat.Request) chat.Stream
}

// direct is a router with one deployment: every alias goes to p, as model.
type direct struct {
	p          streamer
	dep, model string
}

func (d *direct) StreamReport(ctx context.Context, req *chat.Request, rep *router.Report) chat.Stream {
	up := req.Clone()
	up.Model = d.model
	rep.Alias, rep.Deployment, rep.Model = req.Model, d.dep, d.model
	return d.p.Stream(ctx, up)
}

func (d *direct) StreamFallback(ctx context.Context, req, _ *chat.Request, rep *router.Report) chat.Stream {
	return d.StreamReport(ctx, req, rep)
}

func (d *direct) Timeout(string) (time.Duration, error) { return time.Minute, nil }

// streamReport plans req and streams it, as a request's call does.
func streamReport(l *levers.Levers, ctx context.Context, req *chat.Request, rep *levers.Report) chat.Stream {
	if rep == nil {
		rep = &levers.Report{}
	}
	return l.Plan(req, rep).Stream(ctx)
}

// fixture reads a stream from the Anthropic wire package's testdata (see
// its SOURCES.md).
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../wire/anthropic/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeAnthropic is a Messages API upstream that keeps the request bodies
// and answers each request with the next of answers (the last repeats).
type fakeAnthropic struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newFakeAnthropic(t *testing.T, answers ...[]byte) *fakeAnthropic {
	f := &fakeAnthropic{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		answer := answers[min(len(f.bodies), len(answers))-1]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(answer)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAnthropic) body(i int) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

// anthropicLevers is levers in front of an Anthropic provider for f, with
// the alias "support" and prompt caching as given. The provider marks
// breakpoints, as cli always configures it: the alias decides.
func anthropicLevers(f *fakeAnthropic, caching bool) *levers.Levers {
	p := anthropic.New(anthropic.Config{HTTPConfig: provider.HTTPConfig{Name: "anthropic", BaseURL: f.URL + "/v1", Client: f.Client()}, PromptCaching: true})
	return levers.New(levers.Options{
		Inner:   &direct{p: p, dep: "anthropic/claude-sonnet-4-5-20250929", model: "claude-sonnet-4-5-20250929"},
		Aliases: map[string]levers.Alias{"support": {PromptCaching: caching}},
	})
}

// golden compares a JSON body, indented, with testdata/name, or rewrites
// the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	pretty.WriteByte('\n')
	path := "testdata/" + name
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), pretty.String()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

var supportTools = []chat.Tool{
	{Name: "get_order", Description: "Look an order up by its number.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)},
	{Name: "cancel_order", Description: "Cancel an order that has not shipped.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)},
}

// threeTurns is a conversation's third request, as an OpenAI client sends
// it: no marks of its own.
func threeTurns() *chat.Request {
	return &chat.Request{Model: "support", Tools: supportTools, Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: "You are the support assistant of an online shop that sells outdoor gear."},
		{Role: chat.RoleUser, Content: "Where is my order 1234?"},
		{Role: chat.RoleAssistant, Content: "It left the warehouse yesterday and should arrive on Friday."},
		{Role: chat.RoleUser, Content: "Can I still change the address?"},
		{Role: chat.RoleAssistant, Content: "Not once it has shipped, but you can refuse it and order again."},
		{Role: chat.RoleUser, Content: "Then please cancel it."},
	}}
}

// clientMarked is the same conversation from a client of /v1/messages that
// marked its two system blocks itself.
const clientMarked = `{"model": "support", "max_tokens": 1024,
  "system": [
    {"type": "text", "text": "You are the support assistant of an online shop that sells outdoor gear.", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Shipping policy: orders ship within two days; shipped orders cannot be changed.", "cache_control": {"type": "ephemeral"}}
  ],
  "tools": [
    {"name": "get_order", "description": "Look an order up by its number.", "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
    {"name": "cancel_order", "description": "Cancel an order that has not shipped.", "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
  ],
  "messages": [
    {"role": "user", "content": "Where is my order 1234?"},
    {"role": "assistant", "content": "It left the warehouse yesterday and should arrive on Friday."},
    {"role": "user", "content": "Can I still change the address?"},
    {"role": "assistant", "content": "Not once it has shipped, but you can refuse it and order again."},
    {"role": "user", "content": "Then please cancel it."}
  ]}`

// TestPromptCacheUpstreamGolden checks the bytes sent to Anthropic for a
// conversation's third request with tools: (a) prompt caching on: the last
// tool, the system prompt, the last message (read by the next request)
// and the previous request's last message (read now) are marked; (b) a
// client that marked its two system blocks keeps them, and gets the last
// tool and the last message: four in all; (c) prompt caching off: no mark.
func TestPromptCacheUpstreamGolden(t *testing.T) {
	parsed, err := wire.ParseRequest([]byte(clientMarked))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		req     *chat.Request
		caching bool
		marks   int
	}{
		{"upstream_caching.json", threeTurns(), true, 4},
		{"upstream_client_marks.json", parsed.Request, true, 4},
		{"upstream_caching_off.json", threeTurns(), false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAnthropic(t, fixture(t, "constructed_docs_prompt_caching_read.sse"))
			if _, err := chat.Collect(streamReport(anthropicLevers(f, tt.caching), context.Background(), tt.req, nil)); err != nil {
				t.Fatal(err)
			}
			body := f.body(0)
			golden(t, tt.name, body)
			if n := bytes.Count(body, []byte(`"cache_control":{"type":"ephemeral"}`)); n != tt.marks {
				t.Errorf("%d cache_control marks, want %d", n, tt.marks)
			}
		})
	}
}

// TestPromptCacheMetering sends Anthropic's documented example twice (a
// long marked system prompt, the same question) and meters the usage the
// upstream reports: written by the first request, read by the second,
// which is billed the cached-input price for the 188,086 tokens read (a
// tenth of the input price, Anthropic's) and the input price for the 21
// others.
func TestPromptCacheMetering(t *testing.T) {
	f := newFakeAnthropic(t, fixture(t, "constructed_docs_prompt_caching_write.sse"), fixture(t, "constructed_docs_prompt_caching_read.sse"))
	l := anthropicLevers(f, true)
	req := &chat.Request{Model: "support", MaxTokens: 1024, Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: "You are an AI assistant tasked with analyzing literary works."},
		{Role: chat.RoleSystem, Content: "<the entire contents of Pride and Prejudice>", CacheBreakpoint: true},
		{Role: chat.RoleUser, Content: "Analyze the major themes in Pride and Prejudice."},
	}}
	// Sonnet 4.5: $3 and $15 per million input and output tokens; a cache
	// read is $0.30 (the default tenth), a five-minute write $3.75.
	prices := metering.Prices{"claude-sonnet-4-5-20250929": {Input: 3, Output: 15}}
	var costs []float64
	for i, want := range []chat.Usage{
		{InputTokens: 188107, OutputTokens: 393, CacheWriteTokens: 188086},
		{InputTokens: 188107, OutputTokens: 393, CachedInputTokens: 188086},
	} {
		rep := &levers.Report{}
		resp, err := chat.Collect(streamReport(l, context.Background(), req, rep))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&want, resp.Usage); diff != "" {
			t.Errorf("request %d: usage (-want +got):\n%s", i+1, diff)
		}
		if n := bytes.Count(f.body(i), []byte(`"cache_control"`)); n != 2 {
			t.Errorf("request %d: %d marks, want 2 (the system prompt's and the question's): %s", i+1, n, f.body(i))
		}
		costs = append(costs, prices.Cost(rep.Deployment, *resp.Usage))
	}
	if want := (21*3 + 188086*0.30 + 393*15) / 1e6; !near(costs[1], want) {
		t.Errorf("the cache read costs $%.6f, want $%.6f", costs[1], want)
	}
	if want := (21*3 + 188086*3.75 + 393*15) / 1e6; !near(costs[0], want) {
		t.Errorf("the cache write costs $%.6f, want $%.6f (Anthropic's 1.25 × input)", costs[0], want)
	}
	uncached := (188107*3 + 393*15) / 1e6
	t.Logf("Anthropic's example, metered at Sonnet 4.5 prices: uncached $%.4f; cache write $%.4f; cache read $%.4f",
		uncached, costs[0], costs[1])
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestPromptCachingConversation measures the lever on the sim's medium
// tier (TTFT about 600 ms, a cached prompt read twice as fast) in the sim's
// own time (testing/synctest), so the figures are exact for seed 7: 20
// conversations of five turns each, one after another, a user taking 20 s
// between turns, all with the same 1,540-token system prompt, as an
// OpenAI client sends them (the whole history, no marks of its own), with
// prompt caching on and off. The cost is what metering bills at the sim's
// prices ($1 and $4 per million input and output tokens, $0.10 cached).
//
//	go test ./internal/levers -run TestPromptCachingConversation -v
func TestPromptCachingConversation(t *testing.T) {
	const conversations, turns = 20, 5
	system := strings.Repeat("You are the support assistant of an online shop that sells outdoor gear: tents, sleeping bags, stoves, boots and clothing. "+
		"Answer from the shop's policies: orders ship within two days, returns are free for 60 days, repairs are free for two years. ", 25)
	type sample struct {
		ttft           time.Duration
		cost           float64
		usage          chat.Usage
		cachedFraction float64
	}
	run := func(caching bool) (s [turns][]sample) {
		synctest.Test(t, func(t *testing.T) {
			l := levers.New(levers.Options{
				Inner:   &direct{p: sim.New(sim.Config{Seed: 7}), dep: "sim/medium", model: "medium"},
				Aliases: map[string]levers.Alias{"support": {PromptCaching: caching}},
			})
			for c := range conversations {
				msgs := []chat.Message{{Role: chat.RoleSystem, Content: system}}
				for k := range turns {
					msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("Conversation %d, question %d: what about the tent I bought last spring?", c, k+1)})
					rep := &levers.Report{}
					start := time.Now()
					var ttft time.Duration
					var col chat.Collector
					for ch, err := range streamReport(l, context.Background(), &chat.Request{Model: "support", Messages: slices.Clone(msgs)}, rep) {
						if err != nil {
							t.Fatal(err)
						}
						if ttft == 0 && ch.Visible() {
							ttft = time.Since(start)
						}
						col.Add(ch)
					}
					resp := col.Response()
					u := *resp.Usage
					s[k] = append(s[k], sample{ttft, metering.SimPrices.Cost(rep.Deployment, u), u, float64(u.CachedInputTokens) / float64(u.InputTokens)})
					msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: resp.Choices[0].Text})
					time.Sleep(20 * time.Second)
				}
			}
		})
		return s
	}
	on, off := run(true), run(false)

	p50 := func(ss []sample, f func(sample) float64) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		slices.Sort(v)
		return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
	}
	ttft := func(s sample) float64 { return float64(s.ttft) / float64(time.Millisecond) }
	cost := func(s sample) float64 { return s.cost }
	var b strings.Builder
	b.WriteString("\n| turn | input tokens | read from the cache / written, marks on | first word p50, off → on | cost p50, off → on |\n|---|---|---|---|---|\n")
	var totalOn, totalOff, firstOn, firstOff, written float64
	for k := range turns {
		fmt.Fprintf(&b, "| %d | %.0f | %.0f / %.0f | %.0f ms → %.0f ms | $%.6f → $%.6f |\n", k+1,
			p50(on[k], func(s sample) float64 { return float64(s.usage.InputTokens) }),
			p50(on[k], func(s sample) float64 { return float64(s.usage.CachedInputTokens) }),
			p50(on[k], func(s sample) float64 { return float64(s.usage.CacheWriteTokens) }),
			p50(off[k], ttft), p50(on[k], ttft), p50(off[k], cost), p50(on[k], cost))
		for i := range on[k] {
			totalOn, totalOff = totalOn+on[k][i].cost, totalOff+off[k][i].cost
			firstOn, firstOff = firstOn+ttft(on[k][i]), firstOff+ttft(off[k][i])
			written += float64(on[k][i].usage.CacheWriteTokens)
		}
	}
	n := float64(conversations)
	fmt.Fprintf(&b, "\nA five-turn conversation: first word %.0f ms → %.0f ms on average, cost $%.6f → $%.6f (%.0f%% less; cache writes at 1.25 × input, %.0f tokens written in all).\n",
		firstOff/n/turns, firstOn/n/turns, totalOff/n, totalOn/n, 100*(1-totalOn/totalOff), written)
	t.Log(b.String())

	for k := range turns {
		for i := range conversations {
			if u := off[k][i].usage; u.CachedInputTokens != 0 || u.CacheWriteTokens != 0 {
				t.Fatalf("marks off, conversation %d turn %d: usage %+v, want nothing cached", i, k+1, u)
			}
			if on[k][i].usage.InputTokens != off[k][i].usage.InputTokens {
				t.Fatalf("conversation %d turn %d: %d input tokens with marks, %d without", i, k+1, on[k][i].usage.InputTokens, off[k][i].usage.InputTokens)
			}
			if i > 0 || k > 0 {
				if on[k][i].usage.CachedInputTokens == 0 {
					t.Errorf("marks on, conversation %d turn %d: nothing read from the cache", i, k+1)
				}
			}
		}
		if k > 0 && p50(on[k], ttft) >= p50(off[k], ttft)*0.7 {
			t.Errorf("turn %d: first word p50 %.0f ms with marks, %.0f ms without", k+1, p50(on[k], ttft), p50(off[k], ttft))
		}
	}
	if u := on[0][0].usage; u.CachedInputTokens != 0 || u.CacheWriteTokens == 0 {
		t.Errorf("the very first request: usage %+v, want the prompt written and nothing read", u)
	}
	if totalOn >= totalOff*0.7 {
		t.Errorf("a conversation costs $%.6f with marks, $%.6f without", totalOn/n, totalOff/n)
	}
}
