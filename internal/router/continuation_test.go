package router

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// cleanAnswer is what an unbroken upstream answers: words, accents,
// CJK without spaces, an emoji.
const cleanAnswer = "The quick brown fox jumps over the lazy dog. Naïve café owners serve crème brûlée — " +
	"日本語のテキストも混ざります。 Then the story goes on, with Ümlauts and an emoji 🙂 here, " +
	"and a final sentence that closes it."

var errReset = &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "connection reset", Retryable: true}

// chunked yields text in pieces of 1 to 8 bytes (cut anywhere, inside a
// character too), drawn from rng.
func chunked(rng *rand.Rand, text string, yield func(chat.Chunk, error) bool) bool {
	for text != "" {
		n := min(len(text), 1+rng.IntN(8))
		if !yield(chat.Chunk{Text: text[:n]}, nil) {
			return false
		}
		text = text[n:]
	}
	return true
}

// breaking answers cleanAnswer's first cut bytes, then fails with err.
func breaking(rng *rand.Rand, cut int, err error, calls *atomic.Int32) providertest.Func {
	return func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			calls.Add(1)
			if chunked(rng, cleanAnswer[:cut], yield) {
				yield(chat.Chunk{}, err)
			}
		}
	}
}

// seamMode is how the continuing fake starts its text.
type seamMode int

const (
	seamExact   seamMode = iota // right where the text stopped
	seamRepeat                  // repeating its last 4 to 12 bytes
	seamRestart                 // restarting its last word
)

// continuing reads a continuation request and answers the rest of
// cleanAnswer, starting as mode says; usage reports 7 output tokens.
func continuing(t *testing.T, rng *rand.Rand, mode seamMode, want Continuation, calls *atomic.Int32) providertest.Func {
	return func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			calls.Add(1)
			msgs := req.Messages
			last := msgs[len(msgs)-1]
			var done string
			switch want {
			case ContinueInstruct:
				prev := msgs[len(msgs)-2]
				if last.Role != chat.RoleUser || prev.Role != chat.RoleAssistant || !strings.HasPrefix(last.Content, DefaultContinuationPrompt) {
					t.Errorf("instruct continuation ends with %q, %q", prev.Role, last.Content)
				}
				done = prev.Content
				if !strings.Contains(last.Content, tailOf(done, seamMax)) {
					t.Errorf("the instruction does not quote the delivered text's end")
				}
			default:
				if last.Role != chat.RoleAssistant {
					t.Errorf("prefill continuation ends with a %s message", last.Role)
				}
				done = last.Content
			}
			if !strings.HasPrefix(cleanAnswer, done) || !utf8.ValidString(done) {
				t.Errorf("delivered text %q is not a clean prefix of whole characters", done)
			}
			from := len(done)
			switch mode {
			case seamRepeat:
				from = max(0, from-4-rng.IntN(9))
				for from > 0 && !utf8.RuneStart(cleanAnswer[from]) {
					from--
				}
			case seamRestart:
				from = strings.LastIndexByte(done, ' ') + 1
			}
			// A chunk that shows nothing (held until the answer), then
			// thinking: dropped, the caller's answer has started.
			if !yield(chat.Chunk{Model: "m2"}, nil) || !yield(chat.Chunk{Thinking: "where was I"}, nil) {
				return
			}
			if !chunked(rng, cleanAnswer[from:], yield) {
				return
			}
			yield(chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 100, OutputTokens: 7}}, nil)
		}
	}
}

// An answer broken at a random byte (inside a word, inside a character)
// is continued on the next deployment, which continues exactly, repeats
// the last bytes or restarts the last word: the caller reads the clean
// answer every time, with the continuation's usage.
func TestContinuationSplice(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 33))
	synctest.Test(t, func(t *testing.T) {
		for trial := range 100 {
			cut := 1 + rng.IntN(len(cleanAnswer)-1)
			mode := seamMode(trial % 3)
			method := []Continuation{ContinueInstruct, ContinuePrefill}[trial/3%2]
			var broke, cont atomic.Int32
			d1 := dep(breaking(rng, cut, errReset, &broke), "a", "m", 0)
			d2 := dep(continuing(t, rng, mode, method, &cont), "b", "m2", 1)
			d2.Continuation = method
			r := newRouter(t, Alias{Deployments: []Deployment{d1, d2}})
			res := route(t, r, context.Background(), ask("tell me"))
			if res.err != nil || res.text != cleanAnswer {
				t.Fatalf("trial %d (cut %d, mode %d, %s): err %v, text\n%q\nwant\n%q", trial, cut, mode, method, res.err, res.text, cleanAnswer)
			}
			if want := "a/m=mid_stream_error, continued on b/m2=ok"; res.rep.Route() != want {
				t.Errorf("route %q, want %q", res.rep.Route(), want)
			}
			if res.usage == nil || res.usage.OutputTokens != 7 || res.rep.Attempts[0].Usage == nil {
				t.Errorf("usage %+v, broken attempt's %+v: want the continuation's, and the attempt billed", res.usage, res.rep.Attempts[0].Usage)
			}
			if !res.rep.Continued() || res.rep.Continuations() != 1 || res.rep.Deployment != "b/m2" {
				t.Errorf("report: continued %v, continuations %d, deployment %s", res.rep.Continued(), res.rep.Continuations(), res.rep.Deployment)
			}
		}
	})
}

// A hedged winner that breaks is continued as any attempt.
func TestContinuationAfterHedgedWinner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var broke, cont atomic.Int32
		rng := rand.New(rand.NewPCG(3, 4))
		r := newRouter(t, Alias{Hedge: Hedge{Enabled: true, Delay: time.Second}, Deployments: []Deployment{
			dep(breaking(rng, 40, errReset, &broke), "a", "m", 0), dep(continuing(t, rng, seamRestart, ContinueInstruct, &cont), "b", "m2", 1)}})
		res := route(t, r, context.Background(), ask("tell me"))
		if res.err != nil || res.text != cleanAnswer {
			t.Fatalf("err %v, text %q", res.err, res.text)
		}
		if want := "a/m=mid_stream_error, continued on b/m2=ok"; res.rep.Route() != want {
			t.Errorf("route %q, want %q", res.rep.Route(), want)
		}
	})
}

// A tool call passed on ends the answer with the error: its arguments
// cannot be continued.
func TestContinuationNotAfterToolCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cont atomic.Int32
		tool := providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
			return func(yield func(chat.Chunk, error) bool) {
				_ = yield(chat.Chunk{Text: "Let me look."}, nil) &&
					yield(chat.Chunk{ToolCalls: []chat.ToolCallDelta{{ID: "c1", Name: "search", Arguments: `{"q":`}}}, nil) &&
					yield(chat.Chunk{}, errReset)
			}
		})
		rng := rand.New(rand.NewPCG(1, 2))
		r := newRouter(t, Alias{Deployments: []Deployment{dep(tool, "a", "m", 0), dep(continuing(t, rng, seamExact, ContinueInstruct, &cont), "b", "m2", 1)}})
		res := route(t, r, context.Background(), ask("look it up"))
		if !errors.Is(res.err, errReset) || cont.Load() != 0 {
			t.Errorf("err %v, continuations %d: want the error and none", res.err, cont.Load())
		}
	})
}

// An answer that goes quiet for longer than the stall timeout is
// continued; a shorter pause is not a stall.
func TestContinuationAfterStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cont atomic.Int32
		quiet := providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
			return func(yield func(chat.Chunk, error) bool) {
				if !yield(chat.Chunk{Text: cleanAnswer[:10]}, nil) {
					return
				}
				time.Sleep(4 * time.Second) // a pause, not a stall
				if !yield(chat.Chunk{Text: cleanAnswer[10:20]}, nil) {
					return
				}
				<-ctx.Done()
				yield(chat.Chunk{}, ctx.Err())
			}
		})
		rng := rand.New(rand.NewPCG(1, 2))
		r := newRouter(t, Alias{Timeout: time.Minute, StallTimeout: 5 * time.Second,
			Deployments: []Deployment{dep(quiet, "a", "m", 0), dep(continuing(t, rng, seamRestart, ContinueInstruct, &cont), "b", "m2", 1)}})
		start := time.Now()
		res := route(t, r, context.Background(), ask("tell me"))
		if res.err != nil || res.text != cleanAnswer {
			t.Fatalf("err %v, text %q", res.err, res.text)
		}
		if took := time.Since(start); took != 9*time.Second {
			t.Errorf("took %s, want 9s: a 4s pause, then a 5s stall", took)
		}
		if at := res.rep.Attempts[0]; !strings.Contains(at.Error, "stalled") {
			t.Errorf("first attempt's error %q, want a stall", at.Error)
		}
	})
}

// A caller that reads slowly is not a stalled upstream: the stall timer
// runs only while the upstream is read, and a continuation's first-token
// timer ended with its first token.
func TestContinuationSlowReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var broke, cont atomic.Int32
		rng := rand.New(rand.NewPCG(1, 2))
		r := newRouter(t, Alias{Timeout: time.Hour, StallTimeout: 5 * time.Second, Deployments: []Deployment{
			dep(breaking(rng, 30, errReset, &broke), "a", "m", 0), dep(continuing(t, rng, seamRepeat, ContinueInstruct, &cont), "b", "m2", 1)}})
		req := ask("tell me")
		ctx, cancel := withDeadline(r, context.Background(), req.Model)
		defer cancel()
		var rep Report
		var text strings.Builder
		for c, err := range r.StreamReport(ctx, req, &rep) {
			if err != nil {
				t.Fatal(err)
			}
			text.WriteString(c.Text)
			time.Sleep(20 * time.Second)
		}
		if text.String() != cleanAnswer {
			t.Errorf("text %q", text.String())
		}
		if want := "a/m=mid_stream_error, continued on b/m2=ok"; rep.Route() != want {
			t.Errorf("route %q, want %q", rep.Route(), want)
		}
	})
}

// max_continuations bounds the continuations: an answer that breaks
// every time ends with the error after the first attempt and two more.
func TestContinuationBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		rng := rand.New(rand.NewPCG(1, 2))
		// A fake that always answers a few words and breaks.
		p := breaking(rng, 12, errReset, &calls)
		r := newRouter(t, Alias{Deployments: []Deployment{dep(p, "a", "m", 0), dep(p, "b", "m", 1)}})
		res := route(t, r, context.Background(), ask("tell me"))
		if !errors.Is(res.err, errReset) || calls.Load() != 3 {
			t.Errorf("err %v after %d calls, want the error after 3", res.err, calls.Load())
		}
		if want := "a/m=mid_stream_error, continued on b/m=mid_stream_error, continued on a/m=mid_stream_error"; res.rep.Route() != want {
			t.Errorf("route %q, want %q", res.rep.Route(), want)
		}
		// Each broken attempt that was continued is billed as an attempt; the
		// last one's usage is the answer's, its own alone.
		for i, at := range res.rep.Attempts[:2] {
			if at.Usage == nil {
				t.Errorf("attempt %d not billed", i)
			}
		}
		if u := res.usage; u == nil || *u != *res.rep.Attempts[1].Usage {
			t.Errorf("the answer's usage %+v, want the last attempt's alone, as the one before (the same request), %+v", u, res.rep.Attempts[1].Usage)
		}
		r = newRouter(t, Alias{MaxContinuations: 1, Deployments: []Deployment{dep(p, "a", "m", 0)}})
		calls.Store(0)
		res = route(t, r, context.Background(), ask("tell me"))
		if want := "a/m=mid_stream_error, continued on a/m=mid_stream_error"; res.rep.Route() != want || calls.Load() != 2 {
			t.Errorf("one continuation, one deployment: route %q after %d calls, want %q", res.rep.Route(), calls.Load(), want)
		}
	})
}

// on_stream_failure: end keeps the broken answer's error.
func TestContinuationEndPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var broke, cont atomic.Int32
		rng := rand.New(rand.NewPCG(1, 2))
		r := newRouter(t, Alias{OnStreamFailure: StreamFailureEnd, Deployments: []Deployment{
			dep(breaking(rng, 30, errReset, &broke), "a", "m", 0), dep(continuing(t, rng, seamExact, ContinueInstruct, &cont), "b", "m2", 1)}})
		res := route(t, r, context.Background(), ask("tell me"))
		if !errors.Is(res.err, errReset) || res.text != cleanAnswer[:30] || cont.Load() != 0 {
			t.Errorf("err %v, text %q, continuations %d", res.err, res.text, cont.Load())
		}
	})
}

// The deadline still cuts: a stall that outlasts the request's deadline
// ends the answer with FinishTimeout, not a continuation.
func TestContinuationDeadlineCuts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cont atomic.Int32
		quiet := providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
			return func(yield func(chat.Chunk, error) bool) {
				if !yield(chat.Chunk{Text: cleanAnswer[:10]}, nil) {
					return
				}
				<-ctx.Done()
				yield(chat.Chunk{}, ctx.Err())
			}
		})
		rng := rand.New(rand.NewPCG(1, 2))
		r := newRouter(t, Alias{Timeout: 10 * time.Second, Deployments: []Deployment{
			dep(quiet, "a", "m", 0), dep(continuing(t, rng, seamExact, ContinueInstruct, &cont), "b", "m2", 1)}})
		res := route(t, r, context.Background(), ask("tell me"))
		if res.err != nil || res.finish != chat.FinishTimeout || res.text != cleanAnswer[:10] || cont.Load() != 0 {
			t.Errorf("err %v, finish %q, text %q, continuations %d", res.err, res.finish, res.text, cont.Load())
		}
		if got := outcomes(res.rep); !slices.Equal(got, []Outcome{OutcomeDeadline}) {
			t.Errorf("attempts %v", got)
		}
	})
}

// A continuation that has not started by the deadline: the answer ends
// cut, as any answer the deadline ends, with the text delivered.
func TestContinuationDeadlineBeforeItStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var broke atomic.Int32
		rng := rand.New(rand.NewPCG(1, 2))
		hangs := providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
			return func(yield func(chat.Chunk, error) bool) {
				<-ctx.Done()
				yield(chat.Chunk{}, ctx.Err())
			}
		})
		r := newRouter(t, Alias{Timeout: 3 * time.Second, FirstTokenTimeout: 5 * time.Second, Deployments: []Deployment{
			dep(breaking(rng, 30, errReset, &broke), "a", "m", 0), dep(hangs, "b", "m2", 1)}})
		res := route(t, r, context.Background(), ask("tell me"))
		if res.err != nil || res.finish != chat.FinishTimeout || res.text != cleanAnswer[:30] {
			t.Errorf("err %v, finish %q, text %q", res.err, res.finish, res.text)
		}
		if got := outcomes(res.rep); !slices.Equal(got, []Outcome{OutcomeMidStreamError, OutcomeDeadline}) {
			t.Errorf("attempts %v", got)
		}
	})
}

func TestSeam(t *testing.T) {
	for _, tt := range []struct {
		name, delivered, cont, want string
	}{
		{"exact", "The quick bro", "wn fox", "wn fox"},
		{"repeat", "The quick bro", "ick brown fox", "wn fox"},
		{"restart word", "The quick bro", "brown fox", "wn fox"},
		{"restart sentence", "It rained. The quick bro", "The quick brown fox", "wn fox"},
		{"short overlap is new text", "a bo", "ok", "ok"},
		{"space, new word", "The quick", " brown", " brown"},
		{"inside a character", "日本"[:4], "本語", "本語"[1:]},
		{"inside a character, restarted", "ab 日本"[:7], "日本語", "本語"[1:]},
		{"nothing delivered", "", "Hello", "Hello"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			whole, partial := wholeRunes(tt.delivered)
			// Fed a byte at a time, then ended.
			m := seam{tail: tailOf(whole, seamMax), partial: partial}
			var got strings.Builder
			for i := range len(tt.cont) {
				got.WriteString(m.feed(tt.cont[i:i+1], false))
			}
			got.WriteString(m.feed("", true))
			if got.String() != tt.want {
				t.Errorf("seam(%q, %q) = %q, want %q", tt.delivered, tt.cont, got.String(), tt.want)
			}
		})
	}
}

func TestContinuationFor(t *testing.T) {
	for _, tt := range []struct {
		typ, model, set string
		want            Continuation
	}{
		{"ollama", "llama3", "", ContinuePrefill},
		{"anthropic", "claude-3-5-sonnet-20241022", "", ContinuePrefill},
		{"anthropic", "claude-sonnet-4-5", "", ContinuePrefill},
		{"anthropic", "claude-opus-4-1-20250805", "", ContinuePrefill},
		{"anthropic", "claude-sonnet-4-20250514", "", ContinuePrefill},
		{"anthropic", "claude-opus-4-6", "", ContinueInstruct},
		{"anthropic", "claude-sonnet-4-6", "", ContinueInstruct},
		{"anthropic", "claude-opus-5", "", ContinueInstruct},
		{"anthropic", "something-else", "", ContinueInstruct},
		{"openai", "gpt-4o", "", ContinueInstruct},
		{"openai", "qwen", "prefill", ContinueFinalMessage},
		{"ollama", "llama3", "instruct", ContinueInstruct},
		{"gemini", "gemini-2.5-pro", "", ContinueInstruct},
	} {
		if got := ContinuationFor(tt.typ, tt.model, tt.set); got != tt.want {
			t.Errorf("ContinuationFor(%q, %q, %q) = %q, want %q", tt.typ, tt.model, tt.set, got, tt.want)
		}
	}
}

func TestContinuationRequest(t *testing.T) {
	user := chat.Message{Role: chat.RoleUser, Content: "hi"}
	for _, tt := range []struct {
		name   string
		method Continuation
		msgs   []chat.Message
		think  *chat.ThinkingAsk
		want   []chat.Message
		extra  bool
	}{
		{"instruct", ContinueInstruct, []chat.Message{user}, nil,
			[]chat.Message{user, {Role: chat.RoleAssistant, Content: "Hello wor"}, {Role: chat.RoleUser, Content: "go on\n<<<\nHello wor\n>>>"}}, false},
		{"prefill", ContinuePrefill, []chat.Message{user}, nil,
			[]chat.Message{user, {Role: chat.RoleAssistant, Content: "Hello wor"}}, false},
		{"vllm", ContinueFinalMessage, []chat.Message{user}, nil,
			[]chat.Message{user, {Role: chat.RoleAssistant, Content: "Hello wor"}}, true},
		{"the client's own prefill", ContinuePrefill, []chat.Message{user, {Role: chat.RoleAssistant, Content: "> "}}, nil,
			[]chat.Message{user, {Role: chat.RoleAssistant, Content: "> Hello wor"}}, false},
		{"thinking is instructed", ContinuePrefill, []chat.Message{user}, &chat.ThinkingAsk{Effort: "high"},
			[]chat.Message{user, {Role: chat.RoleAssistant, Content: "Hello wor"}, {Role: chat.RoleUser, Content: "go on\n<<<\nHello wor\n>>>"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &session{alias: &alias{Alias: Alias{ContinuationPrompt: "go on"}}}
			s.cont.text = []byte("Hello wor")
			orig := &chat.Request{Messages: tt.msgs, Thinking: tt.think, MaxTokens: 100}
			req := s.continuation(orig.Clone(), &deployment{Deployment: Deployment{Continuation: tt.method}})
			if !slices.EqualFunc(req.Messages, tt.want, func(a, b chat.Message) bool { return a.Role == b.Role && a.Content == b.Content }) {
				t.Errorf("messages %+v, want %+v", req.Messages, tt.want)
			}
			if got := string(req.Extra["continue_final_message"]) == "true"; got != tt.extra {
				t.Errorf("continue_final_message %v, want %v", got, tt.extra)
			}
			if len(orig.Messages) != len(tt.msgs) || orig.Messages[len(orig.Messages)-1].Content != tt.msgs[len(tt.msgs)-1].Content || orig.Extra != nil {
				t.Errorf("the original request changed: %+v", orig)
			}
			if req.MaxTokens != 100-chat.EstimateTokens("Hello wor") {
				t.Errorf("max tokens %d", req.MaxTokens)
			}
		})
	}
}

// A request that continues an answer whose producer died (Hints.Continues)
// asks every deployment for the rest: the first that fails before its
// first token is passed over, the next continues, and the caller reads
// only the rest, the seam de-duplicated.
func TestTakeOver(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 34))
	synctest.Test(t, func(t *testing.T) {
		for trial := range 30 {
			cut := 1 + rng.IntN(len(cleanAnswer)-1)
			for cut < len(cleanAnswer) && !utf8.RuneStart(cleanAnswer[cut]) {
				cut++
			}
			var down, cont atomic.Int32
			d1 := dep(providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
				return func(yield func(chat.Chunk, error) bool) { down.Add(1); yield(chat.Chunk{}, errReset) }
			}), "a", "m", 0)
			d2 := dep(continuing(t, rng, seamMode(trial%3), ContinueInstruct, &cont), "b", "m2", 1)
			r := newRouter(t, Alias{Deployments: []Deployment{d1, d2}})
			req := ask("tell me")
			req.Hints.Continues = cleanAnswer[:cut]
			res := route(t, r, context.Background(), req)
			if res.err != nil || res.text != cleanAnswer[cut:] {
				t.Fatalf("trial %d (cut %d): err %v, text %q, want %q", trial, cut, res.err, res.text, cleanAnswer[cut:])
			}
			if down.Load() != 1 || cont.Load() != 1 || !res.rep.Continued() || res.rep.Deployment != "b/m2" || res.usage == nil || res.usage.OutputTokens != 7 {
				t.Errorf("calls %d, %d; continued %v, deployment %q, usage %+v", down.Load(), cont.Load(), res.rep.Continued(), res.rep.Deployment, res.usage)
			}
		}
	})
}

// A take-over that no deployment serves ends with an error and nothing
// passed on.
func TestTakeOverFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d1 := dep(providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
			return func(yield func(chat.Chunk, error) bool) { yield(chat.Chunk{}, errReset) }
		}), "a", "m", 0)
		r := newRouter(t, Alias{Deployments: []Deployment{d1}})
		req := ask("tell me")
		req.Hints.Continues = "Hello wor"
		res := route(t, r, context.Background(), req)
		if res.err == nil || res.text != "" {
			t.Fatalf("err %v, text %q: want an error and nothing passed on", res.err, res.text)
		}
	})
}

// TestPrefillTrailingWhitespace: a prefill never ends with whitespace
// (Anthropic refuses one: "final assistant content cannot end with
// trailing whitespace"); the seam drops the whitespace the caller already
// has when the continuation starts with it. An instructed continuation
// keeps the delivered text as it is.
func TestPrefillTrailingWhitespace(t *testing.T) {
	user := chat.Message{Role: chat.RoleUser, Content: "hi"}
	for _, tt := range []struct {
		name, delivered string
		method          Continuation
		want            string // the assistant message
		cont, out       string // a continuation, and what the seam passes on
	}{
		{"paragraph", "Hello world.\n\n", ContinuePrefill, "Hello world.", "\n\nNext one.", "Next one."},
		{"space", "Hello ", ContinuePrefill, "Hello", " world", "world"},
		{"restart", "Hello wide ", ContinuePrefill, "Hello wide", "wide world", "world"},
		{"other whitespace", "Hello.\n\n", ContinuePrefill, "Hello.", " Next", " Next"},
		{"space and a cut character", "Hello \xe6\x97", ContinuePrefill, "Hello", " 日本", "\xa5本"},
		{"instruct", "Hello world.\n\n", ContinueInstruct, "Hello world.\n\n", "Next one.", "Next one."},
		// The seam drops at most seamMax bytes of it.
		{"long whitespace", "Hello" + strings.Repeat(" ", 300), ContinuePrefill, "Hello", strings.Repeat(" ", 300) + "world", strings.Repeat(" ", 100) + "world"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &session{alias: &alias{Alias: Alias{ContinuationPrompt: "go on"}}}
			s.cont.text = []byte(tt.delivered)
			req := s.continuation(&chat.Request{Messages: []chat.Message{user}}, &deployment{Deployment: Deployment{Continuation: tt.method}})
			if got := req.Messages[1]; got.Role != chat.RoleAssistant || got.Content != tt.want {
				t.Errorf("assistant message %+v, want %q", got, tt.want)
			}
			var out strings.Builder
			for _, r := range tt.cont {
				out.WriteString(s.cont.seam.feed(string(r), false))
			}
			out.WriteString(s.cont.seam.feed("", true))
			if out.String() != tt.out {
				t.Errorf("passed on %q, want %q", out.String(), tt.out)
			}
		})
	}
}
