package levers

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/chat"
)

// TestThinkingPolicy checks an alias's thinking policy: its effort when
// the client asks for neither an effort nor a budget (keeping whether the
// client shows the thinking), and its cap, which lowers a budget over it
// and turns an effort that would buy more into the cap as a budget;
// "none" is left alone. The client's request is never changed.
func TestThinkingPolicy(t *testing.T) {
	low := Thinking{Effort: "low"}
	capped := Thinking{Effort: "low", MaxBudgetTokens: 4096}
	tests := []struct {
		name   string
		policy Thinking
		ask    *chat.ThinkingAsk
		want   *chat.ThinkingAsk
	}{
		{name: "no policy, no ask"},
		{name: "no policy, the client's ask", ask: &chat.ThinkingAsk{Effort: "high"}, want: &chat.ThinkingAsk{Effort: "high"}},
		{name: "the default effort", policy: low, want: &chat.ThinkingAsk{Effort: "low"}},
		{name: "the client's effort", policy: low, ask: &chat.ThinkingAsk{Effort: "high"}, want: &chat.ThinkingAsk{Effort: "high"}},
		{name: "the client's budget", policy: low, ask: &chat.ThinkingAsk{BudgetTokens: 3000}, want: &chat.ThinkingAsk{BudgetTokens: 3000}},
		{name: "the default effort, hidden as the client asked", policy: low, ask: &chat.ThinkingAsk{Hide: true}, want: &chat.ThinkingAsk{Effort: "low", Hide: true}},
		{name: "the client asks for none", policy: capped, ask: &chat.ThinkingAsk{Effort: "none"}, want: &chat.ThinkingAsk{Effort: "none"}},
		{name: "a default within the cap", policy: capped, want: &chat.ThinkingAsk{Effort: "low"}},
		{name: "a budget over the cap", policy: capped, ask: &chat.ThinkingAsk{BudgetTokens: 10000}, want: &chat.ThinkingAsk{BudgetTokens: 4096}},
		{name: "a budget within the cap", policy: capped, ask: &chat.ThinkingAsk{BudgetTokens: 2000}, want: &chat.ThinkingAsk{BudgetTokens: 2000}},
		{name: "an effort over the cap", policy: capped, ask: &chat.ThinkingAsk{Effort: "high"}, want: &chat.ThinkingAsk{BudgetTokens: 4096}},
		{name: "a default effort over the cap", policy: Thinking{Effort: "high", MaxBudgetTokens: 4096}, want: &chat.ThinkingAsk{BudgetTokens: 4096}},
		{name: "an effort over the cap with a budget within it", policy: capped, ask: &chat.ThinkingAsk{Effort: "medium", BudgetTokens: 3000}, want: &chat.ThinkingAsk{BudgetTokens: 3000}},
		{name: "an effort and a budget over the cap", policy: capped, ask: &chat.ThinkingAsk{Effort: "high", BudgetTokens: 30000, Hide: true}, want: &chat.ThinkingAsk{BudgetTokens: 4096, Hide: true}},
		{name: "only a cap, no ask", policy: Thinking{MaxBudgetTokens: 4096}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := question("chat", "Hi")
			req.Thinking = tt.ask
			var before *chat.ThinkingAsk
			if tt.ask != nil {
				b := *tt.ask
				before = &b
			}
			got := shape(req, Alias{Thinking: tt.policy})
			if diff := cmp.Diff(tt.want, got.Thinking); diff != "" {
				t.Errorf("thinking asked (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, req.Thinking); diff != "" {
				t.Errorf("the client's request changed (-before +after):\n%s", diff)
			}
			if same := got == req; same != cmp.Equal(tt.ask, tt.want) {
				t.Errorf("shape returned the request itself: %v", same)
			}
		})
	}
}

// TestThinkingKey: requests that ask different thinking do not share a
// cached or coalesced answer, and the alias's default is part of the key
// of a request that asked none; one that asks nothing keeps the key it
// had before requests could ask.
func TestThinkingKey(t *testing.T) {
	a := Alias{Thinking: Thinking{Effort: "low"}}
	a.Cache.Enabled = true
	plain := Alias{}
	plain.Cache.Enabled = true
	l := New(Options{Inner: &scripted{}, Aliases: map[string]Alias{"chat": a, "plain": plain}})
	key := func(alias string, ask *chat.ThinkingAsk) string {
		req := question(alias, "Hi")
		req.Thinking = ask
		return l.Plan(req, nil).(*plan).key
	}
	def, low, high := key("chat", nil), key("chat", &chat.ThinkingAsk{Effort: "low"}), key("chat", &chat.ThinkingAsk{Effort: "high"})
	if def != low || low == high {
		t.Errorf("keys: the default %s, low %s, high %s; want the default low's, high another", def, low, high)
	}
	if b := key("chat", &chat.ThinkingAsk{BudgetTokens: 2048}); b == low || b == high {
		t.Errorf("a budget's key %s is an effort's", b)
	}
	// A request that asks no thinking keeps its key from before requests
	// could ask (commit ea60b76): answers cached then are still found.
	if got, want := key("plain", nil), "88a6e2e5bb3e244640306b12df83b95fef87bff18ca155c93185ead064ad7697"; got != want {
		t.Errorf("key without thinking %s, want %s as before", got, want)
	}
}

// TestHideThinking: the plan reports the alias's show: false, for the
// call to clear the thinking it delivers.
func TestHideThinking(t *testing.T) {
	l := New(Options{Inner: &scripted{}, Aliases: map[string]Alias{"quiet": {Thinking: Thinking{Hide: true}}, "chat": {}}})
	for alias, want := range map[string]bool{"quiet": true, "chat": false} {
		rep := &Report{}
		l.Plan(question(alias, "Hi"), rep)
		if rep.HideThinking != want {
			t.Errorf("%s: HideThinking %v, want %v", alias, rep.HideThinking, want)
		}
	}
}

// thought is an answer that thinks, with a signature, after a failed
// attempt's thinking and the router's restart.
var thought = []tick{
	{after: 50 * time.Millisecond, chunk: chat.Chunk{Thinking: "Maybe"}},
	{chunk: chat.Chunk{Thought: &chat.Thought{Restart: true}}},
	{after: 50 * time.Millisecond, chunk: chat.Chunk{Thinking: "Let me"}},
	{after: 50 * time.Millisecond, chunk: chat.Chunk{Thinking: " think."}},
	{chunk: chat.Chunk{Thought: &chat.Thought{Signature: "sig", Format: chat.ThinkingAnthropic}}},
	{after: 50 * time.Millisecond, chunk: chat.Chunk{Text: "Hel"}},
	{after: 50 * time.Millisecond, chunk: chat.Chunk{Text: "lo"}},
	{chunk: chat.Chunk{FinishReason: chat.FinishStop}},
}

// TestCacheKeepsThinking: the cache stores the whole stream of the
// attempt that served, its thinking and signature too (in the entry's
// JSON, as Redis keeps it), and a hit replays them, paced like the text.
func TestCacheKeepsThinking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &mapCache{}
		a := Alias{}
		a.Cache.Enabled = true
		r := &scripted{script: thought}
		l := New(Options{Inner: r, Cache: c, Aliases: map[string]Alias{"chat": a}, ReplayTokensPerSecond: 10})
		if _, _, err := read(t.Context(), l, question("chat", "Hi"), nil, 0); err != nil {
			t.Fatal(err)
		}
		l.Flush(t.Context())
		want := []chat.Chunk{
			{Thinking: "Let me"}, {Thinking: " think."}, {Thought: &chat.Thought{Signature: "sig", Format: chat.ThinkingAnthropic}},
			{Text: "Hel"}, {Text: "lo"}, {FinishReason: chat.FinishStop},
		}
		for _, e := range c.m {
			if diff := cmp.Diff(want, e.Chunks); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var back cache.Entry
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, back.Chunks); diff != "" {
				t.Errorf("stored as JSON (-want +got):\n%s", diff)
			}
		}
		rep := &Report{}
		got, at, err := read(t.Context(), l, question("chat", "Hi"), rep, 0)
		if err != nil || !rep.Cached {
			t.Fatalf("replay: %v, cached %v", err, rep.Cached)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("replayed (-want +got):\n%s", diff)
		}
		ms := time.Millisecond
		if diff := cmp.Diff([]time.Duration{0, 100 * ms, 100 * ms, 200 * ms, 300 * ms, 300 * ms}, at); diff != "" {
			t.Errorf("replayed at (-want +got):\n%s", diff)
		}
		if reqs, _, _ := r.calls(); len(reqs) != 1 {
			t.Errorf("the router was sent %d requests, want 1", len(reqs))
		}
	})
}

// TestCoalesceSharesThinking: a request that joins another in flight
// hears its thinking from the start.
func TestCoalesceSharesThinking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := coalescing(&scripted{script: thought[2:]})
		done := make(chan []chat.Chunk)
		go func() {
			got, _, _ := read(t.Context(), l, question("chat", "Hi"), nil, 0)
			done <- got
		}()
		time.Sleep(120 * time.Millisecond) // the first is thinking
		rep := &Report{}
		got, _, err := read(t.Context(), l, question("chat", "Hi"), rep, 0)
		first := <-done
		if err != nil || !rep.Coalesced {
			t.Fatalf("joined: %v, coalesced %v", err, rep.Coalesced)
		}
		for _, g := range [][]chat.Chunk{first, got} {
			if diff := cmp.Diff(chunksOf(thought[2:]), g); diff != "" {
				t.Errorf("heard (-want +got):\n%s", diff)
			}
		}
	})
}

// chunksOf is a script's chunks.
func chunksOf(script []tick) []chat.Chunk {
	var out []chat.Chunk
	for _, tk := range script {
		out = append(out, tk.chunk)
	}
	return out
}
