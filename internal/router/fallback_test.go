package router

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider/sim"
)

// ruleRouter has a rule's alias, fast, and the alias asked for, chat.
func ruleRouter(t *testing.T, fast, chat Alias) *Router {
	t.Helper()
	fast.Name, chat.Name = "fast", "chat"
	r, err := New(Config{Aliases: []Alias{fast, chat}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// routeFallback routes a request for fast that falls back to chat.
func routeFallback(t *testing.T, r *Router, ctx context.Context) result {
	t.Helper()
	req, fb := ask("hi"), ask("hi")
	req.Model = "fast"
	ctx, cancel := withDeadline(r, ctx, req.Model)
	defer cancel()
	start := time.Now()
	var res result
	var col chat.Collector
	for c, err := range r.StreamFallback(ctx, req, fb, &res.rep) {
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
	if resp := col.Response(); len(resp.Choices) > 0 {
		res.text, res.finish = resp.Choices[0].Text, resp.Choices[0].FinishReason
	}
	return res
}

func TestRuleTargetFailsFallsBackToAskedAlias(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := failing(&chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "connection refused", Retryable: true})
		up := &upstream{}
		r := ruleRouter(t,
			Alias{Deployments: []Deployment{dep(down, "local", "small", 0)}},
			Alias{Deployments: []Deployment{dep(up, "openai", "gpt-4o", 0)}})
		res := routeFallback(t, r, context.Background())
		if res.err != nil || res.text != "ok" {
			t.Fatalf("err %v, text %q: want chat's answer", res.err, res.text)
		}
		rep := res.rep
		if rep.Deployment != "openai/gpt-4o" || rep.Alias != "fast, fell back to chat" || rep.Fallback != "chat" {
			t.Errorf("deployment %q, alias %q, fallback %q", rep.Deployment, rep.Alias, rep.Fallback)
		}
		// fast's one deployment is tried twice (its max_attempts), then chat.
		if want := "local/small=error, local/small=error, fell back to chat: openai/gpt-4o=ok"; rep.Route() != want {
			t.Errorf("route %q, want %q", rep.Route(), want)
		}
		if to, fellBack := RuleTarget(rep.Alias); to != "fast" || !fellBack {
			t.Errorf("RuleTarget(%q) = %q, %v, want fast, true", rep.Alias, to, fellBack)
		}
		if down.calls.Load() != 2 || up.calls.Load() != 1 {
			t.Errorf("calls: fast %d, chat %d", down.calls.Load(), up.calls.Load())
		}
	})
}

// Without a failure the fallback is never asked, and the report is that of
// a plain request for the rule's alias.
func TestRuleTargetServesWithoutFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast, slow := &upstream{}, &upstream{}
		r := ruleRouter(t, Alias{Deployments: []Deployment{dep(fast, "local", "small", 0)}},
			Alias{Deployments: []Deployment{dep(slow, "openai", "gpt-4o", 0)}})
		res := routeFallback(t, r, context.Background())
		if res.err != nil || res.rep.Alias != "fast" || res.rep.Fallback != "" || slow.calls.Load() != 0 {
			t.Errorf("err %v, alias %q, fallback %q, chat called %d times", res.err, res.rep.Alias, res.rep.Fallback, slow.calls.Load())
		}
		if to, fellBack := RuleTarget(res.rep.Alias); to != "fast" || fellBack {
			t.Errorf("RuleTarget(%q) = %q, %v", res.rep.Alias, to, fellBack)
		}
	})
}

// One deadline, set from the rule's alias when the request starts: the
// fallback gets what is left of it, not a deadline of its own.
func TestRuleFallbackSharesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := simWith("local", sim.Fault{Mode: sim.FaultHang})
		writer := simWith("openai", sim.Fault{}) // "write": 200 tokens at 10/s
		r := ruleRouter(t,
			Alias{Timeout: 10 * time.Second, FirstTokenTimeout: 2 * time.Second, MaxAttempts: 1, Deployments: []Deployment{dep(hang, "local", "fast", 0)}},
			Alias{Timeout: time.Minute, Deployments: []Deployment{dep(writer, "openai", "write", 0)}})
		start := time.Now()
		res := routeFallback(t, r, context.Background())
		if res.err != nil || res.rep.Fallback != "chat" {
			t.Fatalf("err %v, fallback %q", res.err, res.rep.Fallback)
		}
		if !res.rep.Deadline.Equal(start.Add(10 * time.Second)) {
			t.Errorf("deadline %v after the start, want fast's 10s", res.rep.Deadline.Sub(start))
		}
		if res.finish != chat.FinishTimeout || res.endAt != 10*time.Second {
			t.Errorf("finish %q at %v, want chat's answer cut at the shared 10s deadline", res.finish, res.endAt)
		}
		if want := []Outcome{OutcomeFirstTokenTimeout, OutcomeDeadline}; !slices.Equal(outcomes(res.rep), want) {
			t.Errorf("attempts %v, want %v", outcomes(res.rep), want)
		}
	})
}

// A deadline that passes on the rule's alias leaves nothing to fall back
// with: the request ends as a timeout and the fallback is never asked.
func TestRuleFallbackNotAfterTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := simWith("local", sim.Fault{Mode: sim.FaultHang})
		other := &upstream{}
		r := ruleRouter(t,
			Alias{Timeout: 3 * time.Second, FirstTokenTimeout: 5 * time.Second, Deployments: []Deployment{dep(hang, "local", "fast", 0)}},
			Alias{Deployments: []Deployment{dep(other, "openai", "gpt-4o", 0)}})
		res := routeFallback(t, r, context.Background())
		var ce *chat.Error
		if !errors.As(res.err, &ce) || ce.Category != chat.CategoryTimeout || res.endAt != 3*time.Second {
			t.Errorf("got %v at %v, want a timeout at 3s", res.err, res.endAt)
		}
		if other.calls.Load() != 0 || res.rep.Fallback != "" {
			t.Errorf("the fallback was asked (%d calls, fallback %q)", other.calls.Load(), res.rep.Fallback)
		}
	})
}

// A request at fault is refused by the fallback as well: no fallback. A
// context too long for the rule's (smaller) model may fit the other's.
func TestRuleFallbackOnlyWhereTheOtherMayServe(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      *chat.Error
		fallback bool
	}{
		{"invalid request", &chat.Error{Category: chat.CategoryInvalidRequest, Status: 400, Message: "bad tool schema"}, false},
		{"context length", &chat.Error{Category: chat.CategoryContextLength, Status: 400, Message: "too long"}, true},
		{"bad key", &chat.Error{Category: chat.CategoryAuth, Status: 401}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bad, good := failing(tc.err), &upstream{}
				r := ruleRouter(t, Alias{Deployments: []Deployment{dep(bad, "local", "small", 0)}},
					Alias{Deployments: []Deployment{dep(good, "openai", "gpt-4o", 0)}})
				res := routeFallback(t, r, context.Background())
				if fellBack := good.calls.Load() == 1; fellBack != tc.fallback {
					t.Fatalf("fell back = %v, want %v (err %v, route %s)", fellBack, tc.fallback, res.err, res.rep.Route())
				}
				var ce *chat.Error
				if !tc.fallback && (!errors.As(res.err, &ce) || ce.Status != tc.err.Status) {
					t.Errorf("err %v, want the rule's alias's %d", res.err, tc.err.Status)
				}
				if tc.fallback && (res.err != nil || res.rep.Alias != "fast, fell back to chat") {
					t.Errorf("err %v, alias %q", res.err, res.rep.Alias)
				}
			})
		})
	}
}

// A deployment both aliases share keeps what the request learnt of it: a
// broken one is not asked again by the fallback.
func TestRuleFallbackRemembersBrokenDeployments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		badKey := failing(&chat.Error{Category: chat.CategoryAuth, Status: 401})
		good := &upstream{}
		shared := dep(badKey, "openai", "gpt-4o-mini", 0)
		r := ruleRouter(t, Alias{Deployments: []Deployment{shared}},
			Alias{Deployments: []Deployment{shared, dep(good, "backup", "m", 1)}})
		res := routeFallback(t, r, context.Background())
		if res.err != nil || badKey.calls.Load() != 1 || good.calls.Load() != 1 {
			t.Errorf("err %v, calls: shared %d, backup %d; route %s", res.err, badKey.calls.Load(), good.calls.Load(), res.rep.Route())
		}
	})
}

// The caller breaking out at every chunk of a fallen-back stream leaves
// nothing running.
func TestRuleFallbackBreakAtEveryChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := failing(e500)
		r := ruleRouter(t, Alias{MaxAttempts: 1, Deployments: []Deployment{dep(down, "local", "small", 0)}},
			Alias{Deployments: []Deployment{dep(simWith("openai", sim.Fault{}), "openai", "fast", 0)}})
		for stop := 0; stop < 5; stop++ {
			req, fb := ask("hi"), ask("hi")
			req.Model = "fast"
			var rep Report
			n := 0
			for _, err := range r.StreamFallback(context.Background(), req, fb, &rep) {
				if err != nil {
					t.Fatal(err)
				}
				if n == stop {
					break
				}
				n++
			}
			if !strings.HasPrefix(rep.Route(), "local/small=error(500), fell back to chat: openai/fast=") {
				t.Errorf("route %q", rep.Route())
			}
		}
		synctest.Wait()
	})
}
