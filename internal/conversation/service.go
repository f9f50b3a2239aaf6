// Package conversation is the /v1/chat pipeline: it stores the user's
// message, runs the guardrail and the context sources in parallel, builds
// the prompt with its stable prefix first, streams the answer from the
// router, checkpoints it while it streams, and on every ending saves
// exactly the text that reached the client.
//
//	meta ─► guard ∥ history ∥ retrieval ∥ lookups ─► prompt ─► router ─► deltas ─► persist ─► done
package conversation

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

// Verdict is a guard's decision on a message.
type Verdict struct {
	Blocked bool
	Code    string // why it was blocked, e.g. "prompt_injection"
	Reason  string // a sentence safe to show the user
	Text    string // the message as the model may see it (redacted)
	Flags   []string
}

// Guard checks user input. CheckLocal is fast and pure; Check may call a
// remote guard and must honour ctx.
type Guard interface {
	CheckLocal(text string) Verdict
	Check(ctx context.Context, text, user string) (Verdict, error)
}

// Query is what a context source is asked.
type Query struct {
	TenantID, UserID, ConversationID, Question string
}

// Citation points at a retrieved passage.
type Citation struct {
	N       int    `json:"n"`
	Doc     string `json:"doc"`
	Passage int    `json:"passage"`
}

// Source is a context source: a document index, an HTTP lookup.
type Source struct {
	Name string
	// Fetch returns the text to put in the prompt.
	Fetch func(ctx context.Context, q Query) (text string, cites []Citation, err error)
	// Timeout bounds Fetch.
	Timeout time.Duration
	// Optional sources that fail or time out are skipped and reported;
	// a required one fails the request.
	Optional bool
}

// Options configures a Service.
type Options struct {
	Store store.Store
	// Guard may be nil. RemoteGuard says whether Check does more than
	// CheckLocal (a remote call worth running in parallel).
	Guard       Guard
	RemoteGuard bool
	// GuardBefore makes the model wait for the guard's verdict; otherwise
	// the model call starts when the context is ready and its text is held
	// back until the guard passes.
	GuardBefore  bool
	GuardTimeout time.Duration
	Sources      []Source
	// HistoryTokens bounds the history in the prompt; HistoryTimeout
	// bounds loading it.
	HistoryTokens  int
	HistoryTimeout time.Duration
	// SystemPrompt per alias. (Answer caps are the levers'.)
	SystemPrompt func(alias string) string
	// CheckpointInterval and CheckpointTokens: how often a streaming
	// answer is saved.
	CheckpointInterval time.Duration
	CheckpointTokens   int
	// TouchInterval is how often a streaming answer's row is rewritten
	// while the model is silent, to show it is alive (default 5s): with a
	// shared journal, a third of its lease, so that a row quiet for a
	// lease is a dead producer's (see httpapi.ContinueLost).
	TouchInterval time.Duration
	// DurableCheckpointInterval is how often the row of an answer whose
	// journal keeps it for another replica (Input.Durable) is saved,
	// instead of the three above (default DurableCheckpointEvery): the
	// journal is what a take-over continues from, and the row's
	// checkpoint only shows the answer alive to the stale-row sweeps.
	// Once the journal stops keeping it, the answer is saved at once,
	// then as the three above say.
	DurableCheckpointInterval time.Duration
	Log                       *slog.Logger
}

// Service runs chat turns. It is safe for concurrent use.
type Service struct {
	opt Options
}

// New returns a Service.
func New(opt Options) *Service {
	if opt.GuardTimeout <= 0 {
		opt.GuardTimeout = time.Second
	}
	if opt.HistoryTokens <= 0 {
		opt.HistoryTokens = 2000
	}
	if opt.HistoryTimeout <= 0 {
		opt.HistoryTimeout = 500 * time.Millisecond
	}
	if opt.CheckpointInterval <= 0 {
		opt.CheckpointInterval = 500 * time.Millisecond
	}
	if opt.CheckpointTokens <= 0 {
		opt.CheckpointTokens = 32
	}
	if opt.DurableCheckpointInterval <= 0 {
		opt.DurableCheckpointInterval = DurableCheckpointEvery
	}
	if opt.SystemPrompt == nil {
		opt.SystemPrompt = func(string) string { return "" }
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{opt: opt}
}

// Input is one chat turn's request.
type Input struct {
	RequestID      string
	TenantID       string
	UserID         string
	ConversationID string // empty starts a new conversation
	// CreateMissing creates the conversation ConversationID names when
	// the tenant has none of that ID (the AI SDK's client-chosen chat ids,
	// which httpapi maps to an ID of the tenant and user): the first turn
	// of a chat creates it.
	CreateMissing bool
	// SharedConversations lets the user continue another user's
	// conversation of the same tenant; otherwise it is not found.
	SharedConversations bool
	Model               string
	Message             string
	// Call is the request's call (package call), resolved for Model: the
	// turn routes its prompt through it, records its stages in the call's
	// timings, and the call tells how the turn ended and meters it.
	Call *call.Call
	// Hints are the client's hints to the levers and providers.
	Hints chat.Hints
	// Held reports whether this process still produces the answer: false
	// once another took it over (its journal lease lapsed, see
	// journal.Writer.Held), after which the turn writes nothing to the
	// store. nil: always.
	Held func() bool
	// Durable reports whether the answer's journal keeps what was
	// delivered for another process to continue it from (a shared
	// journal that is reachable: journal.Durable): while it does, the
	// answer's row is saved only every DurableCheckpointInterval. nil:
	// never (the row is what a restart continues from).
	Durable func() bool
}

// Request errors, returned by Prepare before anything is streamed.
var (
	ErrEmptyMessage  = errors.New("message is required")
	ErrNotFound      = errors.New("conversation not found")
	ErrMessageTooBig = errors.New("message too long")
)

// maxMessageBytes bounds a message before the guard even sees it.
const maxMessageBytes = 256 << 10

// CheckMessage returns the error Begin would refuse msg with, if any: a
// caller that changes the history before the turn (an edit) checks first.
func CheckMessage(msg string) error {
	if strings.TrimSpace(msg) == "" {
		return ErrEmptyMessage
	}
	if len(msg) > maxMessageBytes || !utf8.ValidString(msg) {
		return ErrMessageTooBig
	}
	return nil
}

// Turn is a prepared chat turn: the user's message is stored and the
// assistant's placeholder exists. Run streams it.
type Turn struct {
	s            *Service
	in           Input
	conv         *store.Conversation
	user         *store.Message
	assistant    *store.Message
	created      bool
	historyUntil int // messages with Seq below this are history
	// local is the local guard's verdict, taken before anything was
	// stored, so that no stored copy (message, title) holds what it
	// redacts; nil without a guard.
	local *Verdict
	// written is closed when the user's message and the answer's
	// placeholder are written (or failed to be: writeErr); historyUntil
	// is set by then.
	written  chan struct{}
	writeErr error
	// continues is the text an answer taken over had delivered (see
	// Continue); empty for a new turn.
	continues string
}

// Prepare validates the input, creates the conversation if needed, and
// stores the user's message and the assistant's streaming placeholder.
// Its errors are the client's (ErrEmptyMessage, ErrNotFound,
// ErrMessageTooBig) or the store's.
func (s *Service) Prepare(ctx context.Context, in Input) (*Turn, error) {
	t, err := s.Begin(ctx, in)
	if err != nil {
		return nil, err
	}
	if err := t.Stored(); err != nil {
		return nil, err
	}
	return t, nil
}

// Begin is Prepare without waiting for the write: it validates the input
// and reads the conversation (its errors are Prepare's, but for the
// write's), and returns while the user's message and the answer's
// placeholder are being written. Run may start at once: the context and
// the model's call proceed during the write, and no event is yielded
// before it ended (Stored tells how). A failed write ends Run with
// nothing saved and nothing yielded but the error event, which the caller
// answers instead with Stored's error while it has sent nothing.
func (s *Service) Begin(ctx context.Context, in Input) (*Turn, error) {
	if err := CheckMessage(in.Message); err != nil {
		return nil, err
	}
	t := &Turn{s: s, in: in}
	// The local guard is microseconds: it runs first, so that redactions
	// reach the store and the model in either guard mode.
	content := in.Message
	if g := s.opt.Guard; g != nil {
		start := time.Now()
		v := g.CheckLocal(in.Message)
		in.Call.Timings().Add("guard.local", start, time.Now(), verdictNote(v))
		t.local = &v
		// A redacted message is stored (and sent to the model) redacted; a
		// blocked one as the user wrote it.
		if v.Text != "" && !v.Blocked {
			content = v.Text
		}
	}
	now := time.Now().UTC()
	t.user = &store.Message{ID: store.NewID("msg_"), TenantID: in.TenantID, Role: "user", Content: content, Status: store.StatusComplete, Model: in.Model, CreatedAt: now, UpdatedAt: now}
	t.assistant = &store.Message{ID: store.NewID("msg_"), TenantID: in.TenantID, Role: "assistant", Status: store.StatusStreaming, Model: in.Model, CreatedAt: now, UpdatedAt: now}
	// The user's message and the answer's placeholder are one write (with
	// the conversation when it is new): one wait for the database.
	if in.ConversationID != "" {
		c, err := s.opt.Store.GetConversation(ctx, in.TenantID, in.ConversationID)
		// Another user's conversation is reported as not found, not forbidden:
		// its existence is not revealed.
		switch {
		case errors.Is(err, store.ErrNotFound) && in.CreateMissing:
			t.conv = &store.Conversation{ID: in.ConversationID, TenantID: in.TenantID, UserID: in.UserID, Title: title(content), Model: in.Model, CreatedAt: now, UpdatedAt: now}
			t.created = true
		case errors.Is(err, store.ErrNotFound) || err == nil && c.UserID != in.UserID && !in.SharedConversations:
			return nil, ErrNotFound
		case err != nil:
			return nil, err
		default:
			t.conv = c
		}
	} else {
		t.conv = &store.Conversation{ID: store.NewID("conv_"), TenantID: in.TenantID, UserID: in.UserID, Title: title(content), Model: in.Model, CreatedAt: now, UpdatedAt: now}
		t.created = true
	}
	t.user.ConversationID, t.assistant.ConversationID = t.conv.ID, t.conv.ID
	t.written = make(chan struct{})
	go t.write(ctx)
	return t, nil
}

// write stores the user's message and the answer's placeholder (with the
// conversation when it is new). It outlives the request's cancellation,
// within its own bound: a client that leaves during the write still gets
// its turn saved (cancelled, or finished after a resume).
func (t *Turn) write(ctx context.Context) {
	defer close(t.written)
	end := t.in.Call.Timings().Begin("store.prepare")
	defer end("")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	st := t.s.opt.Store
	if t.created {
		t.writeErr = st.CreateConversation(ctx, t.conv, t.user, t.assistant)
		if t.writeErr != nil && t.in.CreateMissing {
			// Another turn of the same chat may have created it since it
			// was read: this one is then added to it.
			if c, err := st.GetConversation(ctx, t.in.TenantID, t.conv.ID); err == nil && c.UserID == t.in.UserID {
				t.created, t.conv = false, c
				t.writeErr = st.AddMessages(ctx, t.user, t.assistant)
			}
		}
	} else if err := st.AddMessages(ctx, t.user, t.assistant); errors.Is(err, store.ErrNotFound) {
		t.writeErr = ErrNotFound
	} else {
		t.writeErr = err
	}
	if t.writeErr != nil && !errors.Is(t.writeErr, ErrNotFound) {
		// The turn is refused; its write may still land (a database
		// that stalled, then went on): it is undone, so that the
		// conversation does not keep a message the client was told
		// failed, nor an empty answer.
		go t.undo()
	}
	// The store set Seq in the write: history is what came before this
	// message, even if other turns add messages meanwhile.
	t.historyUntil = t.user.Seq
}

// writeTimeout bounds the turn's first write once the request no longer
// does; the store's own timeout is usually shorter.
const writeTimeout = 5 * time.Second

// retryFor is how long a write that meets a stalled or unreachable
// database is tried again (see retry).
const retryFor = 15 * time.Minute

// retry runs op until it succeeds, with backoff (from half a second to
// 30 s), while it fails as an unreachable store does and for up to
// retryFor; it returns op's last error.
func retry(op func(ctx context.Context) error) error {
	deadline := time.Now().Add(retryFor)
	wait := 500 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err := op(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) || !(errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 30*time.Second)
	}
}

// undo deletes what a refused turn's write stored, if anything, trying
// again while the store does not answer.
func (t *Turn) undo() {
	st := t.s.opt.Store
	err := retry(func(ctx context.Context) error {
		if t.created {
			if err := st.DeleteConversation(ctx, t.in.TenantID, t.conv.ID); !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return nil
		}
		_, err := st.DeleteMessages(ctx, t.in.TenantID, t.user.ID, t.assistant.ID)
		return err
	})
	if err != nil {
		t.s.opt.Log.Warn("undoing a refused turn's write", "request_id", t.in.RequestID, "err", err)
	}
}

// Stored waits for the turn's first write and returns its error: nil once
// the user's message and the answer's placeholder are in the store.
func (t *Turn) Stored() error {
	<-t.written
	return t.writeErr
}

// Meta is the first event of a turn.
type Meta struct {
	ConversationID string `json:"conversation_id"`
	MessageID      string `json:"message_id"`
	UserMessageID  string `json:"user_message_id"`
	Model          string `json:"model"`
	Created        bool   `json:"created"`
}

// Meta returns the turn's meta event.
func (t *Turn) Meta() Meta {
	return Meta{ConversationID: t.conv.ID, MessageID: t.assistant.ID, UserMessageID: t.user.ID, Model: t.in.Model, Created: t.created}
}

// title is a conversation's title: the start of its first message.
func title(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if utf8.RuneCountInString(msg) <= 60 {
		return msg
	}
	r := []rune(msg)[:60]
	return strings.TrimSpace(string(r)) + "…"
}
