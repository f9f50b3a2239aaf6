package levers

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/cache"
	cacheredis "github.com/firstword/firstword/internal/cache/redis"
	"github.com/firstword/firstword/internal/faultproxy"
	"github.com/firstword/firstword/internal/redisconn"
)

// proxiedRedis opens the Redis named by FIRSTWORD_TEST_REDIS_URL through a
// fault proxy, with keys under a prefix of the test's own.
func proxiedRedis(t *testing.T) (*cacheredis.Cache, *faultproxy.Proxy) {
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
	c, err := cacheredis.Open(t.Context(), redisconn.Server{URL: u.String()}, fmt.Sprintf("firstword:test:%s:%d:", t.Name(), time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, p
}

// TestFrozenRedisDoesNotDelayStreams: with the shared cache frozen, a
// cacheable answer costs at most the guard's read budget, its ending
// waits on no write, and the writes give up within their budget.
func TestFrozenRedisDoesNotDelayStreams(t *testing.T) {
	const slow = 500 * time.Millisecond // generous: the budget is 50ms
	for _, coalesce := range []bool{false, true} {
		t.Run(fmt.Sprint("coalesce=", coalesce), func(t *testing.T) {
			c, p := proxiedRedis(t)
			g := cache.Guard(c, cache.GuardOptions{})
			l := newLevers(&fakeRouter{}, g, coalesce, 0)
			if _, _, took := ask(t, l, "before the freeze"); took > slow {
				t.Errorf("an answer before the freeze took %v", took)
			}
			p.Freeze()
			text, _, took := ask(t, l, "frozen")
			t.Logf("frozen: an uncached answer ended after %v", took)
			if text != "Hello there." || took > slow {
				t.Errorf("answer %q ended after %v with the cache frozen", text, took)
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if err := l.Flush(ctx); err != nil {
				t.Fatalf("writes still in flight: %v", err)
			}
			t.Logf("frozen: the write gave up after %v more", time.Since(start))
			if took := time.Since(start); took > slow {
				t.Errorf("the frozen write took %v to give up", took)
			}
		})
	}
}

// TestFrozenRedisLatency measures how long answers take through the
// levers (a cache read, the fake router's instant answer, a cache write)
// with the Redis cache answering and frozen for the whole measure: the
// freeze should cost the p99 less than 100ms (the reads before the guard
// skips the cache pay its 50ms budget; the others nothing). The figures are logged; only a generous bound is
// asserted.
func TestFrozenRedisLatency(t *testing.T) {
	const n = 200
	for _, workers := range []int{1, 8} {
		t.Run(fmt.Sprint("clients=", workers), func(t *testing.T) {
			var p99 [2]time.Duration
			for i, frozen := range []bool{false, true} {
				c, p := proxiedRedis(t)
				l := newLevers(&fakeRouter{}, cache.Guard(c, cache.GuardOptions{}), false, 0)
				// Warm: the pool's connections are dialled before the
				// measure, as they are in a gateway that is serving.
				var wg sync.WaitGroup
				for range workers {
					wg.Go(func() { ask(t, l, fmt.Sprint("warm-up ", time.Now().UnixNano())) })
				}
				wg.Wait()
				if frozen {
					p.Freeze()
				}
				took := make([]time.Duration, n)
				for w := range workers {
					wg.Go(func() {
						for j := w; j < n; j += workers {
							_, _, took[j] = ask(t, l, fmt.Sprintf("question %d %d", j, time.Now().UnixNano()))
						}
					})
				}
				wg.Wait()
				slices.Sort(took)
				pct := func(q float64) time.Duration { return took[int(q*n+0.5)-1] }
				p99[i] = pct(0.99)
				t.Logf("redis frozen=%-5v %d answers, %d clients: p50 %v p99 %v max %v",
					frozen, n, workers, pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), took[n-1].Round(time.Microsecond))
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				l.Flush(ctx)
				cancel()
			}
			if p99[1]-p99[0] > 500*time.Millisecond {
				t.Errorf("a frozen cache added %v to the p99", p99[1]-p99[0])
			}
		})
	}
}
