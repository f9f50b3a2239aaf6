package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/faultproxy"
	"github.com/firstword/firstword/internal/redisconn"
)

// slow is a generous bound for what should take about the 50ms budget:
// far below the seconds a frozen server used to cost, far above a busy CI
// machine's scheduling noise.
const slow = 500 * time.Millisecond

// proxied opens the Redis named by FIRSTWORD_TEST_REDIS_URL through a
// fault proxy, with keys under a prefix of the test's own.
func proxied(t *testing.T) (*Cache, *faultproxy.Proxy) {
	t.Helper()
	raw := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if raw == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL not set (e.g. redis://127.0.0.1:6379/0): skipping the tests on a real Redis")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("FIRSTWORD_TEST_REDIS_URL: %v", err)
	}
	p, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	u.Host = p.Addr()
	c, err := Open(t.Context(), redisconn.Server{URL: u.String()}, fmt.Sprintf("firstword:test:%s:%d:", t.Name(), time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, p
}

func entry() *cache.Entry {
	now := time.Now()
	return &cache.Entry{Alias: "chat", Model: "m", Deployment: "d", Chunks: []chat.Chunk{{Text: "hi"}, {FinishReason: chat.FinishStop}}, Created: now, Expires: now.Add(time.Minute)}
}

// timed runs f and returns how long it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// TestFrozenRedis: with the server frozen (connections open, no byte
// moving), every call ends at its context's deadline, through the guard
// a read is a miss within its budget, concurrent callers do not queue
// behind one another, and the cache answers again once it thaws.
func TestFrozenRedis(t *testing.T) {
	c, p := proxied(t)
	g := cache.Guard(c, cache.GuardOptions{Timeout: 50 * time.Millisecond, Failures: 100})
	ctx := t.Context()
	if err := c.Set(ctx, "k", entry()); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Get(ctx, "k"); e == nil || err != nil {
		t.Fatalf("Get before the freeze = %v, %v, want the entry", e, err)
	}

	p.Freeze()
	took := timed(func() {
		bctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := c.Get(bctx, "k"); err == nil {
			t.Error("Get on a frozen server succeeded")
		}
	})
	t.Logf("frozen: a Get with a 50ms deadline returned after %v", took)
	if took > slow {
		t.Errorf("a Get with a 50ms deadline took %v on a frozen server", took)
	}
	took = timed(func() {
		if e, err := g.Get(ctx, "k"); e != nil || err != nil {
			t.Errorf("guarded Get on a frozen server = %v, %v, want a miss", e, err)
		}
	})
	t.Logf("frozen: a guarded Get missed after %v", took)
	if took > slow {
		t.Errorf("a guarded Get took %v on a frozen server", took)
	}
	if took := timed(func() { g.Set(ctx, "k2", entry()) }); took > slow {
		t.Errorf("a guarded Set took %v on a frozen server", took)
	}

	// Many callers at once: each ends at its own deadline, none waits for
	// a connection the frozen server holds.
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			took := timed(func() {
				bctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				c.Get(bctx, "k")
			})
			mu.Lock()
			worst = max(worst, took)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("frozen: the slowest of 50 concurrent Gets with a 50ms deadline returned after %v", worst)
	if worst > slow {
		t.Errorf("the slowest of 50 concurrent Gets took %v on a frozen server", worst)
	}

	p.Thaw()
	took = timed(func() {
		bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if e, err := c.Get(bctx, "k"); e == nil || err != nil {
			t.Errorf("Get after the thaw = %v, %v, want the entry", e, err)
		}
	})
	t.Logf("thawed: the first Get answered after %v", took)
	if took > slow {
		t.Errorf("the first Get after the thaw took %v", took)
	}
	if diff := g.Stats(); diff.Timeouts != 2 || diff.Errors != 0 {
		t.Errorf("Stats = %+v, want 2 timeouts and no error", diff)
	}
}

// TestCutRedis: with every connection reset, a guarded read is a miss at
// once, and the cache answers again on new connections.
func TestCutRedis(t *testing.T) {
	c, p := proxied(t)
	g := cache.Guard(c, cache.GuardOptions{})
	ctx := t.Context()
	if err := c.Set(ctx, "k", entry()); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if took := timed(func() { g.Get(ctx, "k") }); took > slow {
		t.Errorf("a guarded Get after a cut took %v", took)
	}
	if e, _ := g.Get(ctx, "k"); e == nil {
		t.Error("no entry on a new connection after the cut")
	}
}

// TestDownRedis: with the server gone (connections refused), a guarded
// read fails at once rather than after retries and backoffs: an error,
// not a timeout.
func TestDownRedis(t *testing.T) {
	c, p := proxied(t)
	g := cache.Guard(c, cache.GuardOptions{Failures: 100})
	p.Close()
	for range 5 {
		took := timed(func() {
			if e, err := g.Get(t.Context(), "k"); e != nil || err != nil {
				t.Errorf("Get = %v, %v, want a miss", e, err)
			}
		})
		t.Logf("down: a guarded Get missed after %v", took)
	}
	if st := g.Stats(); st.Errors != 5 || st.Timeouts != 0 {
		t.Errorf("Stats = %+v, want 5 errors and no timeout", st)
	}
}

// TestGuardedRedisRecovers: a frozen server is skipped after the failures
// in a row, costs nothing while skipped, and is used again after the
// cooldown once it thawed.
func TestGuardedRedisRecovers(t *testing.T) {
	c, p := proxied(t)
	// A longer budget than the default: the probe must not fail on a
	// loaded machine.
	g := cache.Guard(c, cache.GuardOptions{Timeout: 200 * time.Millisecond, Failures: 3, Cooldown: 300 * time.Millisecond})
	ctx := t.Context()
	if err := c.Set(ctx, "k", entry()); err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	for range 3 {
		g.Get(ctx, "k")
	}
	if !g.Stats().Open {
		t.Fatalf("not skipped after 3 timeouts: %+v", g.Stats())
	}
	t.Logf("skipped: a Get missed after %v", timed(func() { g.Get(ctx, "k") }))
	p.Thaw()
	time.Sleep(300 * time.Millisecond)
	if e, _ := g.Get(ctx, "k"); e == nil {
		t.Errorf("the probe after the cooldown missed: %+v", g.Stats())
	}
	if st := g.Stats(); st.Open || st.Opens != 1 || st.Timeouts != 3 || st.Skipped != 1 {
		t.Errorf("Stats after the probe = %+v, want closed after 1 opening, 3 timeouts, 1 skip", st)
	}
}

// TestBadEntry: an entry that does not decode is an ErrBadEntry.
func TestBadEntry(t *testing.T) {
	c, _ := proxied(t)
	ctx := t.Context()
	if err := c.c.Set(ctx, c.prefix+"k", "not json", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, cache.ErrBadEntry) {
		t.Errorf("Get = %v, want an ErrBadEntry", err)
	}
}
