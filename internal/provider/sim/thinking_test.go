package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/chat"
)

// thought is one thinking answer as the stream told it.
type thought struct {
	chunks              []chat.Chunk // every chunk, in order
	firstThought, first time.Duration
	text, thinking      string
	signature           *chat.Thought
	resp                *chat.Response
	err                 error
}

func think(t *testing.T, p *Provider, req *chat.Request) thought {
	t.Helper()
	var th thought
	start := time.Now()
	var c chat.Collector
	for ch, err := range p.Stream(context.Background(), req) {
		if err != nil {
			th.err = err
			break
		}
		th.chunks = append(th.chunks, ch)
		if ch.Thinks() && th.firstThought == 0 {
			th.firstThought = time.Since(start)
		}
		if ch.Visible() && th.first == 0 {
			th.first = time.Since(start)
		}
		if ch.Visible() && th.signature == nil && th.thinking != "" {
			t.Fatalf("an answer token before the thinking's signature")
		}
		if ch.Thinks() && th.first != 0 {
			t.Fatalf("thinking %+v after the first answer token", ch)
		}
		th.thinking += ch.Thinking
		th.text += ch.Text
		if ch.Thought != nil {
			th.signature = ch.Thought
		}
		c.Add(ch)
	}
	th.resp = c.Response()
	return th
}

// TestReasoner: the reasoner tier thinks for about 1.5 s at 100 tokens a
// second from its TTFT, signs the block, then answers; the thinking is
// billed as output and reported as reasoning tokens.
func TestReasoner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 7})
		var thoughts, answers []time.Duration
		for i := range 21 {
			th := think(t, p, userReq("reasoner", "why is the first word what matters? "+string(rune('a'+i))))
			if th.err != nil {
				t.Fatal(th.err)
			}
			thoughts, answers = append(thoughts, th.firstThought), append(answers, th.first-th.firstThought)
			n := 0
			for _, ch := range th.chunks {
				if ch.Thinking != "" {
					n++
				}
			}
			if th.signature == nil || th.signature.Signature != Signature(th.thinking) || th.signature.Format != chat.ThinkingAnthropic {
				t.Fatalf("signature %+v, want Signature(thinking) in the Anthropic format", th.signature)
			}
			if u := th.resp.Usage; u == nil || u.ReasoningTokens != n || u.OutputTokens != n+len(tokenize(th.text)) {
				t.Fatalf("usage %+v, want %d reasoning tokens within the output", u, n)
			}
			if blocks := th.resp.Choices[0].Thinking; len(blocks) != 1 || blocks[0].Text != th.thinking || !blocks[0].Signed() {
				t.Fatalf("collected thinking %+v", blocks)
			}
			if strings.Contains(th.text, th.thinking[:20]) {
				t.Fatalf("thinking in the answer: %q", th.text)
			}
		}
		slices.Sort(thoughts)
		slices.Sort(answers)
		if m := thoughts[10]; !within(m, 600*time.Millisecond, 0.15) {
			t.Errorf("median time to first thought %v, want about 600ms", m)
		}
		if m := answers[10]; !within(m, 1500*time.Millisecond, 0.15) {
			t.Errorf("median thinking time %v, want about 1.5s", m)
		}
	})
}

func TestThinkingDeterministic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := think(t, New(Config{Seed: 3}), userReq("reasoner", "q"))
		b := think(t, New(Config{Seed: 3}), userReq("reasoner", "q"))
		c := think(t, New(Config{Seed: 4}), userReq("reasoner", "q"))
		if a.thinking != b.thinking || a.signature.Signature != b.signature.Signature || a.first != b.first {
			t.Error("the same seed thought differently")
		}
		if a.thinking == c.thinking {
			t.Error("another seed thought the same")
		}
		req := userReq("reasoner", "q")
		req.Hints.Sim = "think=0"
		plain := think(t, New(Config{Seed: 3}), req)
		if plain.thinking != "" || plain.text != a.text {
			t.Errorf("without thinking: thinking %q, answer changed %v; want none and the same answer", plain.thinking, plain.text != a.text)
		}
	})
}

// TestThinkingAsk: a directive makes any tier think exactly; the request's
// effort scales the reasoner's thinking ("none" turns it off) and its
// budget stops it early, at the same rate.
func TestThinkingAsk(t *testing.T) {
	for _, tc := range []struct {
		name, model, directive string
		ask                    *chat.ThinkingAsk
		tokens                 int           // thinking tokens, exactly
		thinking               time.Duration // first thought to first answer token (0: any)
	}{
		{"a directive on a plain tier", "small", "ttft=100ms think=2s think_tps=50", nil, 100, 2 * time.Second},
		{"a directive wins over effort none", "small", "think=1s", &chat.ThinkingAsk{Effort: "none"}, 100, time.Second},
		{"think=0", "reasoner", "think=0", nil, 0, 0},
		{"effort none", "reasoner", "", &chat.ThinkingAsk{Effort: "none"}, 0, 0},
		{"a budget", "reasoner", "", &chat.ThinkingAsk{BudgetTokens: 7}, 7, 0},
		{"a budget stops the thought early", "small", "think=2s think_tps=50", &chat.ThinkingAsk{BudgetTokens: 40}, 40, 800 * time.Millisecond},
		{"a plain tier", "medium", "", &chat.ThinkingAsk{Effort: "high"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				req := userReq(tc.model, "q")
				req.Hints.Sim, req.Thinking = tc.directive, tc.ask
				th := think(t, New(Config{Seed: 1}), req)
				if th.err != nil {
					t.Fatal(th.err)
				}
				if got := th.resp.Usage.ReasoningTokens; got != tc.tokens || len(tokenize(th.thinking)) != tc.tokens {
					t.Errorf("%d reasoning tokens, %q thought; want %d", got, th.thinking, tc.tokens)
				}
				if (th.signature != nil) != (tc.tokens > 0) {
					t.Errorf("signature %+v", th.signature)
				}
				if got := th.first - th.firstThought; tc.thinking > 0 && got != tc.thinking {
					t.Errorf("thought for %v, want %v", got, tc.thinking)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		var times []time.Duration
		for _, effort := range []string{"minimal", "low", "medium", "high"} {
			req := userReq("reasoner", "the same question")
			req.Thinking = &chat.ThinkingAsk{Effort: effort}
			th := think(t, New(Config{Seed: 1}), req)
			times = append(times, th.first-th.firstThought)
		}
		if !slices.IsSorted(times) || times[0] == times[3] {
			t.Errorf("thinking times by effort %v, want rising", times)
		}
	})
}

// TestErrorThinking: error_thinking fails after that many thinking
// tokens, before any answer, retryably (the router falls back); on a
// model that does not think, before any token.
func TestErrorThinking(t *testing.T) {
	for _, tc := range []struct {
		model, directive string
		thinking         int
	}{
		{"reasoner", "fault=error_thinking after=5", 5},
		{"reasoner", "fault=error_thinking after=0", 0},
		{"small", "think=100ms fault=error_thinking after=1000", 10},
		{"small", "fault=error_thinking", 0},
	} {
		t.Run(tc.model+" "+tc.directive, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				req := userReq(tc.model, "q")
				req.Hints.Sim = tc.directive
				th := think(t, New(Config{Seed: 1}), req)
				var ce *chat.Error
				if !errors.As(th.err, &ce) || !ce.Retryable || !ce.ClientInduced || ce.Category != chat.CategoryUpstreamUnavailable {
					t.Fatalf("err %v, want a retryable client-induced upstream error", th.err)
				}
				if got := len(tokenize(th.thinking)); got != tc.thinking || th.text != "" || th.signature != nil {
					t.Errorf("before the error: %d thinking tokens, text %q, signature %v; want %d thinking tokens only", got, th.text, th.signature, tc.thinking)
				}
			})
		})
	}
}

// TestSignatureChecked: a thinking block the sim signed comes back
// accepted; changed or unsigned, it is refused, as Anthropic refuses it.
func TestSignatureChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{Seed: 1})
		first := think(t, p, userReq("reasoner", "q"))
		block := first.resp.Choices[0].Thinking[0]
		for _, tc := range []struct {
			name  string
			block chat.ThinkingBlock
			want  string // the error, "" for none
		}{
			{"unchanged", block, ""},
			{"changed text", chat.ThinkingBlock{Text: block.Text + ".", Signature: block.Signature, Format: chat.ThinkingAnthropic}, "thinking block 0 has an invalid signature"},
			{"no signature", chat.ThinkingBlock{Text: block.Text, Format: chat.ThinkingAnthropic}, "thinking block 0 has no signature"},
			{"redacted", chat.ThinkingBlock{Redacted: "opaque", Format: chat.ThinkingAnthropic}, ""},
			{"another format", chat.ThinkingBlock{Text: "t", Signature: "x", Format: chat.ThinkingGemini}, ""},
		} {
			req := &chat.Request{Model: "small", Messages: []chat.Message{
				{Role: chat.RoleUser, Content: "q"},
				{Role: chat.RoleAssistant, Content: first.text, Thinking: []chat.ThinkingBlock{tc.block}},
				{Role: chat.RoleUser, Content: "and then? [sim tokens=2]"},
			}}
			_, _, _, err := run(t, p, context.Background(), req)
			var ce *chat.Error
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: %v", tc.name, err)
			case tc.want != "" && (!errors.As(err, &ce) || ce.Category != chat.CategoryInvalidRequest || !strings.Contains(ce.Message, tc.want)):
				t.Errorf("%s: err %v, want an invalid request saying %q", tc.name, err, tc.want)
			}
		}
	})
}

// TestFastThinkingBatched: a thought faster than a token a millisecond
// comes in deltas of a millisecond's tokens, the same text and count, in
// the same time.
func TestFastThinkingBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		req := userReq("small", "q")
		req.Hints.Sim = "ttft=10ms think=250ms think_tps=8000"
		r := New(Config{Seed: 1}).Pull(context.Background(), req)
		defer r.Close()
		start := time.Now()
		var deltas int
		var text strings.Builder
		var first, last time.Duration
		for {
			c, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if c.Thinking == "" {
				last = time.Since(start)
				break
			}
			if deltas == 0 {
				first = time.Since(start)
			}
			deltas++
			text.WriteString(c.Thinking)
		}
		if n := len(tokenize(text.String())); n != 2000 || deltas != 250 {
			t.Errorf("%d thinking tokens in %d deltas, want 2,000 in 250 (8 a delta)", n, deltas)
		}
		if first != 10*time.Millisecond || last-first < 248*time.Millisecond || last-first > 250*time.Millisecond {
			t.Errorf("thought from %v to %v, want from 10ms for 250ms", first, last)
		}
	})
}

// TestThinkingAllocs: a thinking delta costs no allocation, as an answer
// token does not (a token a millisecond, the fastest sent one by one).
func TestThinkingAllocs(t *testing.T) {
	p := New(Config{Seed: 1})
	req := userReq("small", "q")
	req.Hints.Sim = "ttft=0s think=1s think_tps=999"
	r := p.Pull(context.Background(), req)
	defer r.Close()
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		c, err := r.Next()
		if err != nil || c.Thinking == "" {
			t.Fatalf("chunk %+v, err %v: want thinking", c, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per thinking delta, want 0", allocs)
	}
}
