package conversation

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

// TestPrepareErrors checks the errors Prepare returns before anything is
// streamed, and that nothing is stored when it fails.
func TestPrepareErrors(t *testing.T) {
	storeDown := errors.New("database is locked")
	tests := []struct {
		name  string
		in    func(*Input)
		store func(*fakeStore)
		want  []error
	}{
		{name: "empty message", in: func(in *Input) { in.Message = " \n\t" }, want: []error{ErrEmptyMessage}},
		{name: "message too long", in: func(in *Input) { in.Message = strings.Repeat("a", maxMessageBytes+1) }, want: []error{ErrMessageTooBig}},
		{name: "message not UTF-8", in: func(in *Input) { in.Message = "caf\xe9" }, want: []error{ErrMessageTooBig}},
		{name: "no such conversation", in: func(in *Input) { in.ConversationID = "conv_nope" }, want: []error{ErrNotFound}},
		{name: "another tenant's conversation", in: func(in *Input) { in.ConversationID, in.TenantID = "conv_1", "t2" }, want: []error{ErrNotFound}},
		{name: "another user's conversation", in: func(in *Input) { in.ConversationID, in.UserID = "conv_1", "u2" }, want: []error{ErrNotFound}},
		{name: "conversation deleted meanwhile", in: func(in *Input) { in.ConversationID = "conv_1" }, store: func(s *fakeStore) { s.errAdd = store.ErrNotFound }, want: []error{ErrNotFound}},
		{name: "store down reading the conversation", in: func(in *Input) { in.ConversationID = "conv_1" }, store: func(s *fakeStore) { s.errGet = storeDown }, want: []error{storeDown}},
		{name: "store down adding messages", in: func(in *Input) { in.ConversationID = "conv_1" }, store: func(s *fakeStore) { s.errAdd = storeDown }, want: []error{storeDown}},
		{name: "store down creating the conversation", store: func(s *fakeStore) { s.errCreate = storeDown }, want: []error{storeDown}},
		// CreateMissing creates only what the tenant has none of.
		{name: "another user's conversation, CreateMissing", in: func(in *Input) { in.ConversationID, in.UserID, in.CreateMissing = "conv_1", "u2", true }, want: []error{ErrNotFound}},
		{name: "store down reading the conversation, CreateMissing", in: func(in *Input) { in.ConversationID, in.CreateMissing = "conv_ui_1", true }, store: func(s *fakeStore) { s.errGet = storeDown }, want: []error{storeDown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			seed(st)
			if tt.store != nil {
				tt.store(st)
			}
			s := New(Options{Store: st})
			in := Input{TenantID: "t1", UserID: "u1", Model: "chat", Message: "Hi", Call: newCall(t, &fakeRouter{}, budget.New(time.Now()), nil, 0)}
			if tt.in != nil {
				tt.in(&in)
			}
			turn, err := s.Prepare(t.Context(), in)
			for _, want := range tt.want {
				if !errors.Is(err, want) || turn != nil {
					t.Errorf("Prepare = %v, %v; want nil, %v", turn, err, want)
				}
			}
			st.mu.Lock() // a refused write's undo may be running
			n := len(st.msgs)
			st.mu.Unlock()
			if n != 2 {
				t.Errorf("%d messages stored, want the 2 seeded", n)
			}
		})
	}
}

// TestPrepare checks what Prepare stores: the user's message (as the
// local guard redacted it) and the answer's streaming placeholder, in a
// new conversation titled by the message or in an existing one.
func TestPrepare(t *testing.T) {
	tests := []struct {
		name     string
		in       func(*Input)
		guard    *fakeGuard
		created  bool
		title    string
		content  string
		messages int // in the conversation
	}{
		{name: "new conversation", created: true, title: "Hi", content: "Hi", messages: 2},
		{
			name:    "long first message",
			in:      func(in *Input) { in.Message = strings.Repeat("word ", 20) },
			created: true, title: strings.TrimSpace(strings.Repeat("word ", 12)) + "…", content: strings.Repeat("word ", 20), messages: 2,
		},
		{name: "existing conversation", in: func(in *Input) { in.ConversationID = "conv_1" }, content: "Hi", messages: 4},
		{
			// A client's chat id: the first turn creates its conversation...
			name:    "CreateMissing, first turn",
			in:      func(in *Input) { in.ConversationID, in.CreateMissing = "conv_ui_new", true },
			created: true, title: "Hi", content: "Hi", messages: 2,
		},
		{
			// ...and the next ones continue it.
			name:    "CreateMissing, existing conversation",
			in:      func(in *Input) { in.ConversationID, in.CreateMissing = "conv_1", true },
			content: "Hi", messages: 4,
		},
		{
			name:    "another user's conversation, shared",
			in:      func(in *Input) { in.ConversationID, in.UserID, in.SharedConversations = "conv_1", "u2", true },
			content: "Hi", messages: 4,
		},
		{
			// The model, the store and the title see the redacted text.
			name:    "redacted by the local guard",
			in:      func(in *Input) { in.Message = "Call me at 555-0100" },
			guard:   &fakeGuard{local: Verdict{Text: "Call me at [PHONE]", Flags: []string{"pii:redact"}}},
			created: true, title: "Call me at [PHONE]", content: "Call me at [PHONE]", messages: 2,
		},
		{
			// A blocked message is kept as sent: Run refuses it.
			name:    "blocked by the local guard",
			guard:   &fakeGuard{local: Verdict{Blocked: true, Code: "blocklist", Text: "redacted"}},
			created: true, title: "Hi", content: "Hi", messages: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			seed(st)
			opt := Options{Store: st}
			if tt.guard != nil {
				opt.Guard = tt.guard
			}
			s := New(opt)
			in := Input{TenantID: "t1", UserID: "u1", Model: "chat", Message: "Hi", Call: newCall(t, &fakeRouter{}, budget.New(time.Now()), nil, 0)}
			if tt.in != nil {
				tt.in(&in)
			}
			turn, err := s.Prepare(t.Context(), in)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			meta := turn.Meta()
			if in.ConversationID != "" && meta.ConversationID != in.ConversationID {
				t.Errorf("conversation %s, want %s", meta.ConversationID, in.ConversationID)
			}
			if meta.Created != tt.created || meta.Model != "chat" {
				t.Errorf("meta %+v; want created %v, model chat", meta, tt.created)
			}
			c, err := st.GetConversation(t.Context(), in.TenantID, meta.ConversationID)
			if err != nil {
				t.Fatalf("the conversation: %v", err)
			}
			if tt.created && c.Title != tt.title {
				t.Errorf("title %q, want %q", c.Title, tt.title)
			}
			msgs, _ := st.LastMessages(t.Context(), in.TenantID, meta.ConversationID, 64)
			if len(msgs) != tt.messages {
				t.Fatalf("%d messages in the conversation, want %d", len(msgs), tt.messages)
			}
			n := len(msgs)
			want := []store.Message{
				{ID: meta.UserMessageID, Seq: n - 1, Role: "user", Content: tt.content, Status: store.StatusComplete},
				{ID: meta.MessageID, Seq: n, Role: "assistant", Status: store.StatusStreaming},
			}
			for i := range want {
				want[i].ConversationID, want[i].TenantID, want[i].Model = meta.ConversationID, "t1", "chat"
			}
			if diff := cmp.Diff(want, msgs[n-2:], cmpopts.IgnoreFields(store.Message{}, "CreatedAt", "UpdatedAt")); diff != "" {
				t.Errorf("stored messages (-want +got):\n%s", diff)
			}
			if turn.historyUntil != n-1 {
				t.Errorf("history until seq %d, want %d (the user's message)", turn.historyUntil, n-1)
			}
			if tt.guard != nil && (turn.local == nil || turn.local.Text != tt.guard.local.Text) {
				t.Errorf("local verdict %+v, want %+v", turn.local, tt.guard.local)
			}
		})
	}
}

func TestTitle(t *testing.T) {
	tests := []struct{ msg, want string }{
		{"Hi", "Hi"},
		{"  Where\n\tis   my order? ", "Where is my order?"},
		{strings.Repeat("é", 60), strings.Repeat("é", 60)},
		{strings.Repeat("é", 61), strings.Repeat("é", 60) + "…"},
		{strings.Repeat("ab ", 30), strings.TrimSpace(strings.Repeat("ab ", 20)) + "…"},
	}
	for _, tt := range tests {
		if got := title(tt.msg); got != tt.want {
			t.Errorf("title(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

// TestNewDefaults checks the defaults New fills in.
func TestNewDefaults(t *testing.T) {
	s := New(Options{})
	o := s.opt
	if o.GuardTimeout != time.Second || o.HistoryTokens != 2000 || o.HistoryTimeout != 500*time.Millisecond ||
		o.CheckpointInterval != 500*time.Millisecond || o.CheckpointTokens != 32 || o.SystemPrompt("chat") != "" || o.Log == nil {
		t.Errorf("defaults: %+v", o)
	}
	o.Log.Info("discarded") // a usable logger
}

// TestBeginRunsDuringTheWrite: after Begin, the turn's model call starts
// while the user's message is still being written, and no event reaches
// the client before the write is done; a failed write ends the turn with
// store_unavailable and nothing saved.
func TestBeginRunsDuringTheWrite(t *testing.T) {
	storeDown := errors.New("database is locked")
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "written", true: "write failed"}[fail], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newFakeStore()
				st.createGate = make(chan struct{})
				if fail {
					st.errCreate = storeDown
				}
				r := &fakeRouter{script: []step{{chunk: chat.Chunk{Text: "Hello"}}, {chunk: chat.Chunk{FinishReason: chat.FinishStop}}}}
				s := New(Options{Store: st})
				rec := budget.New(time.Now())
				c := newCall(t, r, rec, nil, 0)
				turn, err := s.Begin(t.Context(), Input{TenantID: "t1", UserID: "u1", Model: "chat", Message: "Hi", Call: c})
				if err != nil {
					t.Fatalf("Begin: %v", err)
				}
				var events []Event
				done := make(chan struct{})
				go func() {
					defer close(done)
					ctx, release := c.Context(t.Context())
					defer release(nil)
					turn.Run(ctx, func(ev Event) bool { events = append(events, ev); return true })
				}()
				synctest.Wait()
				if reqs, _ := r.calls(); len(reqs) != 1 || len(events) != 0 {
					t.Fatalf("during the write: %d model calls, events %v; want the call made and no event", len(reqs), events)
				}
				close(st.createGate)
				<-done
				saved, _ := st.saved()
				switch {
				case fail && (turn.Stored() != storeDown || len(events) != 1 || events[0].Error == nil || events[0].Error.Code != "store_unavailable" || len(saved) != 0):
					t.Errorf("write failed: Stored %v, events %+v, %d saved; want the store's error, one store_unavailable error event, nothing saved", turn.Stored(), events, len(saved))
				case !fail && (turn.Stored() != nil || len(events) != 2 || events[0].Text != "Hello" || events[1].Done == nil || len(saved) != 1 || saved[0].Status != store.StatusComplete):
					t.Errorf("written: Stored %v, events %+v, saved %+v; want Hello then done, the answer saved complete", turn.Stored(), events, saved)
				}
			})
		})
	}
}
