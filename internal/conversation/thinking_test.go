package conversation

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

func thinking(s string) Event { return Event{Kind: "thinking", Text: s} }

var (
	restartEvent  = Event{Kind: "thinking", Restart: true}
	redactedEvent = Event{Kind: "thinking", Redacted: true}
)

// thinks is a chunk of thinking text.
func thinks(after time.Duration, s string) step {
	return step{after: after, chunk: chat.Chunk{Thinking: s}}
}

// thought is a chunk that carries th (a signature, a redacted block, a
// restart).
func thought(th chat.Thought) step { return step{chunk: chat.Chunk{Thought: &th}} }

// TestRunThinking: a model's thinking reaches the client as thinking
// events, never in the answer's text, and the message is stored with the
// thinking the client was shown (and its signatures), however the turn
// ends.
func TestRunThinking(t *testing.T) {
	ms := time.Millisecond
	sig := chat.Thought{Signature: "c2lnLTE=", Format: chat.ThinkingAnthropic}
	red := chat.Thought{Redacted: "cmVkYWN0ZWQ=", Format: chat.ThinkingAnthropic}
	answerAfterThinking := []step{
		thinks(100*ms, "Let me "), thinks(100*ms, "see."), thought(sig), thought(red),
		{after: 100 * ms, chunk: chat.Chunk{Text: "Hel"}},
		{after: 100 * ms, chunk: chat.Chunk{Text: "lo"}},
		{chunk: chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 10, OutputTokens: 9}}},
	}
	signed := []chat.ThinkingBlock{
		{Text: "Let me see.", Signature: sig.Signature, Format: chat.ThinkingAnthropic},
		{Redacted: red.Redacted, Format: chat.ThinkingAnthropic},
	}
	tests := []struct {
		name     string
		setup    setup
		events   []string // the events' kinds, checked with what the stored message says
		status   store.Status
		thinking []chat.ThinkingBlock
	}{
		{
			name:     "done",
			setup:    setup{router: &fakeRouter{script: answerAfterThinking}},
			events:   []string{"thinking", "thinking", "thinking", "delta", "delta", "done"},
			status:   store.StatusComplete,
			thinking: signed,
		},
		{
			// The failed attempt's thinking is dropped by the client and
			// from the store; the new attempt's is kept.
			name: "done after a restart",
			setup: setup{router: &fakeRouter{script: append([]step{
				thinks(50*ms, "A bad "), thinks(50*ms, "start"),
				{failover: &chat.Usage{InputTokens: 5}},
				thought(chat.Thought{Restart: true}),
			}, answerAfterThinking...)}},
			events:   []string{"thinking", "thinking", "thinking", "thinking", "thinking", "thinking", "delta", "delta", "done"},
			status:   store.StatusComplete,
			thinking: signed,
		},
		{
			// A restart after no thinking shown is not sent.
			name: "restart with nothing shown",
			setup: setup{router: &fakeRouter{script: append([]step{
				{after: 50 * ms, failover: &chat.Usage{InputTokens: 5}},
				thought(chat.Thought{Restart: true}),
			}, answerAfterThinking...)}},
			events:   []string{"thinking", "thinking", "thinking", "delta", "delta", "done"},
			status:   store.StatusComplete,
			thinking: signed,
		},
		{
			name: "error after the first word",
			setup: setup{router: &fakeRouter{script: []step{
				thinks(100*ms, "Let me "), thinks(100*ms, "see."), thought(sig),
				{after: 100 * ms, chunk: chat.Chunk{Text: "Hel"}},
				{err: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "the provider failed"}},
			}}},
			events:   []string{"thinking", "thinking", "delta", "error"},
			status:   store.StatusError,
			thinking: signed[:1],
		},
		{
			// Failing while it thinks: the thinking shown is kept, unsigned.
			name: "error while thinking",
			setup: setup{router: &fakeRouter{script: []step{
				thinks(100*ms, "Let me "),
				{err: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "the provider failed"}},
			}}},
			events:   []string{"thinking", "error"},
			status:   store.StatusError,
			thinking: []chat.ThinkingBlock{{Text: "Let me "}},
		},
		{
			// The client leaves while the model thinks: the thinking it did
			// not receive is not stored.
			name:     "client gone while thinking",
			setup:    setup{router: &fakeRouter{script: answerAfterThinking}, leaveAtEvent: 2},
			events:   []string{"thinking", "thinking"},
			status:   store.StatusCancelled,
			thinking: []chat.ThinkingBlock{{Text: "Let me "}},
		},
		{
			name:     "client gone during the answer",
			setup:    setup{router: &fakeRouter{script: answerAfterThinking}, leaveAtEvent: 5},
			events:   []string{"thinking", "thinking", "thinking", "delta", "delta"},
			status:   store.StatusCancelled,
			thinking: signed,
		},
		{
			// Parallel guard: thinking is held back like text, and a block
			// shows none of it.
			name: "blocked while the thinking was held back",
			setup: setup{router: &fakeRouter{script: answerAfterThinking}, remote: true,
				guard: &fakeGuard{remote: blocked, after: 150 * ms}},
			events: []string{"error"},
			status: store.StatusError,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := play(t, tc.setup)
				var kinds []string
				for _, ev := range p.events {
					kinds = append(kinds, ev.Kind)
				}
				if diff := cmp.Diff(tc.events, kinds); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if len(p.saved) != 1 {
					t.Fatalf("saved %d messages, want 1", len(p.saved))
				}
				m := p.saved[0]
				if m.Status != tc.status {
					t.Errorf("stored status %s, want %s", m.Status, tc.status)
				}
				stored := StoredThinking(m.Thinking)
				if diff := cmp.Diff(tc.thinking, stored); diff != "" {
					t.Errorf("stored thinking (-want +got):\n%s", diff)
				}
				checkShown(t, p, m, stored)
			})
		})
	}
}

// checkShown checks that the stored message is what the client was shown
// (the events it received, the last one excepted if it refused it): the
// answer's text, the thinking text after the last restart, as many
// redacted blocks, and no thinking in the text.
func checkShown(t *testing.T, p played, m store.Message, stored []chat.ThinkingBlock) {
	t.Helper()
	evs := p.events
	if m.Status == store.StatusCancelled {
		evs = evs[:len(evs)-1] // refused
	}
	var text, think strings.Builder
	redacted := 0
	for _, ev := range evs {
		switch {
		case ev.Kind == "delta":
			text.WriteString(ev.Text)
		case ev.Kind == "thinking" && ev.Restart:
			think.Reset()
			redacted = 0
		case ev.Kind == "thinking" && ev.Redacted:
			redacted++
		case ev.Kind == "thinking":
			think.WriteString(ev.Text)
		}
	}
	var storedText strings.Builder
	storedRedacted := 0
	for _, b := range stored {
		storedText.WriteString(b.Text)
		if b.Redacted != "" {
			storedRedacted++
		}
	}
	if m.Content != text.String() {
		t.Errorf("stored content %q, the client was sent %q", m.Content, text.String())
	}
	if storedText.String() != think.String() || storedRedacted != redacted {
		t.Errorf("stored thinking %q (%d redacted), the client was sent %q (%d redacted)", storedText.String(), storedRedacted, think.String(), redacted)
	}
}

// TestRunThinkingEvents: the events' contents, in order, a chunk's
// thinking before its text.
func TestRunThinkingEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := play(t, setup{router: &fakeRouter{script: []step{
			thinks(10*time.Millisecond, "Hm"),
			{after: 10 * time.Millisecond, failover: &chat.Usage{}},
			thought(chat.Thought{Restart: true}),
			thought(chat.Thought{Redacted: "opaque", Format: chat.ThinkingAnthropic}),
			{chunk: chat.Chunk{Thinking: "Yes.", Thought: &chat.Thought{Signature: "s"}, Text: "Hi"}},
			{chunk: chat.Chunk{FinishReason: chat.FinishStop}},
		}}})
		want := []Event{thinking("Hm"), restartEvent, redactedEvent, thinking("Yes."), delta("Hi")}
		if diff := cmp.Diff(want, p.events[:len(p.events)-1]); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

// TestRunThinkingHistory: the next turn's prompt carries the stored
// answers' thinking blocks, signatures and redacted data as they came,
// apart from the answer's text.
func TestRunThinkingHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		seed(st)
		blocks := []chat.ThinkingBlock{
			{Text: "Think.", Signature: "c2ln", Format: chat.ThinkingAnthropic},
			{Redacted: "cmVk", Format: chat.ThinkingAnthropic},
		}
		st.msgs[1].Thinking = thinkingJSON(blocks)
		p := play(t, setup{router: &fakeRouter{script: answer}, store: st, seeded: true})
		if len(p.reqs) != 1 {
			t.Fatalf("%d requests to the router, want 1", len(p.reqs))
		}
		want := []chat.Message{
			{Role: chat.RoleUser, Content: "Earlier question"},
			{Role: chat.RoleAssistant, Content: "Earlier answer", Thinking: blocks, CacheBreakpoint: true},
			{Role: chat.RoleUser, Content: "Hi", CacheBreakpoint: true},
		}
		if diff := cmp.Diff(want, p.reqs[0].Messages); diff != "" {
			t.Errorf("the prompt (-want +got):\n%s", diff)
		}
	})
}

// TestStoredThinking: what the column holds reads back as blocks; what
// does not read as blocks is no thinking, not an error.
func TestStoredThinking(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []chat.ThinkingBlock
	}{
		{"", nil},
		{`[{"text":"a","signature":"s","format":"anthropic","id":"rs_1"}]`, []chat.ThinkingBlock{{Text: "a", Signature: "s", Format: "anthropic", ID: "rs_1"}}},
		{`{"text":"a"}`, nil},
		{`[{"text":`, nil},
		{`null`, nil},
	} {
		if diff := cmp.Diff(tc.want, StoredThinking([]byte(tc.in))); diff != "" {
			t.Errorf("StoredThinking(%s) (-want +got):\n%s", tc.in, diff)
		}
	}
	if got := thinkingJSON(nil); got != nil {
		t.Errorf("thinkingJSON(nil) = %s, want nil", got)
	}
}

// TestRunThinkingCheckpoints: a long thinking is checkpointed as it
// streams, before any answer text.
func TestRunThinkingCheckpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := play(t, setup{router: &fakeRouter{script: []step{
			thinks(100*time.Millisecond, "Let me think."),
			{after: time.Second, chunk: chat.Chunk{Text: "Hi"}},
			{chunk: chat.Chunk{FinishReason: chat.FinishStop}},
		}}})
		if len(p.cps) == 0 {
			t.Fatal("no checkpoint")
		}
		if got, want := p.cps[0].Thinking, `[{"text":"Let me think."}]`; got != want || p.cps[0].Content != "" {
			t.Errorf("first checkpoint: content %q, thinking %s, want none and %s", p.cps[0].Content, got, want)
		}
	})
}
