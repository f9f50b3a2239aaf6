package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider/sim"
	"github.com/google/go-cmp/cmp"
)

// upstream answers "ok" at once, or fails with its error while one is set.
type upstream struct {
	calls atomic.Int32
	err   atomic.Pointer[chat.Error]
}

func (u *upstream) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		u.calls.Add(1)
		if e := u.err.Load(); e != nil {
			c := *e
			yield(chat.Chunk{}, &c)
			return
		}
		if yield(chat.Chunk{Text: "ok"}, nil) {
			yield(chat.Chunk{FinishReason: chat.FinishStop}, nil)
		}
	}
}

func failing(e *chat.Error) *upstream {
	u := &upstream{}
	u.err.Store(e)
	return u
}

var e500 = &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Retryable: true}

func states(r *Router) map[string]string {
	out := map[string]string{}
	for _, s := range r.Health() {
		out[s.Deployment] = s.State
	}
	return out
}

// The issue: with one deployment, a burst of failures opened the circuit
// and every request then got an instant "circuit open" for the cooldown.
// Now nothing is ever skipped when there is no other way through.
func TestOneDeploymentNeverShutOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := failing(e500)
		r := newRouter(t, Alias{Breaker: BreakerConfig{Cooldown: time.Minute}, Deployments: []Deployment{dep(u, "only", "m", 0)}})
		for range 5 {
			if res := route(t, r, context.Background(), ask("hi")); res.err == nil {
				t.Fatal("a failing upstream served")
			}
			time.Sleep(time.Second)
		}
		if got := states(r)["only/m"]; got != StateOpen {
			t.Fatalf("after the burst the circuit is %s, want open", got)
		}
		// Still failing and open: the request reaches the upstream and
		// gets its error, not "circuit open".
		before := u.calls.Load()
		res := route(t, r, context.Background(), ask("hi"))
		var ce *chat.Error
		if !errors.As(res.err, &ce) || ce.Status != 500 || u.calls.Load() == before {
			t.Errorf("open and failing: err %v after %d calls, want the upstream's 500", res.err, u.calls.Load()-before)
		}
		u.err.Store(nil)
		for i := range 20 {
			res := route(t, r, context.Background(), ask("hi"))
			if res.err != nil || res.text != "ok" || slices.Contains(outcomes(res.rep), OutcomeCircuitOpen) {
				t.Fatalf("request %d after recovery: err %v, route %s", i, res.err, res.rep.Route())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got := states(r)["only/m"]; got != StateClosed {
			t.Errorf("after recovery the circuit is %s, want closed", got)
		}
	})
}

// With other ways through, a failing deployment is skipped while open.
func TestOpenDeploymentSkipped(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bad := failing(e500)
				deps := []Deployment{dep(bad, "bad", "m", 0)}
				for i := 1; i < n; i++ {
					deps = append(deps, dep(&upstream{}, fmt.Sprint("good", i), "m", 0))
				}
				r := newRouter(t, Alias{Breaker: BreakerConfig{ConsecutiveFailures: 3, Cooldown: time.Minute}, Deployments: deps})
				for i := 0; states(r)["bad/m"] != StateOpen; i++ {
					if res := route(t, r, context.Background(), ask("hi")); res.err != nil {
						t.Fatalf("warm-up: %v", res.err)
					}
					if i == 100 {
						t.Fatal("the failing deployment's circuit never opened")
					}
				}
				calls := bad.calls.Load()
				for range 20 {
					res := route(t, r, context.Background(), ask("hi"))
					if res.err != nil || res.rep.Deployment == "bad/m" || res.rep.Attempts[0] != (Attempt{Deployment: "bad/m", Start: res.rep.Attempts[0].Start, End: res.rep.Attempts[0].Start, Outcome: OutcomeCircuitOpen}) {
						t.Fatalf("err %v, route %s; want bad/m skipped, another serving", res.err, res.rep.Route())
					}
					time.Sleep(time.Second)
				}
				if got := bad.calls.Load(); got != calls {
					t.Errorf("the open deployment was called %d times within its cooldown", got-calls)
				}
			})
		})
	}
}

// When every deployment is open, requests still go to them; the most
// recently opened is skipped, and the first success closes a circuit.
func TestAllOpenPanicRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := failing(e500), failing(e500)
		r := newRouter(t, Alias{Breaker: BreakerConfig{ConsecutiveFailures: 3, Cooldown: time.Minute},
			Deployments: []Deployment{dep(a, "a", "m", 0), dep(b, "b", "m", 1)}})
		for i := 0; !cmp.Equal(states(r), map[string]string{"a/m": StateOpen, "b/m": StateOpen}); i++ {
			route(t, r, context.Background(), ask("hi"))
			time.Sleep(time.Second)
			if i == 100 {
				t.Fatalf("never both open: %v", states(r))
			}
		}
		for range 3 {
			ca, cb := a.calls.Load(), b.calls.Load()
			res := route(t, r, context.Background(), ask("hi"))
			var ce *chat.Error
			if !errors.As(res.err, &ce) || ce.Status != 500 || (a.calls.Load() == ca) == (b.calls.Load() == cb) {
				t.Errorf("all open and failing: err %v, route %s; want one upstream tried and its 500", res.err, res.rep.Route())
			}
			time.Sleep(time.Second)
		}
		a.err.Store(nil)
		b.err.Store(nil)
		res := route(t, r, context.Background(), ask("hi"))
		if got := outcomes(res.rep); res.err != nil || !slices.Equal(got, []Outcome{OutcomeCircuitOpen, OutcomeOK}) {
			t.Fatalf("all open, upstreams back: err %v, route %s", res.err, res.rep.Route())
		}
		if got := states(r)[res.rep.Deployment]; got != StateClosed {
			t.Errorf("%s served and is %s, want closed", res.rep.Deployment, got)
		}
	})
}

// An open deployment is not skipped when the only other one asked to wait
// past the request's deadline.
func TestOpenKeptWhenTheOtherMustWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := failing(e500)
		b := failing(&chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true, RetryAfter: time.Minute})
		r := newRouter(t, Alias{Breaker: BreakerConfig{ConsecutiveFailures: 2, Cooldown: time.Minute},
			Deployments: []Deployment{dep(a, "a", "m", 0), dep(b, "b", "m", 1)}})
		route(t, r, context.Background(), ask("hi"))
		if got := states(r); !cmp.Equal(got, map[string]string{"a/m": StateOpen, "b/m": StateClosed}) {
			t.Fatalf("states %v, want a open, b closed (its 429 does not count)", got)
		}
		a.err.Store(nil)
		if res := route(t, r, context.Background(), ask("hi")); res.err != nil || res.rep.Route() != "a/m=ok" {
			t.Errorf("err %v, route %s; want a/m tried though open", res.err, res.rep.Route())
		}
	})
}

// Failures that say nothing about the deployment do not open its circuit,
// though they still fail the attempt.
func TestRequestFailuresDoNotOpen(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  *chat.Error
	}{
		{"client-induced 500", &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Retryable: true, ClientInduced: true}},
		{"client-induced protocol", &chat.Error{Category: chat.CategoryProtocol, Retryable: true, ClientInduced: true}},
		{"429 Retry-After", &chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true, RetryAfter: time.Second}},
		{"429", &chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true}},
		{"503 Retry-After", &chat.Error{Category: chat.CategoryOverloaded, Status: 503, Retryable: true, RetryAfter: time.Second}},
		{"408", &chat.Error{Category: chat.CategoryTimeout, Status: 408, Retryable: true}},
		{"409", &chat.Error{Category: chat.CategoryInvalidRequest, Status: 409}},
		{"413", &chat.Error{Category: chat.CategoryContextLength, Status: 413}},
		{"422", &chat.Error{Category: chat.CategoryInvalidRequest, Status: 422}},
		{"context length", &chat.Error{Category: chat.CategoryContextLength, Status: 400}},
		{"content filter", &chat.Error{Category: chat.CategoryContentFilter}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := failing(tt.err)
				r := newRouter(t, Alias{MaxAttempts: 1, Breaker: BreakerConfig{ConsecutiveFailures: 2, MinRequests: 2},
					Deployments: []Deployment{dep(u, "u", "m", 0), dep(&upstream{}, "v", "m", 1)}})
				for range 10 {
					route(t, r, context.Background(), ask("hi"))
					time.Sleep(2 * time.Second) // past any Retry-After
				}
				if n := u.calls.Load(); n != 10 {
					t.Errorf("%d calls for 10 requests", n)
				}
				if h := r.Health()[0]; h.State != StateClosed || h.Consecutive != 0 {
					t.Errorf("health %+v, want closed with no failures counted", h)
				}
			})
		})
	}
}

// Failures of the deployment itself open its circuit, and the request
// falls back.
func TestDeploymentFailuresOpen(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  *chat.Error
	}{
		{"500", e500},
		{"503", &chat.Error{Category: chat.CategoryOverloaded, Status: 503, Retryable: true}},
		{"401", &chat.Error{Category: chat.CategoryAuth, Status: 401}},
		{"400 bad key", &chat.Error{Category: chat.CategoryAuth, Status: 400}},
		{"quota spent", &chat.Error{Category: chat.CategoryRateLimited, Status: 429}},
		{"402 unpaid", &chat.Error{Category: chat.CategoryRateLimited, Status: 402}},
		{"mid-stream overload", &chat.Error{Category: chat.CategoryOverloaded, Retryable: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := failing(tt.err)
				r := newRouter(t, Alias{Breaker: BreakerConfig{ConsecutiveFailures: 2},
					Deployments: []Deployment{dep(u, "u", "m", 0), dep(&upstream{}, "v", "m", 1)}})
				for range 2 {
					if res := route(t, r, context.Background(), ask("hi")); res.err != nil || res.rep.Deployment != "v/m" {
						t.Errorf("err %v, route %s; want a fallback to v/m", res.err, res.rep.Route())
					}
				}
				if h := r.Health()[0]; h.State != StateOpen {
					t.Errorf("health %+v, want open", h)
				}
			})
		})
	}
}

// The sim's fault directive (X-Firstword-Sim, or a [sim] tag) is the
// client's doing, end to end; the same fault configured on the provider
// counts.
func TestSimDirectiveDoesNotOpen(t *testing.T) {
	for _, tt := range []struct {
		name      string
		directive string // the X-Firstword-Sim header
		text      string
	}{
		{"header 500", "fault=500", "hi"},
		{"tag 500", "", "hi [sim fault=500]"},
		{"header hang", "fault=hang", "hi"},
		{"header 429", "fault=429", "hi"},
		{"tag 429 with a long Retry-After", "", "hi [sim fault=429 retry_after=600s]"},
		{"header error_mid", "fault=error_mid after=2", "hi"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := simWith("s", sim.Fault{})
				r := newRouter(t, Alias{MaxAttempts: 1, FirstTokenTimeout: time.Second, Breaker: BreakerConfig{ConsecutiveFailures: 2},
					Deployments: []Deployment{dep(s, "s", "fast", 0), dep(simWith("t", sim.Fault{}), "t", "fast", 1)}})
				for range 5 {
					req := ask(tt.text)
					if tt.directive != "" {
						req.Hints.Sim = tt.directive
					}
					if res := route(t, r, context.Background(), req); res.err == nil {
						t.Fatalf("the fault was not injected: route %s", res.rep.Route())
					}
				}
				if h := r.Health()[0]; h.State != StateClosed || h.Consecutive != 0 {
					t.Errorf("health %+v, want closed with no failures counted", h)
				}
				res := route(t, r, context.Background(), ask("hi"))
				if res.err != nil || res.rep.Route() != "s/fast=ok" {
					t.Errorf("a healthy request after the faults: err %v, route %s", res.err, res.rep.Route())
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		s := simWith("s", sim.Fault{Mode: sim.Fault500})
		r := newRouter(t, Alias{MaxAttempts: 1, Breaker: BreakerConfig{ConsecutiveFailures: 2},
			Deployments: []Deployment{dep(s, "s", "fast", 0), dep(simWith("t", sim.Fault{}), "t", "fast", 1)}})
		for range 2 {
			route(t, r, context.Background(), ask("hi"))
		}
		if h := r.Health()[0]; h.State != StateOpen {
			t.Errorf("a configured fault: health %+v, want open", h)
		}
	})
}

// TestOrderEjects pins down which open deployments a request skips.
// Deployments a, b, c, d have priorities 0, 1, 2, 3.
func TestOrderEjects(t *testing.T) {
	type ago = map[string]time.Duration
	for _, tt := range []struct {
		name    string
		n       int
		share   float64
		opened  ago    // how long ago each circuit opened
		cooling string // a deployment under a Retry-After
		// coolingPast: the Retry-After ends after the request's deadline.
		coolingPast bool
		try, skip   []string
		maxEject    int
		spare       int // how many of try may still be skipped
	}{
		{name: "one, open", n: 1, opened: ago{"a": time.Second}, try: []string{"a"}},
		{name: "two, closed", n: 2, try: []string{"a", "b"}, maxEject: 1, spare: 1},
		{name: "two, one open", n: 2, opened: ago{"a": time.Second}, try: []string{"b"}, skip: []string{"a"}, maxEject: 1},
		{name: "two, both open", n: 2, opened: ago{"a": 1 * time.Second, "b": 3 * time.Second},
			try: []string{"b"}, skip: []string{"a"}, maxEject: 1},
		{name: "two, share 1", n: 2, share: 1, opened: ago{"a": 3 * time.Second, "b": 1 * time.Second},
			try: []string{"a"}, skip: []string{"b"}, maxEject: 1},
		{name: "three, two open", n: 3, opened: ago{"a": 3 * time.Second, "b": 1 * time.Second},
			try: []string{"c", "a"}, skip: []string{"b"}, maxEject: 1},
		{name: "four, three open", n: 4, opened: ago{"a": 3 * time.Second, "b": 2 * time.Second, "c": 1 * time.Second},
			try: []string{"d", "a"}, skip: []string{"b", "c"}, maxEject: 2},
		{name: "four, one open", n: 4, opened: ago{"b": time.Second}, try: []string{"a", "c", "d"}, skip: []string{"b"}, maxEject: 2, spare: 1},
		{name: "share 0.1", n: 3, share: 0.1, opened: ago{"a": 1 * time.Second, "b": 2 * time.Second},
			try: []string{"c", "a", "b"}},
		{name: "share 0.3 of 10", n: 10, share: 0.3, try: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, maxEject: 3, spare: 3},
		{name: "cooldown over: probe", n: 2, opened: ago{"a": 11 * time.Second}, try: []string{"a", "b"}, maxEject: 1, spare: 1},
		{name: "cooling goes last", n: 3, opened: ago{"b": time.Second}, cooling: "a",
			try: []string{"c", "a"}, skip: []string{"b"}, maxEject: 1},
		{name: "the other cooling past the deadline", n: 2, cooling: "a", coolingPast: true, try: []string{"b", "a"}, maxEject: 1},
		{name: "the only other cooling past the deadline", n: 2, opened: ago{"b": time.Second}, cooling: "a", coolingPast: true,
			try: []string{"b", "a"}, maxEject: 1},
		{name: "the only other cooling within the deadline", n: 2, opened: ago{"b": time.Second}, cooling: "a",
			try: []string{"a"}, skip: []string{"b"}, maxEject: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := Alias{Breaker: BreakerConfig{MaxEjectedShare: tt.share, Cooldown: 10 * time.Second}}
			for i := range tt.n {
				a.Deployments = append(a.Deployments, Deployment{ID: string(rune('a' + i)), Provider: &upstream{}, Priority: i})
			}
			r := newRouter(t, a)
			now := time.Now()
			for id, ago := range tt.opened {
				r.health[id].trip(now.Add(-ago))
			}
			deadline := now.Add(time.Minute)
			if tt.cooling != "" {
				until := now.Add(time.Second)
				if tt.coolingPast {
					until = deadline
				}
				r.health[tt.cooling].setCooldown(until)
			}
			al := r.aliases["chat"]
			try, skip, spare := r.order(al, now, deadline)
			ids := func(ds []*deployment) []string {
				var out []string
				for _, d := range ds {
					out = append(out, d.ID)
				}
				return out
			}
			skipped := ids(skip)
			slices.Sort(skipped)
			if diff := cmp.Diff(tt.try, ids(try)); diff != "" {
				t.Errorf("try (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.skip, skipped); diff != "" {
				t.Errorf("skip (-want +got):\n%s", diff)
			}
			if al.maxEjected != tt.maxEject || spare != tt.spare {
				t.Errorf("maxEjected = %d, spare = %d; want %d, %d", al.maxEjected, spare, tt.maxEject, tt.spare)
			}
		})
	}
}
