package call

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/router"
)

// thinker starts thinking after wait, thinks for think (a delta at its
// start, another half way, a signature at its end), then answers; with
// fail set it fails instead of answering.
func thinker(wait, think time.Duration, fail error) providertest.Func {
	return providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			steps := []struct {
				after time.Duration
				chunk chat.Chunk
			}{
				{wait, chat.Chunk{Model: "r1", Thinking: "Let me"}},
				{think / 2, chat.Chunk{Thinking: " think."}},
				{think / 2, chat.Chunk{Thought: &chat.Thought{Signature: "sig", Format: chat.ThinkingAnthropic}}},
				{0, chat.Chunk{Text: "Hello"}},
				{10 * time.Millisecond, chat.Chunk{Text: "!", FinishReason: chat.FinishStop,
					Usage: &chat.Usage{InputTokens: 10, OutputTokens: 60, ReasoningTokens: 50}}},
			}
			for i, s := range steps {
				if fail != nil && i == 3 {
					yield(chat.Chunk{}, fail)
					return
				}
				select {
				case <-ctx.Done():
					yield(chat.Chunk{}, context.Cause(ctx))
					return
				case <-time.After(s.after):
				}
				if !yield(s.chunk, nil) {
					return
				}
			}
		}
	})
}

// routed are calls through real levers and a real router, to alias
// "chat", served by deployments in order of priority, with the alias's
// thinking policy.
func routed(t *testing.T, thinking levers.Thinking, meter metering.Meter, provs ...providertest.Func) *Calls {
	t.Helper()
	var deps []router.Deployment
	for i, p := range provs {
		deps = append(deps, router.Deployment{ProviderName: "p" + string(rune('a'+i)), Model: "m", Provider: p, Priority: i})
	}
	r, err := router.New(router.Config{Seed: 1, Aliases: []router.Alias{{Name: "chat", FirstTokenTimeout: 5 * time.Second, MaxAttempts: len(provs), Deployments: deps}}})
	if err != nil {
		t.Fatal(err)
	}
	l := levers.New(levers.Options{Inner: r, Aliases: map[string]levers.Alias{"chat": {Thinking: thinking}}})
	return New(Options{Routes: l, Meter: meter})
}

// surfaced is what a surface did with a call's stream: it delivered
// each chunk, wrote it (taking write) unless it was empty, and told the
// call it was shown.
type surfaced struct {
	chunks []chat.Chunk
	err    error
}

func surface(ctx context.Context, c *Call, req *chat.Request, write time.Duration) surfaced {
	var s surfaced
	for ch, err := range c.Stream(ctx, req) {
		if err != nil {
			s.err = err
			break
		}
		c.Deliver(&ch)
		s.chunks = append(s.chunks, ch)
		if ch.Text == "" && ch.Thinking == "" && ch.Thought == nil && ch.FinishReason == "" {
			continue // nothing to write
		}
		time.Sleep(write)
		c.Shown()
	}
	return s
}

// begin resolves a call of cs's for a request arriving now and opens
// its context, released when the test ends.
func begin(t *testing.T, cs *Calls) (*Call, context.Context, *budget.Recorder) {
	rec := budget.New(time.Now())
	c, err := cs.Resolve(request(rec), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, release := c.Context(t.Context())
	t.Cleanup(func() { release(nil) })
	return c, ctx, rec
}

// stage is a recorded stage, on the request's clock.
type stage struct {
	Name       string
	Start, End time.Duration
	Note       string
}

func stagesOf(rec *budget.Recorder) []stage {
	var out []stage
	for _, s := range rec.Stages() {
		out = append(out, stage{s.Name, s.Start, s.End, s.Note})
	}
	return out
}

// TestThinkingStages: a model that thinks for 200 ms before answering
// gets first_thought (from the upstream call's start to the first
// thought shown, after its write) and thinking (from there to the first
// answer token), in that order, inside the time to its first token;
// the recorder's time to first thought and thinking time say the same,
// and the metering record carries them with the reasoning tokens.
func TestThinkingStages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		var m records
		c, ctx, rec := begin(t, routed(t, levers.Thinking{}, &m, thinker(50*ms, 200*ms, nil)))
		req := ask("chat")
		s := surface(ctx, c, req, ms)
		if s.err != nil {
			t.Fatal(s.err)
		}
		if s.chunks[0].Thinking != "Let me" || s.chunks[2].Thought == nil {
			t.Errorf("the thinking was not delivered as it came: %+v", s.chunks)
		}
		c.Meter(t.Context(), c.End(ctx, nil, false).Ending, c.Usage(req))
		// The first thought comes at 50 ms and is shown at 51; each of the
		// three thinking chunks' writes (1 ms) holds the upstream's read
		// back, so the answer comes at 253 ms, shown at 254.
		want := []stage{
			{"route", 0, 0, ""},
			{"upstream pa/m", 0, 265 * ms, "ok"},
			{"ttft", 0, 253 * ms, "pa/m"},
			{"first_thought", 0, 51 * ms, "pa/m"},
			{"thinking", 51 * ms, 253 * ms, "pa/m"},
			{"generation", 253 * ms, 265 * ms, "pa/m"},
		}
		if diff := cmp.Diff(want, stagesOf(rec)); diff != "" {
			t.Errorf("stages (-want +got):\n%s", diff)
		}
		if rec.TTFThought() != 51*ms || rec.Thinking() != 202*ms || rec.TTFW() != 254*ms {
			t.Errorf("first thought %v, thinking %v, first word %v; want 51ms, 202ms, 254ms", rec.TTFThought(), rec.Thinking(), rec.TTFW())
		}
		if tm := rec.Timings(); tm.TTFThoughtMs != 51 || tm.ThinkingMs != 202 {
			t.Errorf("timings %+v, want ttfthought_ms 51, thinking_ms 202", tm)
		}
		if len(m) != 1 || m[0].TTFThought != 51*ms || m[0].Thinking != 202*ms || m[0].Usage.ReasoningTokens != 50 {
			t.Errorf("record %+v", m[0])
		}
	})
}

// TestNoThinking: a model that did not think gets no thinking stages and
// no time to first thought.
func TestNoThinking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ctx, rec := begin(t, New(Options{Routes: &routes{script: hello}}))
		surface(ctx, c, ask("chat"), time.Millisecond)
		c.End(ctx, nil, false)
		for _, s := range rec.Stages() {
			if s.Name == "first_thought" || s.Name == "thinking" {
				t.Errorf("stage %+v for a model that did not think", s)
			}
		}
		if rec.TTFThought() != 0 || rec.Thinking() != 0 || rec.TTFW() == 0 {
			t.Errorf("first thought %v, thinking %v, first word %v; want none, none, one", rec.TTFThought(), rec.Thinking(), rec.TTFW())
		}
	})
}

// TestHiddenThinking: an alias that does not show the thinking (show:
// false) has the call clear it from every chunk before the surface
// encodes it, after tallying it: measured from its delivery, and billed.
func TestHiddenThinking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		c, ctx, rec := begin(t, routed(t, levers.Thinking{Hide: true}, nil, thinker(50*ms, 200*ms, nil)))
		req := ask("chat")
		s := surface(ctx, c, req, ms)
		if s.err != nil {
			t.Fatal(s.err)
		}
		for _, ch := range s.chunks {
			if ch.Thinking != "" || ch.Thought != nil {
				t.Errorf("hidden thinking reached the surface: %+v", ch)
			}
		}
		if got := c.Tally().Thinking; got != len("Let me think.") {
			t.Errorf("tallied %d bytes of thinking, want %d", got, len("Let me think."))
		}
		c.End(ctx, nil, false)
		if rec.TTFThought() != 50*ms || rec.Thinking() != 200*ms {
			t.Errorf("first thought %v, thinking %v; want 50ms (delivered), 200ms", rec.TTFThought(), rec.Thinking())
		}
	})
}

// TestThinkingRestart: when an attempt thinks and fails before its
// answer, the next attempt's thinking is what counts: first_thought is
// from its start to its first thought.
func TestThinkingRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		broken := thinker(30*ms, 100*ms, &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "overloaded", Retryable: true})
		c, ctx, rec := begin(t, routed(t, levers.Thinking{}, nil, broken, thinker(50*ms, 200*ms, nil)))
		s := surface(ctx, c, ask("chat"), 0)
		if s.err != nil {
			t.Fatal(s.err)
		}
		c.End(ctx, nil, false)
		var got []stage
		for _, s := range stagesOf(rec) {
			if s.Name == "first_thought" || s.Name == "thinking" {
				got = append(got, s)
			}
		}
		// The second attempt started at 130 ms, thought at 180 ms, answered at 380 ms.
		want := []stage{{"first_thought", 130 * ms, 180 * ms, "pb/m"}, {"thinking", 180 * ms, 380 * ms, "pb/m"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("thinking stages (-want +got):\n%s", diff)
		}
		if rec.TTFThought() != 180*ms {
			t.Errorf("first thought %v, want 180ms (the attempt that served)", rec.TTFThought())
		}
	})
}

// TestThinkingServerTiming: a response that commits with its first
// thought says the time to it in Server-Timing; once the route ended its
// stages say it all, once.
func TestThinkingServerTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		c, ctx, _ := begin(t, routed(t, levers.Thinking{}, nil, thinker(50*ms, 200*ms, nil)))
		var first string
		for ch, err := range c.Stream(ctx, ask("chat")) {
			if err != nil {
				t.Fatal(err)
			}
			c.Deliver(&ch)
			if first == "" {
				first = c.ServerTiming(time.Now()) // the response commits
			}
			c.Shown()
		}
		if want := `route;dur=0, first_thought;dur=50;desc="pa/m"`; first != want {
			t.Errorf("Server-Timing at the first thought %q, want %q", first, want)
		}
		c.End(ctx, nil, false)
		want := `route;dur=0, upstream_pa/m;dur=260;desc="ok", ttft;dur=250;desc="pa/m", first_thought;dur=50;desc="pa/m", thinking;dur=200;desc="pa/m", generation;dur=10;desc="pa/m"`
		if got := c.ServerTiming(time.Now()); got != want {
			t.Errorf("Server-Timing after the route\n got %s\nwant %s", got, want)
		}
	})
}

// TestThoughtNotSent: a surface that sends no thinking (a client that did
// not ask for it) writes nothing for it: the first thought is when it was
// delivered, not when the first word was written after it.
func TestThoughtNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		c, ctx, rec := begin(t, routed(t, levers.Thinking{}, nil, thinker(50*ms, 200*ms, nil)))
		for ch, err := range c.Stream(ctx, ask("chat")) {
			if err != nil {
				t.Fatal(err)
			}
			c.Deliver(&ch)
			if ch.Text != "" {
				time.Sleep(ms) // the write
				c.Shown()
			}
		}
		c.End(ctx, nil, false)
		if rec.TTFThought() != 50*ms || rec.Thinking() != 200*ms || rec.TTFW() != 251*ms {
			t.Errorf("first thought %v, thinking %v, first word %v; want 50ms, 200ms, 251ms", rec.TTFThought(), rec.Thinking(), rec.TTFW())
		}
	})
}
