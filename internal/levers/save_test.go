package levers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/router"
)

// fakeRouter answers every request at once with a short, complete answer;
// continued: one that another attempt continued after the first broke.
type fakeRouter struct {
	calls     atomic.Int32
	continued bool
}

func (f *fakeRouter) StreamReport(ctx context.Context, req *chat.Request, rep *router.Report) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		f.calls.Add(1)
		rep.Deployment, rep.Model, rep.FirstToken = "dep", "model", time.Now()
		if f.continued {
			rep.Attempts = []router.Attempt{{Deployment: "other", Outcome: router.OutcomeMidStreamError},
				{Deployment: "dep", Outcome: router.OutcomeOK, FirstToken: rep.FirstToken, Continued: true}}
		}
		for _, c := range []chat.Chunk{{Text: "Hello"}, {Text: " there."}, {FinishReason: chat.FinishStop}} {
			if !yield(c, nil) {
				return
			}
		}
	}
}

func (f *fakeRouter) StreamFallback(ctx context.Context, req, _ *chat.Request, rep *router.Report) chat.Stream {
	return f.StreamReport(ctx, req, rep)
}

func (f *fakeRouter) Timeout(string) (time.Duration, error) { return 0, router.ErrUnknownModel }

// slowCache is a map whose writes take setDelay, or, when frozen, last
// until their context ends.
type slowCache struct {
	setDelay time.Duration
	frozen   bool

	mu sync.Mutex
	m  map[string]*cache.Entry
}

func (c *slowCache) Get(_ context.Context, key string) (*cache.Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key], nil
}

func (c *slowCache) Set(ctx context.Context, key string, e *cache.Entry) error {
	if c.frozen {
		<-ctx.Done()
		return ctx.Err()
	}
	time.Sleep(c.setDelay)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*cache.Entry{}
	}
	c.m[key] = e
	return nil
}

func (c *slowCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func newLevers(r Inner, c cache.Cache, coalesce bool, writes int) *Levers {
	a := Alias{Coalesce: coalesce}
	a.Cache.Enabled = true
	return New(Options{Inner: r, Aliases: map[string]Alias{"chat": a}, Cache: c, CacheWrites: writes})
}

// ask streams a deterministic (so cacheable) question to the end and
// returns the text, the report and how long the stream took.
func ask(t *testing.T, l *Levers, question string) (string, *Report, time.Duration) {
	t.Helper()
	req := &chat.Request{Model: "chat", Temperature: new(0.0), Messages: []chat.Message{{Role: chat.RoleUser, Content: question}}}
	rep := &Report{}
	start := time.Now()
	text := ""
	for c, err := range streamReport(l, t.Context(), req, rep) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		text += c.Text
	}
	return text, rep, time.Since(start)
}

// TestCacheWriteDoesNotDelayTheEnd: with the cache frozen, an answer ends
// as soon as the router's does; until the write gives up, the answer is
// served from memory, and after that it is not kept.
func TestCacheWriteDoesNotDelayTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		coalesce bool
	}{{"forwarded", false}, {"coalesced", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &fakeRouter{}
				l := newLevers(r, &slowCache{frozen: true}, tc.coalesce, 0)
				if text, _, took := ask(t, l, "hi"); text != "Hello there." || took != 0 {
					t.Errorf("answer %q took %v, want %q at once", text, took, "Hello there.")
				}
				if _, rep, took := ask(t, l, "hi"); !rep.Cached || took != 0 {
					t.Errorf("the next identical request: cached %v after %v, want a hit at once", rep.Cached, took)
				}
				if err := l.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
				if _, rep, _ := ask(t, l, "hi"); rep.Cached {
					t.Error("an answer the cache never took is still served")
				}
				if n := r.calls.Load(); n != 2 {
					t.Errorf("router called %d times, want 2", n)
				}
				l.Flush(t.Context())
			})
		})
	}
}

// TestContinuedAnswerNotCached: an answer continued after its attempt
// broke is never stored, forwarded or coalesced.
func TestContinuedAnswerNotCached(t *testing.T) {
	for _, coalesce := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			r, c := &fakeRouter{continued: true}, &slowCache{}
			l := newLevers(r, c, coalesce, 0)
			ask(t, l, "hi")
			if text, rep, _ := ask(t, l, "hi"); text != "Hello there." || rep.Cached {
				t.Errorf("coalesce %v: answer %q, cached %v: want the router's again", coalesce, text, rep.Cached)
			}
			l.Flush(t.Context())
			if n := c.len(); n != 0 || r.calls.Load() != 2 {
				t.Errorf("coalesce %v: %d entries stored, %d calls", coalesce, n, r.calls.Load())
			}
		})
	}
}

// TestCacheWriteLands: a slow write is still a hit for the next request
// on this replica, and lands in the cache.
func TestCacheWriteLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, c := &fakeRouter{}, &slowCache{setDelay: 30 * time.Millisecond}
		l := newLevers(r, c, false, 0)
		first, _, _ := ask(t, l, "hi")
		if text, rep, _ := ask(t, l, "hi"); text != first || !rep.Cached {
			t.Errorf("while the write is in flight: %q, cached %v; want %q, a hit", text, rep.Cached, first)
		}
		l.Flush(t.Context())
		if n := c.len(); n != 1 {
			t.Errorf("%d entries in the cache, want 1", n)
		}
		if text, rep, _ := ask(t, l, "hi"); text != first || !rep.Cached {
			t.Errorf("from the cache: %q, cached %v; want %q, a hit", text, rep.Cached, first)
		}
		if n := r.calls.Load(); n != 1 {
			t.Errorf("router called %d times, want 1", n)
		}
	})
}

// TestCacheWritesAreBounded: a frozen cache holds at most CacheWrites
// writes; more answers are not written, and are counted.
func TestCacheWritesAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLevers(&fakeRouter{}, &slowCache{frozen: true}, false, 4)
		for i := range 6 {
			if _, _, took := ask(t, l, fmt.Sprint("question ", i)); took != 0 {
				t.Errorf("answer %d took %v", i, took)
			}
		}
		if diff := cmp.Diff(Stats{CacheWrites: 4, CacheWritesDropped: 2}, l.Stats()); diff != "" {
			t.Errorf("Stats (-want +got):\n%s", diff)
		}
		time.Sleep(writeTimeout)
		synctest.Wait()
		if diff := cmp.Diff(Stats{CacheWritesDropped: 2}, l.Stats()); diff != "" {
			t.Errorf("Stats after the writes gave up (-want +got):\n%s", diff)
		}
	})
}
