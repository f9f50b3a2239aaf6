package redis

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/redisconn"
)

// open returns Counts on the test Redis under a prefix of the test's own.
func open(t testing.TB) *Counts {
	t.Helper()
	url := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if url == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL is not set: skipping the Redis limits tests")
	}
	c, err := Open(redisconn.Server{URL: url}, fmt.Sprintf("fwtest:limits:%s:%d:", t.Name(), time.Now().UnixNano()), time.Second)
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

// scripts counts the commands a Counts sends to Redis.
type scripts struct{ n atomic.Int64 }

func (s *scripts) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (s *scripts) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		s.n.Add(1)
		return next(ctx, cmd)
	}
}
func (s *scripts) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// replicas returns n Counts on one prefix, as n replicas see Redis, each
// counting its commands.
func replicas(t *testing.T, n int) ([]*Counts, []*scripts) {
	t.Helper()
	first := open(t)
	cs, ss := []*Counts{first}, []*scripts{{}}
	first.c.AddHook(ss[0])
	for range n - 1 {
		c, err := Open(redisconn.Server{URL: os.Getenv("FIRSTWORD_TEST_REDIS_URL")}, first.prefix, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s := &scripts{}
		c.c.AddHook(s)
		cs, ss = append(cs, c), append(ss, s)
	}
	return cs, ss
}

// TestBusyKeyAdmitsLocally: a key asked many times in a row is answered
// from the units its replica took ahead; Redis hears of a small share.
func TestBusyKeyAdmitsLocally(t *testing.T) {
	cs, ss := replicas(t, 1)
	ctx := context.Background()
	rpm := limits.Check{Key: "rpm", Limit: 1 << 30, Period: time.Minute, Cost: 1}
	const n = 2000
	for i := range n {
		res, err := cs[0].Admit(ctx, []limits.Check{rpm}, "")
		if err != nil || !res[0].Allowed {
			t.Fatalf("admission %d: %+v, %v", i, res, err)
		}
	}
	got := ss[0].n.Load()
	t.Logf("%d admissions, %d commands to Redis", n, got)
	if got > n/10 {
		t.Errorf("%d admissions sent %d commands to Redis, want at most %d", n, got, n/10)
	}
}

// TestReplicasNeverOvergrant: replicas admitting at once from one rate
// never admit more than its limit together; what one holds unused goes
// back within keepFor, after which the whole limit has been used.
func TestReplicasNeverOvergrant(t *testing.T) {
	cs, _ := replicas(t, 2)
	ctx := context.Background()
	// An hour's period: the count refills by under one a test's length.
	rate := limits.Check{Key: "rate", Limit: 600, Period: time.Hour, Cost: 1}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for _, c := range cs {
		for range 4 {
			wg.Go(func() {
				for refused := 0; refused < 50; {
					res, err := c.Admit(ctx, []limits.Check{rate}, "")
					if err != nil {
						t.Error(err)
						return
					}
					if res[0].Allowed {
						allowed.Add(1)
					} else {
						refused++
					}
				}
			})
		}
	}
	wg.Wait()
	if got := allowed.Load(); got > 601 {
		t.Fatalf("two replicas admitted %d at once, over the limit of 600", got)
	}
	time.Sleep(keepFor + keepFor/2 + 50*time.Millisecond)
	for {
		res, err := cs[0].Admit(ctx, []limits.Check{rate}, "")
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Allowed {
			break
		}
		allowed.Add(1)
	}
	if got := allowed.Load(); got < 600 || got > 601 {
		t.Errorf("admitted %d in all once what was held went back, want the limit, 600", got)
	}
}

// TestSlotsStayThenGoBack: a released slot serves its replica's next
// request without Redis, is the others' only once it has gone back (after
// keepFor unused), and a slot whose lease is half gone is not reused.
func TestSlotsStayThenGoBack(t *testing.T) {
	cs, ss := replicas(t, 2)
	a, b := cs[0], cs[1]
	ctx := context.Background()
	open1 := limits.Check{Key: "open", Limit: 1}
	if res, err := a.Admit(ctx, []limits.Check{open1}, "l1"); err != nil || !res[0].Allowed {
		t.Fatalf("first: %+v %v", res, err)
	}
	a.Release(ctx, []string{"open"}, "l1")
	before := ss[0].n.Load()
	if res, _ := a.Admit(ctx, []limits.Check{open1}, "l2"); !res[0].Allowed {
		t.Fatalf("the same replica again: %+v", res)
	}
	if got := ss[0].n.Load() - before; got != 0 {
		t.Errorf("reusing a held slot sent %d commands", got)
	}
	a.Release(ctx, []string{"open"}, "l2")
	if res, _ := b.Admit(ctx, []limits.Check{open1}, "m1"); res[0].Allowed {
		t.Errorf("another replica took the slot its first replica holds: %+v", res)
	}
	freed := time.Now()
	deadline := freed.Add(keepFor + keepFor/2 + 200*time.Millisecond)
	for {
		res, _ := b.Admit(ctx, []limits.Check{open1}, "m1")
		if res[0].Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slot never went back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if held := time.Since(freed); held < keepFor {
		t.Errorf("the slot went back after %v, before keepFor", held)
	}
	b.Release(ctx, []string{"open"}, "m1")
	// b's free slot, its lease (1s) more than half gone, is not reused.
	b.mu.Lock()
	for i := range b.pools["open"] {
		b.pools["open"][i].expires = time.Now().Add(b.lease / 4)
		b.pools["open"][i].idle = time.Now().Add(time.Hour) // not given back by tidy meanwhile
	}
	b.mu.Unlock()
	before = ss[1].n.Load()
	if res, _ := b.Admit(ctx, []limits.Check{open1}, "m2"); !res[0].Allowed {
		t.Fatalf("after the stale slot: %+v", res)
	}
	if ss[1].n.Load() == before {
		t.Error("a slot with a quarter of its lease left was reused")
	}
}

// TestCloseGivesBack: a replica's Close returns the units and slots it
// holds, so the others can use them at once.
func TestCloseGivesBack(t *testing.T) {
	cs, _ := replicas(t, 2)
	a, b := cs[0], cs[1]
	ctx := context.Background()
	rate := limits.Check{Key: "rate", Limit: 100, Period: time.Hour, Cost: 1}
	for range 40 {
		a.Admit(ctx, []limits.Check{rate}, "")
	}
	a.mu.Lock()
	units := a.grants["rate"].units
	a.mu.Unlock()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		res, err := b.Admit(ctx, []limits.Check{rate}, "")
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Allowed {
			break
		}
		n++
	}
	if n < 60 {
		t.Errorf("after the first replica (holding %d ahead) closed, %d more admitted, want the 60 left", units, n)
	}
}
