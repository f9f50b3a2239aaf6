package router

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// thinker thinks for each of thoughts (one delta every step), then either
// answers "ok" or, with fail set, fails before answering.
func thinker(thoughts []string, step time.Duration, fail error) providertest.Func {
	return providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			for _, th := range thoughts {
				select {
				case <-ctx.Done():
					yield(chat.Chunk{}, context.Cause(ctx))
					return
				case <-time.After(step):
				}
				if !yield(chat.Chunk{Thinking: th}, nil) {
					return
				}
			}
			if fail != nil {
				yield(chat.Chunk{}, fail)
				return
			}
			if !yield(chat.Chunk{Thought: &chat.Thought{Signature: "sig", Format: chat.ThinkingAnthropic}}, nil) {
				return
			}
			yield(chat.Chunk{Text: "ok", FinishReason: chat.FinishStop}, nil)
		}
	})
}

// seen is what a client of the router saw, chunk by chunk.
type seen struct {
	kinds []string // "think:<text>", "restart", "sig", "text:<text>"
	err   error
	rep   Report
	at    []time.Duration
}

func watch(t *testing.T, r *Router) seen {
	t.Helper()
	ctx, cancel := withDeadline(r, context.Background(), "chat")
	defer cancel()
	start := time.Now()
	var s seen
	for c, err := range r.StreamReport(ctx, ask("hi"), &s.rep) {
		if err != nil {
			s.err = err
			break
		}
		switch {
		case c.Thought != nil && c.Thought.Restart:
			s.kinds = append(s.kinds, "restart")
		case c.Thinking != "":
			s.kinds = append(s.kinds, "think:"+c.Thinking)
		case c.Thought != nil:
			s.kinds = append(s.kinds, "sig")
		case c.Text != "":
			s.kinds = append(s.kinds, "text:"+c.Text)
		default:
			continue
		}
		s.at = append(s.at, time.Since(start))
	}
	return s
}

func TestThinkingSatisfiesFirstTokenTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Thinking for 6 s in 1 s steps, against a 2 s first-token timeout:
		// the model is not stuck, so it is not abandoned.
		slow := thinker([]string{"a", "b", "c", "d", "e", "f"}, time.Second, nil)
		r := newRouter(t, Alias{FirstTokenTimeout: 2 * time.Second, Deployments: []Deployment{
			dep(slow, "thinker", "x", 0), dep(answer, "other", "y", 1)}})
		s := watch(t, r)
		if s.err != nil {
			t.Fatal(s.err)
		}
		want := []string{"think:a", "think:b", "think:c", "think:d", "think:e", "think:f", "sig", "text:ok"}
		if !slices.Equal(s.kinds, want) {
			t.Errorf("saw %q, want %q", s.kinds, want)
		}
		// Thinking streams as it comes, not held until the answer.
		if s.at[0] != time.Second {
			t.Errorf("first thought at %v, want 1s", s.at[0])
		}
		if got := outcomes(s.rep); !slices.Equal(got, []Outcome{OutcomeOK}) || s.rep.Deployment != "thinker/x" {
			t.Errorf("attempts %v, served by %q", got, s.rep.Deployment)
		}
		// The first token is the first answer token, not the first thought.
		if ft := s.rep.FirstToken.Sub(s.rep.Attempts[0].Start); ft != 6*time.Second {
			t.Errorf("first token after %v, want 6s", ft)
		}
	})
}

func TestFailureWhileThinkingFallsBackWithRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := thinker([]string{"a", "b"}, time.Second, &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "overloaded", Retryable: true})
		backup := thinker([]string{"x"}, time.Second, nil)
		r := newRouter(t, Alias{FirstTokenTimeout: 5 * time.Second, MaxAttempts: 2, Deployments: []Deployment{
			dep(broken, "broken", "x", 0), dep(backup, "backup", "y", 1)}})
		s := watch(t, r)
		if s.err != nil {
			t.Fatalf("a failure during thinking reached the client: %v", s.err)
		}
		want := []string{"think:a", "think:b", "restart", "think:x", "sig", "text:ok"}
		if !slices.Equal(s.kinds, want) {
			t.Errorf("saw %q, want %q", s.kinds, want)
		}
		if got := outcomes(s.rep); !slices.Equal(got, []Outcome{OutcomeError, OutcomeOK}) || s.rep.Deployment != "backup/y" {
			t.Errorf("attempts %v, served by %q", got, s.rep.Deployment)
		}
	})
}

func TestThinkingWinsHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The primary thinks from 1 s; the hedge delay is 2 s: no backup.
		primary := thinker([]string{"a", "b", "c"}, time.Second, nil)
		backup := thinker([]string{"z"}, 10*time.Millisecond, nil)
		r := newRouter(t, Alias{FirstTokenTimeout: 10 * time.Second, Hedge: Hedge{Enabled: true, Delay: 2 * time.Second}, Deployments: []Deployment{
			dep(primary, "primary", "x", 0), dep(backup, "backup", "y", 1)}})
		s := watch(t, r)
		if s.err != nil || s.rep.Deployment != "primary/x" {
			t.Fatalf("err %v, served by %q", s.err, s.rep.Deployment)
		}
		if len(s.rep.Attempts) != 1 {
			t.Errorf("a thinking primary was hedged: %v", outcomes(s.rep))
		}
	})
}

// hanger thinks once after first, then says nothing until cancelled.
func hanger(first time.Duration) providertest.Func {
	return providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			select {
			case <-ctx.Done():
				yield(chat.Chunk{}, context.Cause(ctx))
				return
			case <-time.After(first):
			}
			if !yield(chat.Chunk{Thinking: "hmm"}, nil) {
				return
			}
			<-ctx.Done()
			yield(chat.Chunk{}, context.Cause(ctx))
		}
	})
}

// A model that thought once and then went quiet for a first-token timeout
// is stuck: the next deployment answers.
func TestThinkingThenSilenceTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRouter(t, Alias{FirstTokenTimeout: 2 * time.Second, Deployments: []Deployment{
			dep(hanger(time.Second), "stuck", "x", 0), dep(thinker([]string{"y"}, time.Second, nil), "good", "y", 1)}})
		s := watch(t, r)
		if s.err != nil || s.rep.Deployment != "good/y" {
			t.Fatalf("err %v, served by %q", s.err, s.rep.Deployment)
		}
		if got := outcomes(s.rep); !slices.Equal(got, []Outcome{OutcomeFirstTokenTimeout, OutcomeOK}) {
			t.Errorf("attempts %v", got)
		}
		// Thought at 1 s, quiet until 3 s; the second deployment thinks at 4 s.
		if want := []string{"think:hmm", "restart", "think:y", "sig", "text:ok"}; !slices.Equal(s.kinds, want) {
			t.Errorf("saw %q, want %q", s.kinds, want)
		}
		if s.at[2] != 4*time.Second {
			t.Errorf("the second deployment's thought at %v, want 4s", s.at[2])
		}
	})
}

// A client that leaves while the model thinks: the attempt is cancelled,
// and billed for what it streamed.
func TestLeaveWhileThinkingIsBilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRouter(t, Alias{FirstTokenTimeout: 5 * time.Second, Deployments: []Deployment{
			dep(thinker([]string{"a", "b", "c"}, time.Second, nil), "thinker", "x", 0)}})
		ctx, cancel := withDeadline(r, context.Background(), "chat")
		defer cancel()
		var rep Report
		for c, err := range r.StreamReport(ctx, ask("hi"), &rep) {
			if err != nil || c.Thinking == "b" {
				break
			}
		}
		if got := outcomes(rep); !slices.Equal(got, []Outcome{OutcomeCancelled}) {
			t.Fatalf("attempts %v", got)
		}
		if u := rep.Attempts[0].Usage; u == nil || u.OutputTokens == 0 {
			t.Errorf("the attempt's thinking was not billed: usage %+v", u)
		}
	})
}

// A hedged primary that wins by thinking and then fails before answering
// leaves the backup it beat to be tried: it answers.
func TestHedgeThinkingWinnerFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "overloaded", Retryable: true}
		primary := thinker([]string{"a"}, time.Second, fail)
		backup := thinker([]string{"b", "c"}, time.Second, nil)
		r := newRouter(t, Alias{FirstTokenTimeout: 10 * time.Second, MaxAttempts: 3, Hedge: Hedge{Enabled: true, Delay: 500 * time.Millisecond}, Deployments: []Deployment{
			dep(primary, "primary", "x", 0), dep(backup, "backup", "y", 1)}})
		s := watch(t, r)
		if s.err != nil || s.rep.Deployment != "backup/y" {
			t.Fatalf("err %v, served by %q, attempts %v", s.err, s.rep.Deployment, outcomes(s.rep))
		}
		if want := []string{"think:a", "restart", "think:b", "think:c", "sig", "text:ok"}; !slices.Equal(s.kinds, want) {
			t.Errorf("saw %q, want %q", s.kinds, want)
		}
	})
}
