package router

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/provider/sim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ask(text string) *chat.Request {
	return &chat.Request{Model: "chat", Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}}
}

// result is a routed request as a client saw it.
type result struct {
	text      string
	finish    chat.FinishReason
	usage     *chat.Usage
	err       error
	firstAt   time.Duration // since the request started
	endAt     time.Duration
	rep       Report
	chunksErr int
}

func route(t *testing.T, r *Router, ctx context.Context, req *chat.Request) result {
	t.Helper()
	ctx, cancel := withDeadline(r, ctx, req.Model)
	defer cancel()
	start := time.Now()
	var res result
	var col chat.Collector
	for c, err := range r.StreamReport(ctx, req, &res.rep) {
		if err != nil {
			res.err = err
			break
		}
		if res.firstAt == 0 && c.Visible() {
			res.firstAt = time.Since(start)
		}
		col.Add(c)
	}
	res.endAt = time.Since(start)
	resp := col.Response()
	if len(resp.Choices) > 0 {
		res.text, res.finish = resp.Choices[0].Text, resp.Choices[0].FinishReason
	}
	res.usage = resp.Usage
	return res
}

// withDeadline gives ctx the request's deadline as the request's call
// does (package call): alias's timeout from now, or ctx's own deadline
// if that is earlier.
func withDeadline(r *Router, ctx context.Context, alias string) (context.Context, context.CancelFunc) {
	timeout, err := r.Timeout(alias)
	if err != nil {
		return ctx, func() {}
	}
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return chat.WithDeadline(ctx, d)
}

func outcomes(rep Report) []Outcome {
	var out []Outcome
	for _, a := range rep.Attempts {
		out = append(out, a.Outcome)
	}
	return out
}

// simWith is a sim with exact timings (no jitter) and a fault for every
// request.
func simWith(name string, f sim.Fault) *sim.Provider {
	return sim.New(sim.Config{Name: name, Seed: 1, Fault: f, Tiers: map[string]sim.Tier{
		"fast":  {TTFT: 100 * time.Millisecond, TokensPerSecond: 100, AnswerTokens: 20},
		"slow":  {TTFT: 30 * time.Second, TokensPerSecond: 100, AnswerTokens: 20},
		"write": {TTFT: 100 * time.Millisecond, TokensPerSecond: 10, AnswerTokens: 200},
	}})
}

func newRouter(t *testing.T, a Alias) *Router {
	t.Helper()
	a.Name = "chat"
	r, err := New(Config{Aliases: []Alias{a}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func dep(p provider.Provider, name, model string, prio int) Deployment {
	return Deployment{ProviderName: name, Model: model, Provider: p, Priority: prio}
}

func TestFirstTokenTimeoutFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary, backup := simWith("primary", sim.Fault{Mode: sim.FaultHang}), simWith("backup", sim.Fault{})
		r := newRouter(t, Alias{FirstTokenTimeout: 5 * time.Second, Deployments: []Deployment{
			dep(primary, "primary", "fast", 0), dep(backup, "backup", "fast", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil {
			t.Fatalf("client saw an error: %v", res.err)
		}
		if want := 5*time.Second + 100*time.Millisecond; res.firstAt != want {
			t.Errorf("first token at %v, want %v (first-token timeout + backup TTFT)", res.firstAt, want)
		}
		if got := outcomes(res.rep); !slices.Equal(got, []Outcome{OutcomeFirstTokenTimeout, OutcomeOK}) {
			t.Errorf("attempts %v", got)
		}
		if res.rep.Deployment != "backup/fast" || res.finish != chat.FinishStop {
			t.Errorf("served by %q, finish %q", res.rep.Deployment, res.finish)
		}
		if st := primary.Stats(); st.Cancelled != 1 {
			t.Errorf("the hanging primary was not cancelled: %+v", st)
		}
	})
}

// A role-only or model-only chunk is not a first token.
func TestFirstTokenMeansVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		teaser := providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
			return func(yield func(chat.Chunk, error) bool) {
				if !yield(chat.Chunk{Model: "teaser"}, nil) {
					return
				}
				<-ctx.Done()
				yield(chat.Chunk{}, context.Cause(ctx))
			}
		})
		r := newRouter(t, Alias{FirstTokenTimeout: 2 * time.Second, Deployments: []Deployment{
			dep(teaser, "teaser", "x", 0), dep(simWith("b", sim.Fault{}), "b", "fast", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil || res.rep.Deployment != "b/fast" || res.firstAt != 2100*time.Millisecond {
			t.Errorf("err %v, served by %q at %v", res.err, res.rep.Deployment, res.firstAt)
		}
	})
}

// The lesson: a retry started at second 18 of a 20 s deadline gets 2 s.
func TestDeadlineSharedByEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := simWith("hang", sim.Fault{Mode: sim.FaultHang})
		var backupCtxDeadline time.Duration
		start := time.Now()
		probe := providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
			d, _ := ctx.Deadline()
			backupCtxDeadline = d.Sub(start)
			return simWith("slowstart", sim.Fault{}).Stream(ctx, req)
		})
		r := newRouter(t, Alias{Timeout: 20 * time.Second, Deployments: []Deployment{
			{ProviderName: "hang", Model: "fast", Provider: hang, FirstTokenTimeout: 18 * time.Second},
			{ProviderName: "probe", Model: "slow", Provider: probe, Priority: 1, FirstTokenTimeout: 10 * time.Second}}})
		res := route(t, r, context.Background(), ask("hi"))
		if backupCtxDeadline != 20*time.Second {
			t.Errorf("the fallback at 18s was given a deadline at %v, want the request's 20s", backupCtxDeadline)
		}
		var ce *chat.Error
		if !errors.As(res.err, &ce) || ce.Category != chat.CategoryTimeout || res.endAt != 20*time.Second {
			t.Errorf("got %v at %v, want a timeout at exactly 20s", res.err, res.endAt)
		}
	})
}

// TestCallerDeadline: the walk ends at the caller's deadline, a plain one
// (context.WithTimeout) included, when it is the earliest.
func TestCallerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRouter(t, Alias{Timeout: 20 * time.Second, Deployments: []Deployment{dep(simWith("s", sim.Fault{}), "s", "slow", 0)}})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		res := route(t, r, ctx, ask("hi"))
		if res.err == nil || res.endAt != 3*time.Second {
			t.Errorf("got %v at %v, want a failure at the client's 3s", res.err, res.endAt)
		}
	})
}

func TestTimeout(t *testing.T) {
	r := newRouter(t, Alias{Timeout: 20 * time.Second, Deployments: []Deployment{dep(simWith("s", sim.Fault{}), "s", "fast", 0)}})
	for _, tc := range []struct {
		name  string
		model string
		want  time.Duration
		err   error
	}{
		{"the alias's timeout", "chat", 20 * time.Second, nil},
		{"an unknown alias", "nope", 0, ErrUnknownModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Timeout(tc.model)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Timeout(%q) error = %v, want %v", tc.model, err, tc.err)
			}
			if got != tc.want {
				t.Errorf("Timeout(%q) = %v, want %v", tc.model, got, tc.want)
			}
		})
	}
}

// flaky fails its first n calls with err, then serves from next.
type flaky struct {
	n     int32
	err   error
	calls atomic.Int32
	at    []time.Duration
	start time.Time
	next  provider.Provider
}

func (f *flaky) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		f.at = append(f.at, time.Since(f.start))
		if f.calls.Add(1) <= f.n {
			yield(chat.Chunk{}, f.err)
			return
		}
		for c, err := range f.next.Stream(ctx, req) {
			if !yield(c, err) {
				return
			}
		}
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{n: 1, start: time.Now(), next: simWith("s", sim.Fault{}),
			err: &chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true, RetryAfter: 3 * time.Second}}
		r := newRouter(t, Alias{Deployments: []Deployment{dep(f, "only", "fast", 0)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil {
			t.Fatal(res.err)
		}
		if len(f.at) != 2 || f.at[1] < 3*time.Second {
			t.Errorf("calls at %v, want the retry after the 3s Retry-After", f.at)
		}
		if got := outcomes(res.rep); !slices.Equal(got, []Outcome{OutcomeError, OutcomeOK}) || !res.rep.Attempts[1].Retry {
			t.Errorf("attempts %+v", res.rep.Attempts)
		}
	})
}

func TestRetryAfterBeyondDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{n: 1, start: time.Now(), next: simWith("s", sim.Fault{}),
			err: &chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true, RetryAfter: time.Minute}}
		r := newRouter(t, Alias{Deployments: []Deployment{dep(f, "only", "fast", 0)}})
		res := route(t, r, context.Background(), ask("hi"))
		var ce *chat.Error
		if !errors.As(res.err, &ce) || ce.Status != 429 || ce.RetryAfter != time.Minute || res.endAt != 0 {
			t.Errorf("got %v at %v, want the 429 at once", res.err, res.endAt)
		}
	})
}

func TestFallbackFirstThenRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e500 := &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Retryable: true}
		a := &flaky{n: 1, err: e500, start: time.Now(), next: simWith("a", sim.Fault{})}
		b := &flaky{n: 1, err: e500, start: time.Now(), next: simWith("b", sim.Fault{})}
		r := newRouter(t, Alias{Deployments: []Deployment{dep(a, "a", "fast", 0), dep(b, "b", "fast", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil || res.rep.Route() != "a/fast=error(500), b/fast=error(500), a/fast=ok" {
			t.Errorf("err %v, route %s", res.err, res.rep.Route())
		}
		if res.rep.Retries() != 1 || res.rep.Fallbacks() != 2 {
			t.Errorf("retries %d fallbacks %d", res.rep.Retries(), res.rep.Fallbacks())
		}
	})
}

func TestNoRetryOnClientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := &flaky{n: 10, start: time.Now(), err: &chat.Error{Category: chat.CategoryInvalidRequest, Status: 400}}
		other := simWith("other", sim.Fault{})
		r := newRouter(t, Alias{Deployments: []Deployment{dep(bad, "bad", "x", 0), dep(other, "other", "fast", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		var ce *chat.Error
		if !errors.As(res.err, &ce) || ce.Status != 400 || bad.calls.Load() != 1 || other.Stats().Started != 0 {
			t.Errorf("err %v, calls %d, other started %d", res.err, bad.calls.Load(), other.Stats().Started)
		}
	})
}

// A deployment that failed in a way asking again will not fix (its key,
// its model, its base_url) is not asked again: the others are, and with
// none left the request fails at once.
func TestMisconfiguredDeploymentNotRetried(t *testing.T) {
	for _, e := range []*chat.Error{
		{Category: chat.CategoryAuth, Status: 401},
		{Category: chat.CategoryNotFound, Status: 404},
		{Category: chat.CategoryUpstreamUnavailable, Status: 307, Message: "a redirect"},
	} {
		synctest.Test(t, func(t *testing.T) {
			bad := &flaky{n: 10, start: time.Now(), err: e}
			r := newRouter(t, Alias{MaxAttempts: 4, Deployments: []Deployment{dep(bad, "bad", "x", 0)}})
			res := route(t, r, context.Background(), ask("hi"))
			var ce *chat.Error
			if !errors.As(res.err, &ce) || ce.Status != e.Status || bad.calls.Load() != 1 {
				t.Errorf("%d alone: err %v, calls %d, want its error after one call", e.Status, res.err, bad.calls.Load())
			}
			bad = &flaky{n: 10, start: time.Now(), err: e}
			other := &flaky{n: 1, start: time.Now(), next: simWith("other", sim.Fault{}),
				err: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Retryable: true}}
			r = newRouter(t, Alias{MaxAttempts: 4, Deployments: []Deployment{dep(bad, "bad", "x", 0), dep(other, "other", "fast", 1)}})
			res = route(t, r, context.Background(), ask("hi"))
			if res.err != nil || bad.calls.Load() != 1 || other.calls.Load() != 2 {
				t.Errorf("%d with a flaky other: err %v, route %s", e.Status, res.err, res.rep.Route())
			}
		})
	}
}

// After the first token, with on_stream_failure: end, a failure is the
// stream's error: never a silent switch to another model's text.
func TestNoSwitchAfterFirstToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := simWith("p", sim.Fault{Mode: sim.FaultErrorMid, After: 5})
		backup := simWith("b", sim.Fault{})
		r := newRouter(t, Alias{OnStreamFailure: StreamFailureEnd, Deployments: []Deployment{dep(primary, "p", "fast", 0), dep(backup, "b", "fast", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		var ce *chat.Error
		if !errors.As(res.err, &ce) || res.text == "" || backup.Stats().Started != 0 {
			t.Errorf("err %v, text %q, backup started %d", res.err, res.text, backup.Stats().Started)
		}
		if got := outcomes(res.rep); !slices.Equal(got, []Outcome{OutcomeMidStreamError}) {
			t.Errorf("attempts %v", got)
		}
	})
}

func TestOverallTimeoutKeepsWhatWasWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 10 tokens a second for 200 tokens: 20s, cut at 3s.
		r := newRouter(t, Alias{Timeout: 3 * time.Second, Deployments: []Deployment{dep(simWith("s", sim.Fault{}), "s", "write", 0)}})
		res := route(t, r, context.Background(), ask("hi [sim tokens=200]"))
		if res.err != nil {
			t.Fatalf("error %v, want a clean timeout ending", res.err)
		}
		if res.finish != chat.FinishTimeout || res.endAt != 3*time.Second {
			t.Errorf("finish %q at %v", res.finish, res.endAt)
		}
		if res.usage == nil || !res.usage.Estimated || res.usage.OutputTokens < 20 || res.text == "" {
			t.Errorf("usage %+v, text %q", res.usage, res.text)
		}
		if got := outcomes(res.rep); !slices.Equal(got, []Outcome{OutcomeDeadline}) {
			t.Errorf("attempts %v", got)
		}
	})
}

func TestBreakerSkipsWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := simWith("p", sim.Fault{Mode: sim.FaultHang})
		backup := simWith("b", sim.Fault{})
		r := newRouter(t, Alias{FirstTokenTimeout: time.Second, Breaker: BreakerConfig{ConsecutiveFailures: 3, Cooldown: 30 * time.Second},
			Deployments: []Deployment{dep(primary, "p", "fast", 0), dep(backup, "b", "fast", 1)}})
		for range 3 {
			if res := route(t, r, context.Background(), ask("hi")); res.err != nil || res.firstAt != 1100*time.Millisecond {
				t.Fatalf("warm-up: err %v first %v", res.err, res.firstAt)
			}
		}
		res := route(t, r, context.Background(), ask("hi"))
		if res.firstAt != 100*time.Millisecond || outcomes(res.rep)[0] != OutcomeCircuitOpen {
			t.Errorf("with the breaker open: first token at %v, attempts %v", res.firstAt, outcomes(res.rep))
		}
		if h := r.Health(); h[0].State != StateOpen {
			t.Errorf("health %+v", h)
		}
		// After the cooldown one probe goes through (and fails: the
		// primary still hangs), opening the circuit again.
		time.Sleep(31 * time.Second)
		res = route(t, r, context.Background(), ask("hi"))
		if outcomes(res.rep)[0] != OutcomeFirstTokenTimeout {
			t.Errorf("after cooldown: %v", outcomes(res.rep))
		}
		res = route(t, r, context.Background(), ask("hi"))
		if outcomes(res.rep)[0] != OutcomeCircuitOpen {
			t.Errorf("after a failed probe: %v", outcomes(res.rep))
		}
	})
}

func TestBreakerCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{n: 3, start: time.Now(), next: simWith("s", sim.Fault{}), err: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 503, Retryable: true}}
		r := newRouter(t, Alias{MaxAttempts: 1, Breaker: BreakerConfig{ConsecutiveFailures: 3, Cooldown: 5 * time.Second},
			Deployments: []Deployment{dep(f, "f", "fast", 0), dep(simWith("b", sim.Fault{}), "b", "fast", 1)}})
		for range 3 {
			route(t, r, context.Background(), ask("hi"))
		}
		if res := route(t, r, context.Background(), ask("hi")); res.rep.Route() != "f/fast=circuit_open, b/fast=ok" {
			t.Fatalf("open circuit: route %s", res.rep.Route())
		}
		time.Sleep(6 * time.Second)
		if res := route(t, r, context.Background(), ask("hi")); res.err != nil || res.rep.Deployment != "f/fast" {
			t.Fatalf("probe: err %v, route %s", res.err, res.rep.Route())
		}
		if h := r.Health(); h[0].State != StateClosed {
			t.Errorf("state %s after a good probe", h[0].State)
		}
	})
}

func TestBalancesByLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mk := func(name string, ttft time.Duration) *sim.Provider {
			return sim.New(sim.Config{Name: name, Seed: 1, Tiers: map[string]sim.Tier{"m": {TTFT: ttft, TokensPerSecond: 1000, AnswerTokens: 4}}})
		}
		fast, slow := mk("fast", 50*time.Millisecond), mk("slow", 800*time.Millisecond)
		r := newRouter(t, Alias{Deployments: []Deployment{dep(slow, "slow", "m", 0), dep(fast, "fast", "m", 0)}})
		served := map[string]int{}
		for range 100 {
			res := route(t, r, context.Background(), ask("hi"))
			served[res.rep.Deployment]++
			time.Sleep(100 * time.Millisecond)
		}
		if served["fast/m"] < 80 {
			t.Errorf("served %v: the faster deployment should take most requests", served)
		}
		if served["slow/m"] == 0 {
			t.Errorf("served %v: the slower one should still be sampled", served)
		}
	})
}

func TestRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &flaky{n: 1 << 30, start: time.Now(), err: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Retryable: true}}
		r := newRouter(t, Alias{MaxAttempts: 3, Breaker: BreakerConfig{ConsecutiveFailures: 1 << 20, ErrorRate: 1.1}, Deployments: []Deployment{dep(f, "f", "x", 0)}})
		for range 200 {
			route(t, r, context.Background(), ask("hi"))
			time.Sleep(20 * time.Millisecond) // 50 requests a second
		}
		// Without a budget: 600 calls. With 20% (plus 1/s): ~240.
		if n := f.calls.Load(); n > 260 {
			t.Errorf("%d upstream calls for 200 requests: the retry budget did not hold", n)
		}
	})
}

func TestAdaptiveFirstTokenTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simWith("s", sim.Fault{})
		r := newRouter(t, Alias{FirstTokenTimeout: 5 * time.Second, Adaptive: &Adaptive{Multiplier: 3, Min: 200 * time.Millisecond, Max: 4 * time.Second},
			Deployments: []Deployment{dep(s, "s", "fast", 0)}})
		for range 25 {
			route(t, r, context.Background(), ask("hi"))
		}
		res := route(t, r, context.Background(), ask("hi"))
		if got := res.rep.Attempts[0].FirstTokenTimeout; got != 300*time.Millisecond {
			t.Errorf("adaptive first-token timeout %v, want 3 × p99 (100ms) = 300ms", got)
		}
	})
}

func TestHedgeWinsAndCancelsTheLoser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := simWith("p", sim.Fault{})
		fast := simWith("b", sim.Fault{})
		r := newRouter(t, Alias{Hedge: Hedge{Enabled: true, Delay: 200 * time.Millisecond}, Deployments: []Deployment{
			dep(slow, "p", "slow", 0), dep(fast, "b", "fast", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil || res.rep.Deployment != "b/fast" || res.firstAt != 300*time.Millisecond {
			t.Fatalf("err %v, served by %s at %v", res.err, res.rep.Deployment, res.firstAt)
		}
		if got := outcomes(res.rep); !slices.Equal(got, []Outcome{OutcomeHedgeLost, OutcomeOK}) || !res.rep.Attempts[1].Hedge {
			t.Errorf("attempts %+v", res.rep.Attempts)
		}
		if u := res.rep.Attempts[0].Usage; u == nil || u.InputTokens == 0 || !u.Estimated || res.rep.Attempts[1].Usage != nil {
			t.Errorf("the losing hedge's cost not recorded (or the answer's counted as an attempt's): %+v", res.rep.Attempts)
		}
		synctest.Wait()
		if st := slow.Stats(); st.Cancelled != 1 {
			t.Errorf("loser not cancelled: %+v", st)
		}
	})
}

func TestHedgeNotNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, b := simWith("p", sim.Fault{}), simWith("b", sim.Fault{})
		r := newRouter(t, Alias{Hedge: Hedge{Enabled: true, Delay: 500 * time.Millisecond}, Deployments: []Deployment{
			dep(p, "p", "fast", 0), dep(b, "b", "fast", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil || res.rep.Deployment != "p/fast" || len(res.rep.Attempts) != 1 || b.Stats().Started != 0 {
			t.Errorf("err %v, attempts %+v", res.err, res.rep.Attempts)
		}
	})
}

func TestHedgePrimaryFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, b := simWith("p", sim.Fault{Mode: sim.Fault500}), simWith("b", sim.Fault{})
		r := newRouter(t, Alias{Hedge: Hedge{Enabled: true, Delay: time.Second}, Deployments: []Deployment{
			dep(p, "p", "fast", 0), dep(b, "b", "fast", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil || res.rep.Deployment != "b/fast" || res.firstAt != 105*time.Millisecond {
			t.Errorf("err %v, served by %s at %v (attempts %+v)", res.err, res.rep.Deployment, res.firstAt, res.rep.Attempts)
		}
	})
}

func TestClientCancelStopsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := simWith("p", sim.Fault{Mode: sim.FaultHang})
		r := newRouter(t, Alias{Deployments: []Deployment{dep(p, "p", "fast", 0)}})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		res := route(t, r, ctx, ask("hi"))
		if !errors.Is(res.err, context.Canceled) || res.endAt != time.Second || outcomes(res.rep)[0] != OutcomeCancelled {
			t.Errorf("err %v at %v, attempts %v", res.err, res.endAt, outcomes(res.rep))
		}
	})
}

func TestBreakAtEveryChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, hedge := range []bool{false, true} {
			s := simWith("s", sim.Fault{})
			r := newRouter(t, Alias{Hedge: Hedge{Enabled: hedge, Delay: 50 * time.Millisecond}, Deployments: []Deployment{dep(s, "s", "fast", 0), dep(simWith("t", sim.Fault{}), "t", "fast", 1)}})
			for stop := range 5 {
				n := 0
				ctx, cancel := withDeadline(r, context.Background(), "chat")
				for _, err := range r.Stream(ctx, ask("hi [sim tokens=10]")) {
					if err != nil {
						t.Fatal(err)
					}
					if n == stop {
						break
					}
					n++
				}
				cancel()
			}
		}
		synctest.Wait()
	})
}

func TestUnknownAlias(t *testing.T) {
	r := newRouter(t, Alias{Deployments: []Deployment{dep(simWith("s", sim.Fault{}), "s", "fast", 0)}})
	req := ask("hi")
	req.Model = "nope"
	res := route(t, r, context.Background(), req)
	var ce *chat.Error
	if !errors.As(res.err, &ce) || ce.Category != chat.CategoryNotFound {
		t.Errorf("err %v", res.err)
	}
}

// The walk's deadline is the caller's context's (the call's): its expiry
// is a timeout, not a client that left, and cuts the answer after its
// first token.
func TestOverallTimeoutWithCallerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRouter(t, Alias{Timeout: 3 * time.Second, Deployments: []Deployment{dep(simWith("s", sim.Fault{}), "s", "write", 0)}})
		for _, early := range []time.Duration{0, time.Millisecond} {
			ctx, cancel := chat.WithDeadline(context.Background(), time.Now().Add(3*time.Second-early))
			res := route(t, r, ctx, ask("hi [sim tokens=200]"))
			cancel()
			if res.err != nil || res.finish != chat.FinishTimeout {
				t.Errorf("caller deadline %v early: err %v, finish %q", early, res.err, res.finish)
			}
		}
	})
}

// TestDeadlineAfterEveryFinish: an upstream that finished its answer and
// then keeps the stream open past the deadline (no usage chunk, no end
// marker) ends as a complete answer: its finish reason is not followed by
// a second one.
func TestDeadlineAfterEveryFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
			return func(yield func(chat.Chunk, error) bool) {
				if !yield(chat.Chunk{Text: "done."}, nil) || !yield(chat.Chunk{FinishReason: chat.FinishStop}, nil) {
					return
				}
				<-ctx.Done()
				yield(chat.Chunk{}, context.Cause(ctx))
			}
		})
		r := newRouter(t, Alias{Timeout: 2 * time.Second, Deployments: []Deployment{dep(p, "p", "m", 0)}})
		finishes := 0
		var usage *chat.Usage
		ctx, cancel := withDeadline(r, context.Background(), "chat")
		defer cancel()
		for c, err := range r.StreamReport(ctx, ask("hi"), &Report{}) {
			if err != nil {
				t.Fatalf("error %v, want a clean ending", err)
			}
			if c.FinishReason != "" {
				finishes++
			}
			if c.Usage != nil {
				usage = c.Usage
			}
		}
		if finishes != 1 || usage == nil {
			t.Errorf("%d finish reasons, usage %+v; want one, and the usage", finishes, usage)
		}
	})
}
