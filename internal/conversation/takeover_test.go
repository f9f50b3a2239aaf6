package conversation

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

// Continue runs the turn of an answer whose replica died: the prompt is
// the one the answer had (history up to its user message, not the answer
// itself), the router is asked for the rest of the durable text, only
// the rest is yielded, and the stored answer is the durable text and the
// rest, complete, with the thinking the first producer stored.
func TestContinueTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		seed(st)
		ctx := context.Background()
		user := &store.Message{ID: "msg_c", ConversationID: "conv_1", TenantID: "t1", Role: "user", Content: "Hi", Status: store.StatusComplete}
		ans := &store.Message{ID: "msg_d", ConversationID: "conv_1", TenantID: "t1", Role: "assistant", Content: "Hello wor",
			Thinking: []byte(`[{"text":"Greet them."}]`), Status: store.StatusStreaming, Model: "chat"}
		if err := st.AddMessages(ctx, user, ans); err != nil {
			t.Fatal(err)
		}
		r := &fakeRouter{script: []step{{chunk: chat.Chunk{Text: "ld!"}}, {chunk: chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 9, OutputTokens: 2}}}}}
		s := New(Options{Store: st})
		turn, err := s.Continue(ctx, Takeover{RequestID: "req_2", Answer: ans, Text: "Hello wor",
			Resolve: func(u string) (*call.Call, error) {
				if u != "u1" {
					t.Errorf("resolved for user %q, want the conversation's, u1", u)
				}
				return newCall(t, r, budget.New(time.Now()), nil, 0), nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		var evs []Event
		cctx, release := turn.in.Call.Context(ctx)
		defer release(nil)
		turn.Run(cctx, func(ev Event) bool { evs = append(evs, ev); return true })
		synctest.Wait()
		if len(evs) != 2 || evs[0].Kind != "delta" || evs[0].Text != "ld!" || evs[1].Kind != "done" || evs[1].Done.Status != store.StatusComplete {
			t.Fatalf("events %+v: want the rest, then done complete", evs)
		}
		req := r.reqs[0]
		if req.Hints.Continues != "Hello wor" {
			t.Errorf("the router was asked to continue %q", req.Hints.Continues)
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role != chat.RoleUser || last.Content != "Hi" || len(req.Messages) != 3 {
			t.Errorf("prompt %+v: want the history, then the user message the answer answers", req.Messages)
		}
		saved, _ := st.saved()
		if len(saved) != 1 || saved[0].ID != "msg_d" || saved[0].Content != "Hello world!" || saved[0].Status != store.StatusComplete ||
			string(saved[0].Thinking) != `[{"text":"Greet them."}]` {
			t.Errorf("saved %+v", saved)
		}
	})
}

// A producer whose answer another process took over writes nothing more
// to the store: its checkpoints stop, its last write is not made, and its
// client is told to resume (interrupted).
func TestRunTakenOverStoresNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var held atomic.Bool
		held.Store(true)
		r := &fakeRouter{script: []step{{chunk: chat.Chunk{Text: "one "}}, {after: time.Second, chunk: chat.Chunk{Text: "two "}},
			{after: time.Second, chunk: chat.Chunk{Text: "three"}}, {chunk: chat.Chunk{FinishReason: chat.FinishStop}}}}
		st := newFakeStore()
		s := New(Options{Store: st, CheckpointInterval: 100 * time.Millisecond, CheckpointTokens: 1})
		c := newCall(t, r, budget.New(time.Now()), nil, 0)
		turn, err := s.Prepare(context.Background(), Input{RequestID: "req_1", TenantID: "t1", UserID: "u1", Model: "chat", Message: "Hi", Call: c, Held: held.Load})
		if err != nil {
			t.Fatal(err)
		}
		cctx, release := c.Context(context.Background())
		defer release(nil)
		var evs []Event
		turn.Run(cctx, func(ev Event) bool {
			evs = append(evs, ev)
			if ev.Kind == "delta" && ev.Text == "two " {
				held.Store(false)
			}
			return true
		})
		synctest.Wait()
		saved, cps := st.saved()
		if len(saved) != 0 {
			t.Errorf("the answer taken over was saved: %+v", saved)
		}
		for _, cp := range cps {
			if cp.Content != "one " {
				t.Errorf("checkpoint %q after the take-over", cp.Content)
			}
		}
		last := evs[len(evs)-1]
		if last.Kind != "error" || last.Error.Code != "interrupted" || !last.Error.Retryable {
			t.Errorf("last event %+v: want a retryable interrupted error", last)
		}
	})
}

// A turn refused because its first write failed leaves nothing behind
// when the write landed after all (a stalled database that went on): its
// user message and empty answer, or the conversation it created, are
// deleted, trying again while the store fails (issue 34).
func TestRefusedTurnUndone(t *testing.T) {
	for _, existing := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			st := newFakeStore()
			if existing {
				seed(st)
				st.errAdd = store.ErrUnavailable
			} else {
				st.errCreate = store.ErrUnavailable
			}
			st.landLate, st.deleteFailures = true, 2
			s := New(Options{Store: st})
			in := Input{RequestID: "req_1", TenantID: "t1", UserID: "u1", Model: "chat", Message: "Hi",
				Call: newCall(t, &fakeRouter{}, budget.New(time.Now()), nil, 0)}
			if existing {
				in.ConversationID = "conv_1"
			}
			if _, err := s.Prepare(context.Background(), in); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("Prepare = %v, want the write's error", err)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			st.mu.Lock()
			defer st.mu.Unlock()
			want := 0
			if existing {
				want = 2 // the seeded exchange
			}
			if len(st.msgs) != want || st.deletes != 3 {
				t.Errorf("existing %v: %d messages left, %d deletes; want %d, the third delete going through", existing, len(st.msgs), st.deletes, want)
			}
			if _, ok := st.convs["conv_1"]; existing != ok || (!existing && len(st.convs) != 0) {
				t.Errorf("existing %v: conversations %v", existing, st.convs)
			}
		})
	}
}

// An answer whose last write meets a stalled database is still told as it
// ended (done, complete), and the write is retried until it lands: the
// store then says what the client was told, with the text it was sent
// (issue 34).
func TestFinishRetriedUntilItLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		st.finishFailures = 3
		r := &fakeRouter{script: []step{{chunk: chat.Chunk{Text: "Hello "}}, {chunk: chat.Chunk{Text: "world"}}, {chunk: chat.Chunk{FinishReason: chat.FinishStop}}}}
		p := play(t, setup{router: r, store: st})
		last := p.events[len(p.events)-1]
		if last.Kind != "done" || last.Done.Status != store.StatusComplete {
			t.Fatalf("last event %+v, want done complete", last)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.finished) != 4 {
			t.Fatalf("%d writes of the answer, want 4 (3 failed, then it landed)", len(st.finished))
		}
		var stored *store.Message
		for _, m := range st.msgs {
			if m.ID == p.meta.MessageID {
				stored = m
			}
		}
		if stored == nil || stored.Status != store.StatusComplete || stored.Content != "Hello world" {
			t.Errorf("stored %+v, want complete with the text sent", stored)
		}
	})
}
