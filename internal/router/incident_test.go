package router

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/provider/sim"
)

func pctDur(v []time.Duration, p float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestLessonIncident reproduces the lesson's incident: during a provider
// slowdown (primary TTFT 30 s) a 5 s first-token timeout moves every
// request to the backup; users see slower answers and never an error. The
// circuit breaker then stops paying the 5 s at all. Time is virtual
// (testing/synctest); the sim's timings are the lesson's.
func TestLessonIncident(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := sim.New(sim.Config{Name: "primary", Seed: 1, Tiers: map[string]sim.Tier{"medium": {TTFT: 30 * time.Second, TokensPerSecond: 80, Jitter: 0.2, AnswerTokens: 100}}})
		backup := sim.New(sim.Config{Name: "backup", Seed: 2})
		r := newRouter(t, Alias{Timeout: 20 * time.Second, FirstTokenTimeout: 5 * time.Second, Deployments: []Deployment{
			dep(slow, "primary", "medium", 0), dep(backup, "backup", "small", 1)}})
		var mu sync.Mutex
		var ttfw []time.Duration
		errs := 0
		var wg sync.WaitGroup
		// 200 requests arriving at 10 a second.
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := route(t, r, context.Background(), ask(fmt.Sprintf("question %d", i)))
				mu.Lock()
				defer mu.Unlock()
				if res.err != nil {
					errs++
					return
				}
				ttfw = append(ttfw, res.firstAt)
			}()
			time.Sleep(100 * time.Millisecond)
		}
		wg.Wait()
		if errs != 0 {
			t.Errorf("%d of 200 requests failed; the lesson says none should", errs)
		}
		if st := backup.Stats(); st.Completed != 200 {
			t.Errorf("backup completed %d, want every request", st.Completed)
		}
		p50, p95, p99 := pctDur(ttfw, 50), pctDur(ttfw, 95), pctDur(ttfw, 99)
		t.Logf("primary TTFT 30s, first-token timeout 5s, 200 requests: TTFW p50 %v, p95 %v, p99 %v; %d primary attempts (those already waiting when the breaker opened, then one probe per cooldown)",
			p50.Round(time.Millisecond), p95.Round(time.Millisecond), p99.Round(time.Millisecond), slow.Stats().Started)
		if p95 > 6*time.Second || p50 > time.Second {
			t.Errorf("TTFW p50 %v p95 %v: the breaker should spare most requests the 5 s wait", p50, p95)
		}
	})
}

// TestHedgingTail measures hedging against a heavy tail: 5% of the
// primary's first tokens take 10x. It reports TTFT percentiles with and
// without hedging and the extra upstream tokens hedging cost. Virtual time:
// the numbers are those of the sim's distribution, exactly reproducible.
func TestHedgingTail(t *testing.T) {
	type run struct {
		p50, p95, p99 time.Duration
		extraIn       int
		hedges        int
		in            int
	}
	measure := func(t *testing.T, hedge bool) run {
		var out run
		synctest.Test(t, func(t *testing.T) {
			tier := sim.Tier{TTFT: 300 * time.Millisecond, TokensPerSecond: 150, Jitter: 0.2, TailProbability: 0.05, TailFactor: 10, AnswerTokens: 50}
			a := sim.New(sim.Config{Name: "a", Seed: 11, Tiers: map[string]sim.Tier{"t": tier}})
			b := sim.New(sim.Config{Name: "b", Seed: 12, Tiers: map[string]sim.Tier{"t": tier}})
			al := Alias{Deployments: []Deployment{dep(a, "a", "t", 0), dep(b, "b", "t", 1)}}
			if hedge {
				al.Hedge = Hedge{Enabled: true}
			}
			r := newRouter(t, al)
			var ttft []time.Duration
			for i := range 1000 {
				res := route(t, r, context.Background(), ask(fmt.Sprintf("q%d", i)))
				if res.err != nil {
					t.Fatal(res.err)
				}
				ttft = append(ttft, res.firstAt)
				out.in += res.usage.InputTokens
				for _, a := range res.rep.Attempts {
					if a.Usage != nil {
						out.extraIn += a.Usage.InputTokens
					}
				}
				if res.rep.Hedged() {
					out.hedges++
				}
			}
			out.p50, out.p95, out.p99 = pctDur(ttft, 50), pctDur(ttft, 95), pctDur(ttft, 99)
		})
		return out
	}
	plain := measure(t, false)
	hedged := measure(t, true)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("1000 requests, TTFT median 300 ms with 5%% at 10x:")
	t.Logf("  without hedging: p50 %v  p95 %v  p99 %v", r(plain.p50), r(plain.p95), r(plain.p99))
	t.Logf("  with hedging:    p50 %v  p95 %v  p99 %v; %d hedges, %d extra input tokens (%.1f%% of input)",
		r(hedged.p50), r(hedged.p95), r(hedged.p99), hedged.hedges, hedged.extraIn, 100*float64(hedged.extraIn)/float64(hedged.in))
	if hedged.p99 >= plain.p99/2 {
		t.Errorf("hedging did not cut p99 TTFT: %v vs %v", hedged.p99, plain.p99)
	}
	if hedged.hedges == 0 || hedged.hedges > 200 {
		t.Errorf("%d hedges for 1000 requests", hedged.hedges)
	}
}
