package levers

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/chat"
)

// TestKeyCacheable checks which requests may be cached (and coalesced):
// deterministic ones (temperature 0, one choice) of an alias with the
// cache on; the others when the alias caches non-deterministic requests
// too or the client opted in.
func TestKeyCacheable(t *testing.T) {
	on, all := Alias{}, Alias{}
	on.Cache.Enabled = true
	all.Cache.Enabled, all.Cache.Nondeterministic = true, true
	tests := []struct {
		name string
		a    Alias
		req  func(*chat.Request)
		want bool
	}{
		{name: "cache off", a: Alias{}},
		{name: "cache off, the client opted in", a: Alias{}, req: func(r *chat.Request) { r.Temperature, r.Hints.Cache = nil, chat.CacheOn }, want: true},
		{name: "deterministic", a: on, want: true},
		{name: "no temperature", a: on, req: func(r *chat.Request) { r.Temperature = nil }},
		{name: "some temperature", a: on, req: func(r *chat.Request) { r.Temperature = new(0.7) }},
		{name: "some temperature, non-deterministic cached", a: all, req: func(r *chat.Request) { r.Temperature = new(0.7) }, want: true},
		{name: "some temperature, the client opted in", a: on, req: func(r *chat.Request) { r.Temperature, r.Hints.Cache = new(0.7), chat.CacheOn }, want: true},
		{name: "two choices", a: all, req: func(r *chat.Request) { r.N = 2 }},
		{name: "an extra field that is not JSON", a: all, req: func(r *chat.Request) { r.Extra = map[string]json.RawMessage{"x": json.RawMessage("{")} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := question("chat", "Hi")
			if tt.req != nil {
				tt.req(req)
			}
			key, ok := New(Options{}).key(req, tt.a)
			if ok != tt.want || (key != "") != tt.want {
				t.Errorf("key = %q, %v; want cacheable %v", key, ok, tt.want)
			}
		})
	}
}

// TestKeyCoversTheAnswer checks that the key changes with everything that
// changes the answer, and the tenant, and with nothing else.
func TestKeyCoversTheAnswer(t *testing.T) {
	a := Alias{}
	a.Cache.Enabled, a.Cache.Nondeterministic = true, true
	base := func() *chat.Request {
		r := question("chat", "Hi")
		r.Hints.Tenant = "t1"
		return r
	}
	tests := []struct {
		name   string
		change func(*chat.Request)
		same   bool
	}{
		{name: "nothing", change: func(*chat.Request) {}, same: true},
		{name: "the routing hint", change: func(r *chat.Request) { r.Hints.Hint = "fast" }, same: true},
		{name: "the route tag", change: func(r *chat.Request) { r.Hints.RouteTag = "faq" }, same: true},
		{name: "the cache policy", change: func(r *chat.Request) { r.Hints.Cache = chat.CacheOn }, same: true},
		{name: "the tenant", change: func(r *chat.Request) { r.Hints.Tenant = "t2" }},
		{name: "the alias", change: func(r *chat.Request) { r.Model = "small" }},
		{name: "the message", change: func(r *chat.Request) { r.Messages[0].Content = "Hello" }},
		{name: "a cache breakpoint", change: func(r *chat.Request) { r.Messages[0].CacheBreakpoint = true }},
		{name: "the cap", change: func(r *chat.Request) { r.MaxTokens = 10 }},
		{name: "the temperature", change: func(r *chat.Request) { r.Temperature = new(0.5) }},
		{name: "top_p", change: func(r *chat.Request) { r.TopP = new(0.5) }},
		{name: "the tools", change: func(r *chat.Request) { r.Tools = []chat.Tool{{Name: "f"}} }},
		{name: "stop", change: func(r *chat.Request) { r.Stop = []string{"."} }},
		{name: "the seed", change: func(r *chat.Request) { r.Seed = new(int64(7)) }},
		{name: "the response format", change: func(r *chat.Request) { r.ResponseFormat = json.RawMessage(`{"type":"json_object"}`) }},
		{name: "a sim directive", change: func(r *chat.Request) { r.Hints.Sim = "echo" }},
		{name: "the thinking asked", change: func(r *chat.Request) { r.Thinking = &chat.ThinkingAsk{Effort: "high"} }},
		{name: "the thinking shown", change: func(r *chat.Request) { r.Thinking = &chat.ThinkingAsk{Hide: true} }},
	}
	l := New(Options{})
	want, _ := l.key(base(), a)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := base()
			tt.change(req)
			got, ok := l.key(req, a)
			if !ok {
				t.Fatal("not cacheable")
			}
			if (got == want) != tt.same {
				t.Errorf("key %s, base %s: same %v, want %v", got, want, got == want, tt.same)
			}
		})
	}
}

// cachedLevers are levers caching alias chat's deterministic answers in c,
// logging to log.
func cachedLevers(r Inner, c cache.Cache, log *slog.Logger) *Levers {
	a := Alias{}
	a.Cache.Enabled = true
	return New(Options{Inner: r, Cache: c, Aliases: map[string]Alias{"chat": a}, Log: log})
}

// TestCachePolicy checks the cache's reads and writes: a complete answer
// is stored and replayed for nothing; Cache-Control: no-cache (bypass)
// reads nothing but stores; no-store reads but stores nothing; a failed,
// partial, cut or filtered answer is never stored, nor one no deployment
// gave; a cache that fails is a miss, and logged.
func TestCachePolicy(t *testing.T) {
	answer := []string{"Hel", "lo", ""}
	tests := []struct {
		name   string
		cache  *mapCache
		script []tick
		// first is the policy of the first request; second that of an
		// identical one after it.
		first, second string
		leaveAfter    int // the first client leaves after this many chunks
		firstErr      bool
		// hit: the second is served from the cache; writes: the cache
		// writes attempted.
		hit    bool
		writes int
		log    string
	}{
		{name: "stored, then a hit", script: hello, hit: true, writes: 1},
		{name: "the client's no-store", script: hello, first: "no-store", writes: 1}, // the second's
		{name: "no-store reads", script: hello, second: "no-store", hit: true, writes: 1},
		{name: "bypass reads nothing", script: hello, second: "bypass", writes: 2},
		{name: "bypass stores", script: hello, first: "bypass", hit: true, writes: 1},
		{name: "no-store, failed", script: []tick{{err: chat.ProtocolError(errors.New("bad frame"))}}, first: "no-store", firstErr: true, writes: 0},
		{name: "failed", script: []tick{{chunk: chat.Chunk{Text: "Hel"}}, {err: chat.ProtocolError(errors.New("bad frame"))}}, firstErr: true, writes: 0},
		{name: "the client left", script: hello, leaveAfter: 1, writes: 1}, // the second's
		{name: "cut at the deadline", script: []tick{{chunk: chat.Chunk{Text: "Hel"}}, {chunk: chat.Chunk{FinishReason: chat.FinishTimeout}}}, writes: 0},
		{name: "filtered", script: []tick{{chunk: chat.Chunk{Text: "Hel"}}, {chunk: chat.Chunk{FinishReason: chat.FinishContentFilter}}}, writes: 0},
		{name: "unfinished", script: []tick{{chunk: chat.Chunk{Text: "Hel"}}}, writes: 0},
		{name: "no deployment answered", script: []tick{{chunk: chat.Chunk{FinishReason: chat.FinishStop}}}, writes: 0},
		{
			name: "a cache that cannot be read", script: hello, cache: &mapCache{getErr: errors.New("connection refused")}, writes: 2,
			log: `level=WARN msg="cache read" err="connection refused"` + "\n" + `level=WARN msg="cache read" err="connection refused"` + "\n",
		},
		{
			name: "a cache that cannot be written", script: hello, cache: &mapCache{setErr: errors.New("out of memory")}, writes: 2,
			log: `level=WARN msg="cache write" err="out of memory"` + "\n" + `level=WARN msg="cache write" err="out of memory"` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := tt.cache
				if c == nil {
					c = &mapCache{}
				}
				var log strings.Builder
				r := &scripted{script: tt.script}
				l := cachedLevers(r, c, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: dropTime})))
				ask := func(policy string, leaveAfter int) ([]chat.Chunk, *Report, error) {
					req := question("chat", "Hi")
					req.Hints.Cache = chat.CachePolicy(policy)
					rep := &Report{}
					chunks, _, err := read(t.Context(), l, req, rep, leaveAfter)
					// The write is in the background; the next request
					// comes after it.
					if err := l.Flush(t.Context()); err != nil {
						t.Fatal(err)
					}
					return chunks, rep, err
				}
				if _, _, err := ask(tt.first, tt.leaveAfter); (err != nil) != tt.firstErr {
					t.Fatalf("the first request: %v", err)
				}
				chunks, rep, err := ask(tt.second, 0)
				reqs, _, _ := r.calls()
				if hit := len(reqs) == 1; hit != tt.hit || rep.Cached != tt.hit {
					t.Errorf("the router was sent %d requests, the second cached %v; want a hit %v", len(reqs), rep.Cached, tt.hit)
				}
				if tt.hit {
					if diff := cmp.Diff(answer, texts(chunks)); diff != "" || err != nil {
						t.Errorf("replayed (-want +got):\n%s%v", diff, err)
					}
					if rep.Deployment != "dep" || rep.Model != "model" || rep.BillShare != 0 || rep.FirstToken.IsZero() {
						t.Errorf("a hit's report: %+v; want dep, model, nothing billed, a first token", rep)
					}
				}
				if n := c.writes(); n != tt.writes {
					t.Errorf("%d cache writes, want %d", n, tt.writes)
				}
				if got := log.String(); got != tt.log {
					t.Errorf("log:\n%s\nwant:\n%s", got, tt.log)
				}
			})
		})
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestCacheEntry checks what is stored: the answer's chunks without their
// More hints, the alias, model and deployment, and the alias's TTL (ten
// minutes by default).
func TestCacheEntry(t *testing.T) {
	for _, ttl := range []time.Duration{0, time.Hour} {
		t.Run(ttl.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &mapCache{}
				a := Alias{}
				a.Cache.Enabled, a.Cache.TTL = true, ttl
				r := &scripted{script: []tick{{chunk: chat.Chunk{Text: "Hel", More: true}}, {chunk: chat.Chunk{FinishReason: chat.FinishStop}}}}
				l := New(Options{Inner: r, Cache: c, Aliases: map[string]Alias{"chat": a}})
				if _, _, err := read(t.Context(), l, question("chat", "Hi"), nil, 0); err != nil {
					t.Fatal(err)
				}
				l.Flush(t.Context())
				if len(c.m) != 1 {
					t.Fatalf("%d entries, want 1", len(c.m))
				}
				want := ttl
				if want == 0 {
					want = 10 * time.Minute
				}
				now := time.Now()
				for _, e := range c.m {
					wantE := &cache.Entry{Alias: "chat", Model: "model", Deployment: "dep", Created: now, Expires: now.Add(want),
						Chunks: []chat.Chunk{{Text: "Hel"}, {FinishReason: chat.FinishStop}}}
					if diff := cmp.Diff(wantE, e); diff != "" {
						t.Errorf("entry (-want +got):\n%s", diff)
					}
				}
			})
		})
	}
}

// TestPendingExpires: an answer whose write is still in flight is served
// from memory until the entry expires, not after.
func TestPendingExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := Alias{}
		a.Cache.Enabled, a.Cache.TTL = true, time.Second
		r := &scripted{script: hello}
		l := New(Options{Inner: r, Cache: &slowCache{frozen: true}, Aliases: map[string]Alias{"chat": a}})
		for range 2 {
			read(t.Context(), l, question("chat", "Hi"), nil, 0)
		}
		if reqs, _, _ := r.calls(); len(reqs) != 1 {
			t.Errorf("before the entry expired the router was sent %d requests, want 1", len(reqs))
		}
		time.Sleep(time.Second)
		read(t.Context(), l, question("chat", "Hi"), nil, 0)
		if reqs, _, _ := r.calls(); len(reqs) != 2 {
			t.Errorf("after it expired the router was sent %d requests, want 2", len(reqs))
		}
		l.Flush(t.Context())
	})
}

// TestFlushGivesUp: Flush returns when its ctx ends, writes still in
// flight.
func TestFlushGivesUp(t *testing.T) {
	l := New(Options{CacheWrites: 2})
	l.writes <- struct{}{} // a write in flight
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush = %v, want %v", err, context.Canceled)
	}
	if n := l.Stats().CacheWrites; n != 1 {
		t.Errorf("%d writes in flight after Flush, want the 1 that was", n)
	}
}

// TestReplay checks how a cached answer is replayed: at once, with More
// set on all but the last chunk; or paced at ReplayTokensPerSecond, a gap
// before each visible chunk after the first. A client whose ctx ends is
// told why, or, when its deadline passed after the first text, the answer
// is cut with FinishTimeout as the router cuts one.
func TestReplay(t *testing.T) {
	ms := time.Millisecond
	entry := []chat.Chunk{{Text: "Hel"}, {Text: "lo"}, {FinishReason: chat.FinishStop}}
	tests := []struct {
		name   string
		pace   float64
		chunks []chat.Chunk
		// end ends the client's ctx after this long with cause.
		end   time.Duration
		cause error
		want  []chat.Chunk
		at    []time.Duration
		err   error
	}{
		{
			name: "at once", chunks: entry,
			want: []chat.Chunk{{Text: "Hel", More: true}, {Text: "lo", More: true}, {FinishReason: chat.FinishStop}},
			at:   []time.Duration{0, 0, 0},
		},
		{
			name: "paced", pace: 10, chunks: entry,
			want: entry, at: []time.Duration{0, 100 * ms, 100 * ms},
		},
		{
			name: "paced, longer", pace: 10, chunks: []chat.Chunk{{Text: "Hel"}, {Text: "lo"}, {Text: "!"}, {FinishReason: chat.FinishStop}},
			want: []chat.Chunk{{Text: "Hel"}, {Text: "lo"}, {Text: "!"}, {FinishReason: chat.FinishStop}}, at: []time.Duration{0, 100 * ms, 200 * ms, 200 * ms},
		},
		{
			name: "the client leaves", pace: 10, chunks: entry, end: 50 * ms, cause: context.Canceled,
			want: entry[:1], at: []time.Duration{0}, err: context.Canceled,
		},
		{
			name: "the deadline after the first text", pace: 10, chunks: entry, end: 50 * ms, cause: chat.ErrDeadline,
			want: []chat.Chunk{{Text: "Hel"}, {FinishReason: chat.FinishTimeout}}, at: []time.Duration{0, 50 * ms},
		},
		{
			name: "the deadline before any text", pace: 10, chunks: []chat.Chunk{{Model: "m"}, {Text: "Hel"}, {FinishReason: chat.FinishStop}},
			end: 50 * ms, cause: chat.ErrDeadline,
			want: []chat.Chunk{{Model: "m"}}, at: []time.Duration{0}, err: chat.ErrDeadline,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := Alias{}
				a.Cache.Enabled = true
				c := &mapCache{}
				r := &scripted{}
				l := New(Options{Inner: r, Cache: c, Aliases: map[string]Alias{"chat": a}, ReplayTokensPerSecond: tt.pace})
				req := question("chat", "Hi")
				key, _ := l.key(shape(req, a), a)
				c.Set(t.Context(), key, &cache.Entry{Alias: "chat", Model: "model", Deployment: "dep", Chunks: tt.chunks, Expires: time.Now().Add(time.Hour)})
				ctx, cancel := context.WithCancelCause(t.Context())
				defer cancel(nil)
				if tt.end > 0 {
					time.AfterFunc(tt.end, func() { cancel(tt.cause) })
				}
				rep := &Report{}
				got, at, err := read(ctx, l, req, rep, 0)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("chunks (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.at, at); diff != "" {
					t.Errorf("delivered at (-want +got):\n%s", diff)
				}
				if !errors.Is(err, tt.err) {
					t.Errorf("error %v, want %v", err, tt.err)
				}
				if reqs, _, _ := r.calls(); len(reqs) != 0 || !rep.Cached {
					t.Errorf("the router was sent %d requests, cached %v; want a hit", len(reqs), rep.Cached)
				}
			})
		})
	}
}

// TestReplayClientBreaks: a client that stops reading stops the replay.
func TestReplayClientBreaks(t *testing.T) {
	for _, pace := range []float64{0, 10} {
		synctest.Test(t, func(t *testing.T) {
			c := &mapCache{}
			l := cachedLevers(&scripted{script: hello}, c, nil)
			l.opt.ReplayTokensPerSecond = pace
			read(t.Context(), l, question("chat", "Hi"), nil, 0)
			l.Flush(t.Context())
			got, _, _ := read(t.Context(), l, question("chat", "Hi"), nil, 1)
			if len(got) != 1 {
				t.Errorf("pace %v: %d chunks after the client left at the first", pace, len(got))
			}
		})
	}
}

// TestDeliveredEnd checks how a stream whose ctx ended is finished for a
// client, after the chunks it was sent: an error when nothing visible was
// sent or the client left; else each open choice cut with FinishTimeout,
// and nothing when every choice had finished.
func TestDeliveredEnd(t *testing.T) {
	deadline, gone := chat.ErrDeadline, context.Canceled
	tests := []struct {
		name   string
		sent   []chat.Chunk
		cause  error
		stopAt int // the client takes this many of the end's chunks (0: all)
		want   []chat.Chunk
		err    error
	}{
		{name: "nothing sent", cause: deadline, err: deadline},
		{name: "nothing visible sent", sent: []chat.Chunk{{Model: "m"}}, cause: deadline, err: deadline},
		{name: "the client left", sent: []chat.Chunk{{Text: "Hel"}}, cause: gone, err: gone},
		{name: "one choice open", sent: []chat.Chunk{{Text: "Hel"}}, cause: deadline, want: []chat.Chunk{{FinishReason: chat.FinishTimeout}}},
		{name: "a tool call open", sent: []chat.Chunk{{ToolCalls: []chat.ToolCallDelta{{Name: "f"}}}}, cause: deadline, want: []chat.Chunk{{FinishReason: chat.FinishTimeout}}},
		{
			name: "two choices open, one finished", cause: deadline,
			sent: []chat.Chunk{{Choice: 0, Text: "a"}, {Choice: 1, Text: "b"}, {Choice: 2, Text: "c"}, {Choice: 1, FinishReason: chat.FinishStop}},
			want: []chat.Chunk{{Choice: 0, FinishReason: chat.FinishTimeout}, {Choice: 2, FinishReason: chat.FinishTimeout}},
		},
		{
			name: "the client leaves during the end", cause: deadline, stopAt: 1,
			sent: []chat.Chunk{{Choice: 0, Text: "a"}, {Choice: 1, Text: "b"}},
			want: []chat.Chunk{{Choice: 0, FinishReason: chat.FinishTimeout}},
		},
		{
			name: "every choice finished", cause: deadline,
			sent: []chat.Chunk{{Text: "Hel"}, {FinishReason: chat.FinishStop}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(tt.cause)
			var d delivered
			for i := range tt.sent {
				d.add(&tt.sent[i])
			}
			var got []chat.Chunk
			var err error
			d.end(ctx, func(c chat.Chunk, e error) bool {
				if e != nil {
					err = e
					return false
				}
				got = append(got, c)
				return len(got) != tt.stopAt
			})
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("end (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("error %v, want %v", err, tt.err)
			}
		})
	}
}
