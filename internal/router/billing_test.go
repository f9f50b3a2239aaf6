package router

import (
	"context"
	"iter"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/provider/sim"
	"github.com/google/go-cmp/cmp"
)

// beat is one step of a scripted upstream: after wait, a chunk or an
// error.
type beat struct {
	wait time.Duration
	c    chat.Chunk
	err  error
}

// script is an upstream that plays beats, then hangs until cancelled
// unless the last beat ended the answer. A deaf one ignores cancellation
// while it waits: what it was about to send is sent all the same, as a
// token already on the wire would be.
func script(deaf bool, beats ...beat) provider.Provider {
	return providertest.Func(func(ctx context.Context, _ *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			for _, b := range beats {
				if b.wait > 0 {
					if deaf {
						time.Sleep(b.wait)
					} else if !sleep(ctx, b.wait) {
						yield(chat.Chunk{}, context.Cause(ctx))
						return
					}
				}
				if b.err != nil {
					yield(chat.Chunk{}, b.err)
					return
				}
				if !yield(b.c, nil) || b.c.FinishReason != "" {
					return
				}
			}
			<-ctx.Done()
			yield(chat.Chunk{}, context.Cause(ctx))
		}
	})
}

// puller makes a provider a provider.Puller, for the router's other path.
type puller struct{ provider.Provider }

func (p puller) Pull(ctx context.Context, req *chat.Request) provider.Reader {
	next, stop := iter.Pull2(iter.Seq2[chat.Chunk, error](p.Stream(ctx, req)))
	return &seqReader{next: next, stop: stop}
}

// answerer is a backup that answers after ttft with n words and its usage.
func answerer(ttft time.Duration, n int, u chat.Usage) provider.Provider {
	beats := []beat{{wait: ttft, c: chat.Chunk{Model: "b", Text: "hello"}}}
	for range n - 1 {
		beats = append(beats, beat{wait: 50 * time.Millisecond, c: chat.Chunk{Text: " word"}})
	}
	beats = append(beats, beat{c: chat.Chunk{FinishReason: chat.FinishStop, Usage: &u}})
	return script(false, beats...)
}

func usage(in, out int, est bool) *chat.Usage {
	return &chat.Usage{InputTokens: in, OutputTokens: out, Estimated: est}
}

// A hedge that lost is billed what it cost: the input its provider
// reported, the output it reported while thinking, and the text it had
// already sent when it was cancelled, estimated. The answer is the
// winner's alone.
func TestHedgeLoserIsBilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const late = "late words here"
		loser := script(true,
			beat{c: chat.Chunk{Model: "p", UsageSoFar: usage(900, 0, false)}},
			beat{wait: 10 * time.Millisecond, c: chat.Chunk{UsageSoFar: usage(900, 3, false)}}, // thinking
			beat{wait: 290 * time.Millisecond, c: chat.Chunk{Text: late}},                      // on its way at 300ms
		)
		r := newRouter(t, Alias{Hedge: Hedge{Enabled: true, Delay: 100 * time.Millisecond}, Deployments: []Deployment{
			dep(loser, "p", "m", 0), dep(answerer(50*time.Millisecond, 10, chat.Usage{InputTokens: 12, OutputTokens: 10}), "b", "m", 1)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil || res.rep.Deployment != "b/m" || res.firstAt != 150*time.Millisecond {
			t.Fatalf("err %v, served by %q at %v", res.err, res.rep.Deployment, res.firstAt)
		}
		if got := outcomes(res.rep); !slices.Equal(got, []Outcome{OutcomeHedgeLost, OutcomeOK}) {
			t.Fatalf("attempts %v", got)
		}
		want := []*chat.Usage{usage(900, 3+chat.EstimateTokens(late), true), nil}
		var got []*chat.Usage
		for _, a := range res.rep.Attempts {
			got = append(got, a.Usage)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("attempts' usage (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(usage(12, 10, false), res.usage); diff != "" {
			t.Errorf("the answer's usage (-want +got):\n%s", diff)
		}
	})
}

// Every attempt the upstream took and that did not give the answer is
// billed; one it refused is not.
func TestAbandonedAttemptsAreBilled(t *testing.T) {
	req := ask("what does an abandoned attempt cost?")
	estimate := usage(chat.EstimateInputTokens(req), 0, true)
	for _, tc := range []struct {
		name    string
		primary provider.Provider
		outcome Outcome
		want    *chat.Usage
	}{
		{"silent past the first-token timeout", script(false), OutcomeFirstTokenTimeout, estimate},
		{"reported its input, then silent", script(false, beat{c: chat.Chunk{Model: "p", UsageSoFar: usage(1234, 1, false)}}),
			OutcomeFirstTokenTimeout, usage(1234, 1, false)},
		{"refused with a status", script(false, beat{err: &chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true}}),
			OutcomeError, nil},
		{"unreachable", script(false, beat{err: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Retryable: true}}),
			OutcomeError, nil},
		{"failed after it began", script(false, beat{c: chat.Chunk{Model: "p"}},
			beat{err: &chat.Error{Category: chat.CategoryOverloaded, Retryable: true}}), OutcomeError, estimate},
		{"failed after reporting its input", script(false, beat{c: chat.Chunk{Model: "p", UsageSoFar: usage(50, 1, false)}},
			beat{err: &chat.Error{Category: chat.CategoryOverloaded, Retryable: true}}), OutcomeError, usage(50, 1, false)},
	} {
		for _, how := range []string{"stream", "pull"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := tc.primary
					if how == "pull" {
						p = puller{p}
					}
					r := newRouter(t, Alias{FirstTokenTimeout: time.Second, Deployments: []Deployment{
						dep(p, "p", "m", 0), dep(answerer(0, 3, chat.Usage{InputTokens: 9, OutputTokens: 3}), "b", "m", 1)}})
					res := route(t, r, context.Background(), req)
					if res.err != nil || res.rep.Deployment != "b/m" {
						t.Fatalf("err %v, served by %q", res.err, res.rep.Deployment)
					}
					if got := outcomes(res.rep); !slices.Equal(got, []Outcome{tc.outcome, OutcomeOK}) {
						t.Fatalf("attempts %v", got)
					}
					if diff := cmp.Diff(tc.want, res.rep.Attempts[0].Usage); diff != "" {
						t.Errorf("the abandoned attempt's usage (-want +got):\n%s", diff)
					}
					if u := res.rep.Attempts[1].Usage; u != nil {
						t.Errorf("the answer billed as an attempt: %+v", u)
					}
				})
			})
		}
	}
}

// An attempt the client left while it waited was sent, and is billed.
func TestAttemptBilledWhenClientLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := simWith("s", sim.Fault{})
		r := newRouter(t, Alias{Deployments: []Deployment{dep(s, "s", "slow", 0)}})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		req := ask("hi")
		res := route(t, r, ctx, req)
		if res.err == nil || !slices.Equal(outcomes(res.rep), []Outcome{OutcomeCancelled}) {
			t.Fatalf("err %v, attempts %v", res.err, outcomes(res.rep))
		}
		if diff := cmp.Diff(usage(chat.EstimateInputTokens(req), 0, true), res.rep.Attempts[0].Usage); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})
}

// A stream cut by the deadline keeps the input its provider reported; only
// the output is estimated.
func TestCutKeepsReportedUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := script(false,
			beat{c: chat.Chunk{Model: "p", UsageSoFar: usage(700, 1, false)}},
			beat{wait: 100 * time.Millisecond, c: chat.Chunk{Text: "abcd"}},
			beat{wait: 100 * time.Millisecond, c: chat.Chunk{Text: "efgh"}},
		)
		r := newRouter(t, Alias{Timeout: time.Second, Deployments: []Deployment{dep(slow, "p", "m", 0)}})
		res := route(t, r, context.Background(), ask("hi"))
		if res.err != nil || res.finish != chat.FinishTimeout {
			t.Fatalf("err %v, finish %q", res.err, res.finish)
		}
		if diff := cmp.Diff(usage(700, 1+2, true), res.usage); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	})
}
