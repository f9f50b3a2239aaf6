package redis

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/limits"
)

// open returns Counts on the test Redis under a prefix of the test's own.
func open(t testing.TB) *Counts {
	t.Helper()
	url := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if url == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL is not set: skipping the Redis limits tests")
	}
	c, err := Open(url, fmt.Sprintf("fwtest:limits:%s:%d:", t.Name(), time.Now().UnixNano()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestAdmitAllOrNothing: a refused check takes nothing from the others,
// and a concurrency slot is freed by Release or by its lease lapsing.
func TestAdmitAllOrNothing(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	rpm := limits.Check{Key: "rpm", Limit: 2, Period: time.Minute, Cost: 1}
	open1 := limits.Check{Key: "open", Limit: 1}
	res, err := c.Admit(ctx, []limits.Check{rpm, open1}, "a")
	if err != nil || !res[0].Allowed || !res[1].Allowed || res[0].Remaining != 1 {
		t.Fatalf("first: %+v %v", res, err)
	}
	res, err = c.Admit(ctx, []limits.Check{rpm, open1}, "b")
	if err != nil || !res[0].Allowed || res[1].Allowed {
		t.Fatalf("second (no slot): %+v %v", res, err)
	}
	// The refusal took no request: one is still left.
	res, _ = c.Admit(ctx, []limits.Check{rpm}, "")
	if !res[0].Allowed || res[0].Remaining != 0 {
		t.Errorf("after a refusal, the rate: %+v, want one left", res)
	}
	res, _ = c.Admit(ctx, []limits.Check{rpm}, "")
	if res[0].Allowed || res[0].RetryAfter <= 0 || res[0].RetryAfter > 30*time.Second {
		t.Errorf("past the rate: %+v, want a refusal with Retry-After up to 30s", res)
	}
	if err := c.Release(ctx, []string{"open"}, "a"); err != nil {
		t.Fatal(err)
	}
	if res, _ := c.Admit(ctx, []limits.Check{open1}, "c"); !res[0].Allowed {
		t.Errorf("after Release: %+v", res)
	}
	// c's lease lapses (1s) unless renewed.
	if err := c.Renew(ctx, map[string][]string{"open": {"c"}}); err != nil {
		t.Fatal(err)
	}
	if res, _ := c.Admit(ctx, []limits.Check{open1}, "d"); res[0].Allowed {
		t.Errorf("a renewed lease's slot was taken: %+v", res)
	}
	time.Sleep(1100 * time.Millisecond)
	if res, _ := c.Admit(ctx, []limits.Check{open1}, "d"); !res[0].Allowed {
		t.Errorf("after the lease lapsed: %+v, want the slot free", res)
	}
}

// TestAdjustRefunds: settling a reservation down gives tokens back.
func TestAdjustRefunds(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	tpm := limits.Check{Key: "tpm", Limit: 100, Period: time.Minute, Cost: 90}
	if res, _ := c.Admit(ctx, []limits.Check{tpm}, ""); !res[0].Allowed {
		t.Fatal(res)
	}
	tpm.Cost = 50
	if res, _ := c.Admit(ctx, []limits.Check{tpm}, ""); res[0].Allowed {
		t.Fatalf("50 more over 90 of 100: %+v", res)
	}
	if err := c.Adjust(ctx, tpm, -80); err != nil {
		t.Fatal(err)
	}
	if res, _ := c.Admit(ctx, []limits.Check{tpm}, ""); !res[0].Allowed {
		t.Errorf("after settling 90 down to 10, 50 more: %+v", res)
	}
}

// BenchmarkAdmit is admission's added latency per request: nothing
// limited, the in-process counts, and the Redis counts (one script
// round trip), at 1 and 50 concurrent requests; p50-µs and p95-µs are
// the per-request latencies' percentiles, fallbacks the admissions that
// timed out on Redis (50ms) and were counted locally.
//
//	FIRSTWORD_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench Admit -benchtime 2000x ./internal/limits/redis/
func BenchmarkAdmit(b *testing.B) {
	pol := map[string]limits.Policy{"acme": {Limits: limits.Rates{RequestsPerMinute: 1 << 30, TokensPerMinute: 1 << 30, ConcurrentStreams: 1 << 20}}}
	for _, mode := range []string{"off", "memory", "redis"} {
		for _, conc := range []int{1, 50} {
			b.Run(fmt.Sprintf("%s/c%d", mode, conc), func(b *testing.B) {
				opt := limits.Options{Tenants: pol}
				switch mode {
				case "off":
					opt.Tenants = nil
				case "redis":
					opt.Shared = open(b)
				}
				l := limits.New(context.Background(), opt)
				defer l.Close()
				var mu sync.Mutex
				var lat []time.Duration
				b.SetParallelism(max(conc/runtime.GOMAXPROCS(0), 1))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var mine []time.Duration
					ctx := context.Background()
					for pb.Next() {
						start := time.Now()
						t, err := l.Admit(ctx, limits.Request{Tenant: "acme", Tokens: 100})
						mine = append(mine, time.Since(start))
						if err != nil {
							b.Error(err)
							return
						}
						t.Close()
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
				b.StopTimer()
				slices.Sort(lat)
				if len(lat) > 0 {
					b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
					b.ReportMetric(float64(lat[len(lat)*95/100].Nanoseconds())/1000, "p95-µs")
				}
				// Admissions past limits.timeout fell back to local counts:
				// their latency is the timeout's, not Redis's.
				b.ReportMetric(float64(l.Stats().SharedErrors), "fallbacks")
			})
		}
	}
}
