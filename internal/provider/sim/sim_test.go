package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/chat"
)

func userReq(model, text string) *chat.Request {
	return &chat.Request{Model: model, Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}}
}

// run collects a stream, with the time to first token and to the end.
func run(t *testing.T, p *Provider, ctx context.Context, req *chat.Request) (resp *chat.Response, ttft, total time.Duration, err error) {
	t.Helper()
	start := time.Now()
	var c chat.Collector
	for ch, e := range p.Stream(ctx, req) {
		if e != nil {
			err = e
			break
		}
		if ttft == 0 && ch.Visible() {
			ttft = time.Since(start)
		}
		c.Add(ch)
	}
	return c.Response(), ttft, time.Since(start), err
}

// TestTiers checks the lesson's numbers: median TTFT and rate per tier,
// and that a 300-token answer takes about 4.4 s on medium and 2.3 s on
// small.
func TestTiers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 7})
		for _, tc := range []struct {
			tier       string
			ttft, t300 time.Duration
		}{
			{"small", 300 * time.Millisecond, 2300 * time.Millisecond},
			{"medium", 600 * time.Millisecond, 4350 * time.Millisecond},
			{"large", 1200 * time.Millisecond, 8700 * time.Millisecond},
		} {
			var ttfts, totals []time.Duration
			for i := range 41 {
				_, ttft, total, err := run(t, p, context.Background(), userReq(tc.tier, "question "+string(rune('a'+i))+" [sim tokens=300]"))
				if err != nil {
					t.Fatal(err)
				}
				ttfts = append(ttfts, ttft)
				totals = append(totals, total)
			}
			slices.Sort(ttfts)
			slices.Sort(totals)
			if m := ttfts[20]; !within(m, tc.ttft, 0.15) {
				t.Errorf("%s: median TTFT %v, want about %v", tc.tier, m, tc.ttft)
			}
			if m := totals[20]; !within(m, tc.t300, 0.1) {
				t.Errorf("%s: median time for 300 tokens %v, want about %v", tc.tier, m, tc.t300)
			}
			if ttfts[0] == ttfts[40] {
				t.Errorf("%s: no jitter", tc.tier)
			}
		}
	})
}

func within(got, want time.Duration, frac float64) bool {
	d := float64(got - want)
	return d <= frac*float64(want) && -d <= frac*float64(want)
}

func TestDeterministic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := New(Config{Seed: 3}), New(Config{Seed: 3})
		var textsA, textsB []string
		var timesA, timesB []time.Duration
		for i := range 3 {
			q := "tell me about streaming " + string(rune('0'+i))
			ra, ta, _, _ := run(t, a, context.Background(), userReq("medium", q))
			rb, tb, _, _ := run(t, b, context.Background(), userReq("medium", q))
			textsA, textsB = append(textsA, ra.Choices[0].Text), append(textsB, rb.Choices[0].Text)
			timesA, timesB = append(timesA, ta), append(timesB, tb)
		}
		if !slices.Equal(textsA, textsB) || !slices.Equal(timesA, timesB) {
			t.Error("the same seed gave different runs")
		}
		c := New(Config{Seed: 4})
		rc, _, _, _ := run(t, c, context.Background(), userReq("medium", "tell me about streaming 0"))
		if rc.Choices[0].Text == textsA[0] {
			t.Error("a different seed gave the same text")
		}
	})
}

func TestReadableVariedText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1})
		resp, _, _, err := run(t, p, context.Background(), userReq("small", "hi [sim tokens=300]"))
		if err != nil {
			t.Fatal(err)
		}
		text := resp.Choices[0].Text
		words := strings.Fields(text)
		distinct := map[string]bool{}
		for _, w := range words {
			distinct[strings.ToLower(w)] = true
		}
		if len(words) < 150 || len(distinct) < 80 {
			t.Errorf("%d words, %d distinct: not readable varied text: %q", len(words), len(distinct), text)
		}
		if resp.Usage == nil || resp.Usage.OutputTokens != 300 || resp.Usage.InputTokens == 0 {
			t.Errorf("usage = %+v, want 300 output tokens", resp.Usage)
		}
	})
}

func TestMaxTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1})
		req := userReq("small", "hi")
		req.MaxTokens = 17
		resp, _, _, err := run(t, p, context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Choices[0].FinishReason != chat.FinishLength || resp.Usage.OutputTokens != 17 {
			t.Errorf("finish %q, usage %+v; want length after 17 tokens", resp.Choices[0].FinishReason, resp.Usage)
		}
	})
}

func TestFaults(t *testing.T) {
	tests := []struct {
		directive string
		wantErr   chat.Category
		wantText  bool // some text before the fault
		hangs     bool
	}{
		{"fault=429 retry_after=2s", chat.CategoryRateLimited, false, false},
		{"fault=500", chat.CategoryUpstreamUnavailable, false, false},
		{"fault=503", chat.CategoryOverloaded, false, false},
		{"fault=hang", "", false, true},
		{"fault=error_mid after=5", chat.CategoryUpstreamUnavailable, true, false},
		{"fault=stall_mid after=5", "", true, true},
		{"fault=truncate after=5", chat.CategoryProtocol, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.directive, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(Config{Seed: 1})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				resp, _, total, err := run(t, p, ctx, userReq("small", "hi [sim "+tt.directive+"]"))
				if tt.hangs {
					if !errors.Is(err, context.DeadlineExceeded) || total < 30*time.Second {
						t.Errorf("err %v after %v, want a hang until the deadline", err, total)
					}
					if p.Stats().Cancelled != 1 {
						t.Errorf("stats %+v: the hang's cancellation was not counted", p.Stats())
					}
				} else {
					var ce *chat.Error
					if !errors.As(err, &ce) || ce.Category != tt.wantErr {
						t.Fatalf("err = %v, want category %s", err, tt.wantErr)
					}
					if tt.directive == "fault=429 retry_after=2s" && ce.RetryAfter != 2*time.Second {
						t.Errorf("RetryAfter = %v", ce.RetryAfter)
					}
				}
				hasText := len(resp.Choices) > 0 && resp.Choices[0].Text != ""
				if hasText != tt.wantText {
					t.Errorf("text before the fault: %v, want %v", hasText, tt.wantText)
				}
				if tt.wantText && strings.Count(resp.Choices[0].Text, " ") > 6 {
					t.Errorf("more than 5 tokens before the fault: %q", resp.Choices[0].Text)
				}
			})
		})
	}
}

func TestSlowAndTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1, Tiers: map[string]Tier{"tail": {TTFT: 100 * time.Millisecond, TokensPerSecond: 100, TailProbability: 0.05, TailFactor: 10}}})
		slow := 0
		for range 400 {
			_, ttft, _, err := run(t, p, context.Background(), userReq("tail", "x [sim tokens=1]"))
			if err != nil {
				t.Fatal(err)
			}
			if ttft >= 500*time.Millisecond {
				slow++
			}
		}
		if slow < 8 || slow > 35 {
			t.Errorf("%d of 400 requests in the tail, want about 20", slow)
		}
		_, ttft, _, _ := run(t, p, context.Background(), userReq("tail", "x [sim fault=slow factor=4 tokens=1]"))
		if ttft < 300*time.Millisecond {
			t.Errorf("slow fault TTFT %v, want about 400ms", ttft)
		}
	})
}

func TestCancelMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		n := 0
		var err error
		for ch, e := range p.Stream(ctx, userReq("small", "hi [sim tokens=100]")) {
			if e != nil {
				err = e
				break
			}
			if ch.Visible() {
				n++
				if n == 3 {
					cancel()
				}
			}
		}
		if !errors.Is(err, context.Canceled) || n != 3 {
			t.Errorf("got %d tokens then %v, want 3 then context.Canceled", n, err)
		}
		if st := p.Stats(); st.Cancelled != 1 || st.Completed != 0 {
			t.Errorf("stats = %+v", st)
		}
	})
}

func TestBreakStopsTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1})
		for stop := range 4 {
			n := 0
			for _, err := range p.Stream(context.Background(), userReq("small", "hi [sim tokens=50]")) {
				if err != nil {
					t.Fatal(err)
				}
				if n == stop {
					break
				}
				n++
			}
		}
		synctest.Wait()
	})
}

func TestToolCallAndEcho(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1})
		resp, _, _, err := run(t, p, context.Background(), userReq("small", "weather in Paris? [sim tool=get_weather]"))
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		if ch.FinishReason != chat.FinishToolCalls || len(ch.ToolCalls) != 1 || ch.ToolCalls[0].Name != "get_weather" || ch.ToolCalls[0].Arguments != `{"query":"weather in Paris?"}` {
			t.Errorf("tool call = %+v, finish %q", ch.ToolCalls, ch.FinishReason)
		}
		resp, _, _, _ = run(t, p, context.Background(), userReq("small", "<script>alert(1)</script> [sim echo]"))
		if resp.Choices[0].Text != "<script>alert(1)</script>" {
			t.Errorf("echo = %q", resp.Choices[0].Text)
		}
	})
}

// TestPrefixCache: a marked system prompt is written by the first request
// and read by the next, which starts sooner; the same prompt unmarked is
// never cached.
func TestPrefixCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1, Tiers: map[string]Tier{"flat": {TTFT: 400 * time.Millisecond, TokensPerSecond: 100, CachedPrefixSpeedup: 2}}})
		system := strings.Repeat("You are a helpful support assistant for an online shop. ", 20)
		req := func(q string, mark bool) *chat.Request {
			return &chat.Request{Model: "flat", Messages: []chat.Message{{Role: chat.RoleSystem, Content: system, CacheBreakpoint: mark}, {Role: chat.RoleUser, Content: q}}}
		}
		r1, t1, _, _ := run(t, p, context.Background(), req("first", true))
		r2, t2, _, _ := run(t, p, context.Background(), req("second", true))
		if u := r1.Usage; u.CachedInputTokens != 0 || u.CacheWriteTokens < 200 {
			t.Errorf("first request: usage %+v, want nothing read and the system prompt written", u)
		}
		if u := r2.Usage; u.CachedInputTokens != r1.Usage.CacheWriteTokens || u.CacheWriteTokens != 0 {
			t.Errorf("second request: usage %+v, want the first's %d written tokens read, nothing written", u, r1.Usage.CacheWriteTokens)
		}
		if t2 >= t1*6/10 {
			t.Errorf("TTFT %v then %v: an almost all-cached prompt should start about twice as soon", t1, t2)
		}
		for _, q := range []string{"third", "fourth"} {
			if r, _, _, _ := run(t, p, context.Background(), req(q, false)); r.Usage.CachedInputTokens != 0 || r.Usage.CacheWriteTokens != 0 {
				t.Errorf("unmarked prompt: usage %+v, want nothing cached", r.Usage)
			}
		}
	})
}

// TestPrefill: with a prefill rate the TTFT grows with the uncached
// prompt, and a cached prefix is read CachedPrefixSpeedup times faster.
func TestPrefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1, Tiers: map[string]Tier{"pf": {TTFT: 100 * time.Millisecond, TokensPerSecond: 100, PrefillTokensPerSecond: 1000, CachedPrefixSpeedup: 10}}})
		system := strings.Repeat("You are a helpful support assistant for an online shop. ", 40)
		req := func(q string) *chat.Request {
			return &chat.Request{Model: "pf", Messages: []chat.Message{{Role: chat.RoleSystem, Content: system, CacheBreakpoint: true}, {Role: chat.RoleUser, Content: q}}}
		}
		r1, t1, _, _ := run(t, p, context.Background(), req("first"))
		r2, t2, _, _ := run(t, p, context.Background(), req("second"))
		in, read := r1.Usage.InputTokens, r2.Usage.CachedInputTokens
		if in < 400 || read < 400 {
			t.Fatalf("usage %+v then %+v: want a prompt of over 400 tokens, read from the cache the second time", r1.Usage, r2.Usage)
		}
		if want := 100*time.Millisecond + time.Duration(in)*time.Millisecond; t1 != want {
			t.Errorf("uncached TTFT %v, want %v (100ms and %d tokens at 1,000 a second)", t1, want, in)
		}
		uncached := r2.Usage.InputTokens - read
		if want := 100*time.Millisecond + time.Duration(uncached)*time.Millisecond + time.Duration(read)*time.Millisecond/10; t2 != want {
			t.Errorf("cached TTFT %v, want %v (%d uncached tokens, %d cached read ten times faster)", t2, want, uncached, read)
		}
	})
}

// TestPrefixCacheRules follows the simulated cache through a conversation
// whose requests mark their last message and the previous request's, as
// the levers do.
func TestPrefixCacheRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c prefixCache
		c.seen = map[uint64]time.Time{}
		long := strings.Repeat("words that fill the prompt ", 20) // 135 tokens
		msg := func(r chat.Role, text string, mark bool) chat.Message {
			return chat.Message{Role: r, Content: text, CacheBreakpoint: mark}
		}
		type use struct{ read, written int }
		step := func(name string, want use, msgs ...chat.Message) {
			t.Helper()
			read, written := c.use(&chat.Request{Messages: msgs}, time.Now())
			if got := (use{read, written}); got != want {
				t.Errorf("%s: (read, written) = %v, want %v", name, got, want)
			}
		}
		sys := msg(chat.RoleSystem, long, true)
		// Prefix sizes: 3 + (4 + tokens) per message.
		step("turn 1 writes the system prompt and the question", use{0, 3 + 139 + 5},
			sys, msg(chat.RoleUser, "hi?", true))
		step("turn 2 reads them and writes the answer and the next question", use{147, 5 + 5},
			sys, msg(chat.RoleUser, "hi?", true), msg(chat.RoleAssistant, "hey", false), msg(chat.RoleUser, "so?", true))
		step("a changed question reads the system prompt only", use{142, 5},
			sys, msg(chat.RoleUser, "HI?", true))
		step("without marks nothing is read or written", use{},
			msg(chat.RoleSystem, long, false), msg(chat.RoleUser, "hi?", false))
		step("a prefix under 64 tokens is not cached", use{},
			msg(chat.RoleSystem, "short", true), msg(chat.RoleUser, "hi?", true))

		// A mark finds a prefix written at most 20 messages before it.
		turns := func(n int, tag string) []chat.Message {
			msgs := []chat.Message{msg(chat.RoleSystem, long, false)}
			for i := range n {
				msgs = append(msgs, msg(chat.RoleUser, fmt.Sprint(tag, i%10), false))
			}
			msgs[n].CacheBreakpoint = true
			return msgs
		}
		step("20 messages after a written prefix", use{142, 20 * 5}, turns(20, "a")...)
		step("21 messages after it", use{0, 3 + 139 + 21*5}, turns(21, "b")...)

		// An entry lives five minutes from its last use.
		time.Sleep(4 * time.Minute)
		step("read after 4 minutes", use{142, 5}, sys, msg(chat.RoleUser, "one", true))
		time.Sleep(4 * time.Minute)
		step("read 4 minutes after the last read", use{142, 5}, sys, msg(chat.RoleUser, "two", true))
		time.Sleep(5 * time.Minute)
		step("written again after 5 minutes unused", use{0, 147}, sys, msg(chat.RoleUser, "six", true))
	})
}

func TestDirectiveErrors(t *testing.T) {
	for _, d := range []string{"fault=nope", "after=x", "wat=1", "tokens=-1", "p=2 fault=429", "think=-1s", "think=x", "think_tps=0", "think_tps=NaN", "think_tps=1e9"} {
		if _, err := ParseDirective(d); err == nil {
			t.Errorf("ParseDirective(%q) succeeded", d)
		}
	}
	p := New(Config{})
	_, _, _, err := run(t, p, context.Background(), userReq("small", "[sim fault=nope]"))
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Category != chat.CategoryInvalidRequest {
		t.Errorf("bad directive: %v", err)
	}
	_, _, _, err = run(t, p, context.Background(), userReq("huge", "x"))
	if !errors.As(err, &ce) || ce.Category != chat.CategoryNotFound {
		t.Errorf("unknown tier: %v", err)
	}
}

func FuzzDirective(f *testing.F) {
	for _, s := range []string{"fault=error_mid after=20", "ttft=2s gap=5ms tokens=50 echo", "tps=80", "p=0.5 fault=429 retry_after=1s", "think=2s think_tps=50 fault=error_thinking after=3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDirective(s)
		if err == nil && (d.Tokens < 0 || (d.Gap != nil && *d.Gap < 0) || (d.Think != nil && *d.Think < 0) || d.ThinkTPS < 0) {
			t.Errorf("accepted negative values: %+v", d)
		}
	})
}

// TestStatsCountOnce: a request the sim refuses, and an answer closed
// before it was read, count nowhere; a chunk counts as a token once the
// consumer asks for the next.
func TestStatsCountOnce(t *testing.T) {
	p := New(Config{Seed: 1})
	ctx := context.Background()
	r := p.Pull(ctx, &chat.Request{Model: "no-such-tier", Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}})
	if _, err := r.Next(); err == nil {
		t.Fatal("unknown tier: no error")
	}
	r.Close()
	p.Pull(ctx, &chat.Request{Model: "small", Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}).Close()
	if s := p.Stats(); s != (Stats{}) {
		t.Errorf("after a refused and an unread answer: %+v, want nothing counted", s)
	}
	r = p.Pull(ctx, &chat.Request{Model: "small", Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi [sim ttft=1ms gap=1ms tokens=5]"}}})
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	r.Close() // the consumer stopped after the first chunk
	if s := p.Stats(); s.Started != 1 || s.Cancelled != 1 || s.TokensOut != 0 {
		t.Errorf("stopped after one chunk: %+v, want started 1, cancelled 1, no token taken", s)
	}
}

// A fault the request asked for is the client's doing
// (chat.Error.ClientInduced), so the router does not hold it against the
// deployment; the same fault from the config is not.
func TestClientInducedFaults(t *testing.T) {
	for _, directive := range []string{"fault=500", "fault=429 retry_after=1s", "fault=hang", "fault=error_mid after=2", "fault=stall_mid after=2", "fault=truncate after=2", "fault=slow factor=100", "fault=error_thinking after=2"} {
		d, err := ParseDirective(directive)
		if err != nil {
			t.Fatal(err)
		}
		for _, fromConfig := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/config=%v", directive, fromConfig), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg, req := Config{Seed: 1}, userReq("small", "hi")
					if fromConfig {
						cfg.Fault = d.Fault
					} else {
						req.Hints.Sim = directive
					}
					ctx, cancel := context.WithTimeoutCause(context.Background(), 5*time.Second, chat.ErrFirstTokenTimeout)
					defer cancel()
					_, _, _, err := run(t, New(cfg), ctx, req)
					var ce *chat.Error
					if got := errors.As(err, &ce) && ce.ClientInduced; err == nil || got == fromConfig {
						t.Errorf("err %v: client-induced %v, want %v", err, got, !fromConfig)
					}
				})
			})
		}
	}
	_, _, _, err := run(t, New(Config{}), context.Background(), userReq("small", "[sim fault=nope]"))
	if ce := chat.AsError(err); !ce.ClientInduced {
		t.Errorf("a malformed directive: %v, want it client-induced", err)
	}
}

// A request to continue a broken answer, prefilled or instructed, gets
// the rest of the answer first asked for, from where the delivered text
// stopped (inside a word too).
func TestContinuation(t *testing.T) {
	p := New(Config{Name: "sim", Seed: 7})
	ask := []chat.Message{{Role: chat.RoleSystem, Content: "Be brief."}, {Role: chat.RoleUser, Content: "Tell me about gateways. [sim ttft=0s gap=0s tokens=40]"}}
	whole, err := chat.Collect(p.Stream(t.Context(), &chat.Request{Model: "small", Messages: ask}))
	if err != nil {
		t.Fatal(err)
	}
	full := whole.Choices[0].Text
	for _, cut := range []int{1, 7, len(full) / 2, len(full) - 1} {
		done := full[:cut]
		for name, msgs := range map[string][]chat.Message{
			"prefill":  append(slices.Clone(ask), chat.Message{Role: chat.RoleAssistant, Content: done}),
			"instruct": append(slices.Clone(ask), chat.Message{Role: chat.RoleAssistant, Content: done}, chat.Message{Role: chat.RoleUser, Content: "Continue.\n<<<\n" + done + "\n>>>"}),
		} {
			got, err := chat.Collect(p.Stream(t.Context(), &chat.Request{Model: "small", Messages: msgs}))
			if err != nil {
				t.Fatal(err)
			}
			if done+got.Choices[0].Text != full {
				t.Errorf("%s from %d: %q, want %q", name, cut, got.Choices[0].Text, full[cut:])
			}
		}
	}
}
