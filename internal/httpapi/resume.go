package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/store"
)

// Resumable answers (docs/resume.md). A /v1/chat answer is journaled
// event by event as it is sent; a client that lost its connection resumes
// from its last event id (GET /v1/conversations/{id}/stream), on any
// replica when the journal is shared, and a stop from any connection
// cancels it (POST /v1/conversations/{id}/stop). A dropped connection no
// longer cancels the answer at once: it goes on for the grace window, for
// a resume to pick it up.

// lifetimeKey carries the server's lifetime context in every request's
// context (see WithLifetime).
type lifetimeKey struct{}

// WithLifetime returns the base context for the http.Server's requests:
// ctx, carrying itself, so that work that outlives its request (an answer
// whose client dropped) still ends with the server, with its cause.
func WithLifetime(ctx context.Context) context.Context {
	return context.WithValue(ctx, lifetimeKey{}, ctx)
}

// detach returns a context with r's values that the client's leaving
// does not cancel; the server's lifetime (WithLifetime) still does, with
// its cause (chat.ErrShutdown).
func detach(r *http.Request) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	life, _ := r.Context().Value(lifetimeKey{}).(context.Context)
	if life == nil {
		return ctx, cancel
	}
	stop := context.AfterFunc(life, func() { cancel(context.Cause(life)) })
	return ctx, func(err error) { stop(); cancel(err) }
}

// answer is one /v1/chat answer on its way out: each event goes to the
// journal, then to the client while it reads. When the client drops, the
// answer goes on for the grace window; it is cancelled when the window
// ends with no follower attached (a resume, on any replica), or at once
// by a stop.
type answer struct {
	id     string
	es     *eventStream
	jw     journal.Writer // nil: no journal, the answer ends with its client
	grace  time.Duration
	ctx    context.Context // the turn's
	cancel context.CancelCauseFunc

	seq      int64
	buf      []byte
	ended    bool       // the terminal event was sent
	ui       *uiEncoder // nil: /v1/chat events; else the AI SDK's UI message stream
	done     chan struct{}
	mu       sync.Mutex
	detached bool
	timer    *time.Timer
}

func (s *Server) newAnswer(r *http.Request, id string, es *eventStream) *answer {
	a := &answer{id: id, es: es, grace: s.opt.Grace, buf: make([]byte, 0, 256), done: make(chan struct{})}
	if s.opt.Journal == nil {
		a.ctx, a.cancel = context.WithCancelCause(r.Context())
		return a
	}
	a.jw = s.opt.Journal.Begin(id)
	if a.grace > 0 {
		a.ctx, a.cancel = detach(r)
	} else {
		a.ctx, a.cancel = context.WithCancelCause(r.Context())
	}
	go a.watch(r.Context())
	return a
}

// watch detaches the answer when its client leaves and cancels it when
// it is stopped.
func (a *answer) watch(client context.Context) {
	select {
	case <-client.Done():
		if errors.Is(context.Cause(client), chat.ErrShutdown) {
			// The server's end, not the client's: the answer ends
			// with it, and its last event still goes to the client.
			return
		}
		a.detach()
	case <-a.jw.Stopped():
		a.cancel(chat.ErrStopped)
		return
	case <-a.done:
		return
	}
	select {
	case <-a.jw.Stopped():
		a.cancel(chat.ErrStopped)
	case <-a.done:
	}
}

// event journals one event and sends it to the client if it still reads.
// It reports whether the turn should go on: false only when the client
// is gone and nothing keeps the answer for a resume.
func (a *answer) event(kind string, data []byte) bool {
	ev := journal.Event{Seq: a.seq, Kind: kind, Data: data}
	a.seq++
	if a.jw != nil {
		if ev.Terminal() {
			a.jw.End(ev)
		} else {
			a.jw.Append(ev)
		}
	}
	a.ended = a.ended || ev.Terminal()
	if a.isDetached() {
		return a.grace > 0
	}
	if a.ui != nil {
		a.buf = a.ui.append(a.buf[:0], ev)
	} else {
		a.buf = appendEvent(a.buf[:0], a.id, 0, ev)
	}
	if len(a.buf) > 0 && a.es.Write(a.buf) != nil {
		a.detach()
		return a.jw != nil && a.grace > 0
	}
	return true
}

func (a *answer) isDetached() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.detached
}

// detach notes that the client stopped reading and starts the grace
// window (or, without one, cancels the answer).
func (a *answer) detach() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.detached {
		return
	}
	a.detached = true
	if a.jw == nil || a.grace <= 0 {
		a.cancel(chat.ErrClientGone)
		return
	}
	a.timer = time.AfterFunc(a.grace, a.expire)
}

// expire ends the grace window: the answer is cancelled unless a
// follower is attached, in which case it gets another window.
func (a *answer) expire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.done:
		return
	default:
	}
	if a.jw.Attached() {
		a.timer.Reset(a.grace)
		return
	}
	a.cancel(chat.ErrClientGone)
}

// close ends the answer after its turn. A turn that ended without a last
// event (the user stopped it, or its client left and nobody resumed) is
// stored cancelled: its journal and any client still reading get a done
// event that says so, so that every stream of it ends alike.
func (a *answer) close() {
	if !a.ended {
		data, _ := json.Marshal(map[string]string{"message_id": a.id, "status": string(store.StatusCancelled), "finish_reason": "cancelled"})
		a.event("done", data)
	}
	close(a.done)
	a.mu.Lock()
	if a.timer != nil {
		a.timer.Stop()
	}
	a.mu.Unlock()
	a.cancel(nil)
}

// appendEvent appends ev as an SSE event whose id is the message's, the
// generation's from the first take-over on (see cursor), and the event's
// sequence number.
func appendEvent(b []byte, messageID string, gen int, ev journal.Event) []byte {
	b = append(b, "id: "...)
	b = append(b, messageID...)
	b = append(b, ':')
	if gen > 0 {
		b = strconv.AppendInt(b, int64(gen), 10)
		b = append(b, ':')
	}
	b = strconv.AppendInt(b, ev.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, ev.Kind...)
	b = append(b, "\ndata: "...)
	b = append(b, ev.Data...)
	return append(b, "\n\n"...)
}

// position is where a resuming client is in an answer: the generation
// and number of its last event (seq -1: none).
//
// An answer's events are numbered on from one producer to the next; a
// producer that takes over an answer whose replica died starts a new
// generation, with a rewind event (see followAnswer). Event ids are
// <message_id>:<n> in the first generation and <message_id>:<g>:<n> in
// generation g after it, so that a client that saw events the dead
// replica never journaled is told apart from one that has the new ones.
type position struct {
	gen int
	seq int64
}

// cursor is where a resuming client is: the message of its last event and
// its position (seq -1: from the start).
func cursor(r *http.Request) (messageID string, at position, err error) {
	v := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("after"); q != "" {
		v = q
	}
	if v == "" {
		return "", position{seq: -1}, nil
	}
	bad := invalid("after", "the cursor must be an event id (<message_id>:<n> or <message_id>:<g>:<n>) or its number")
	num, gen := v, ""
	if i := strings.IndexByte(v, ':'); i >= 0 {
		messageID, num = v[:i], v[i+1:]
		if j := strings.IndexByte(num, ':'); j >= 0 {
			gen, num = num[:j], num[j+1:]
		}
	}
	n, perr := strconv.ParseInt(num, 10, 64)
	if perr != nil || n < -1 || n == math.MaxInt64 {
		return "", position{seq: -1}, bad
	}
	at.seq = n
	if gen != "" {
		g, gerr := strconv.Atoi(gen)
		if gerr != nil || g < 1 || g > 1<<20 || n < 0 {
			return "", position{seq: -1}, bad
		}
		at.gen = g
	}
	return messageID, at, nil
}

// latestAnswer returns the conversation's last assistant message, nil if
// it has none.
func (s *Server) latestAnswer(ctx context.Context, tenant, conversationID string) (*store.Message, error) {
	msgs, err := s.opt.Store.LastMessages(ctx, tenant, conversationID, 2)
	if err != nil {
		return nil, err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return &msgs[i], nil
		}
	}
	return nil, nil
}

// errNoSharedJournal answers for an answer this replica cannot reach.
var errNoSharedJournal = &chat.Error{Category: chat.CategoryConflict, Code: "resume_unavailable",
	Message: "this answer is being written by another server and the journal is not shared (resume.journal: redis); read it with GET /v1/conversations/{id} when it ends"}

// resumeStream serves GET /v1/conversations/{id}/stream: the
// conversation's latest answer from the client's cursor (Last-Event-ID or
// ?after=), then live, to its last event. 204 when there is no answer.
func (s *Server) resumeStream(w http.ResponseWriter, r *http.Request) error {
	p, c, err := s.ownConversation(w, r)
	if err != nil {
		return err
	}
	id := c.ID
	curMsg, after, err := cursor(r)
	if err != nil {
		return err
	}
	m, err := s.latestAnswer(r.Context(), p.TenantID, id)
	if err != nil {
		return s.storeError(err)
	}
	if m == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if curMsg != "" && curMsg != m.ID {
		after = position{seq: -1} // the cursor is an earlier answer's: this one from its start
	}
	return s.followAnswer(w, r, p, m, after, nil)
}

// followAnswer streams answer m from after its position after (seq -1:
// from its start), then live to its last event: from the journal, or
// from the store when it has ended and its journal is gone. A producer
// found lost is taken over here (see ContinueLost) and followed on.
//
// ui, if not nil, translates the events into the AI SDK's UI message
// stream (uichat.go).
func (s *Server) followAnswer(w http.ResponseWriter, r *http.Request, p auth.Principal, m *store.Message, after position, ui *uiEncoder) error {
	id := m.ConversationID
	if s.opt.Journal == nil {
		return s.withoutJournal(w, m, after.seq, ui)
	}
	if s.opt.Streams != nil {
		defer s.opt.Streams.Open("resume")()
	}
	es := newEventStream(w, commentHeartbeat, s.opt.Heartbeat, s.opt.WriteTimeout)
	defer es.Close()
	if ui != nil {
		es.Header(setUIHeaders)
	} else {
		es.prelude = []byte("retry: 1000\n\n")
		es.Header(func(h http.Header) { h.Set("X-Firstword-Protocol", ChatProtocol) })
	}
	ctx, stop := followContext(r)
	defer stop()
	buf := make([]byte, 0, 256)
	f := sent{at: after}
	follow := func(ev journal.Event) bool {
		if !f.send(ev) {
			return true
		}
		if ui != nil {
			buf = ui.append(buf[:0], ev)
		} else {
			buf = appendEvent(buf[:0], m.ID, f.gen, ev)
		}
		if len(buf) > 0 && es.Write(buf) != nil {
			return false
		}
		f.at = position{f.gen, ev.Seq}
		return true
	}
	// Read from the start every time: where the generations begin decides
	// what the client's cursor means.
	again := func() error {
		f.gen, f.sending = 0, false
		return s.opt.Journal.Follow(ctx, m.ID, -1, follow)
	}
	err := again()
	// An answer that has just begun may not have reached a shared
	// journal yet (its first write is on its way): ask again, briefly.
	for wait := 0; errors.Is(err, journal.ErrNotFound) && m.Status == store.StatusStreaming && wait < 20; wait++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
		err = again()
	}
	life := lifetime(r)
	if _, inProcess := s.opt.Journal.(*journal.Memory); inProcess && errors.Is(err, journal.ErrNotFound) &&
		m.Status == store.StatusInterrupted && m.ErrorCode == "" && !es.Committed() {
		// A crash cut the answer and its journal is gone with the process
		// (restarted since): continue it from its checkpoint.
		if cerr := s.continueStored(life, m); cerr == nil || errors.Is(cerr, ErrNotTaken) {
			for wait := 0; wait < 20; wait++ {
				if err = again(); !errors.Is(err, journal.ErrNotFound) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	// The producer died: take the answer over (or find it taken), then
	// follow it on.
	for tries := 0; errors.Is(err, journal.ErrLost) && tries < 3 && ctx.Err() == nil; tries++ {
		now, serr := s.latestAnswer(ctx, p.TenantID, id)
		if serr != nil || now == nil || now.ID != m.ID {
			break
		}
		if !leaseLapsed(now, s.opt.Lease) {
			if now = s.awaitLapse(ctx, p.TenantID, id, now); !leaseLapsed(now, s.opt.Lease) {
				break
			}
		}
		if cerr := s.ContinueLost(life, m.ID); cerr != nil && !errors.Is(cerr, ErrNotTaken) {
			s.log.Warn("taking over an answer whose replica died", "message_id", m.ID, "err", cerr)
			break
		}
		err = again()
	}
	switch {
	case errors.Is(err, journal.ErrNotFound) && !es.Committed():
		now, serr := s.latestAnswer(ctx, p.TenantID, id)
		if serr == nil && now != nil && now.ID == m.ID {
			m = now
		}
		var answered error
		es.Uncommitted(func(w http.ResponseWriter) {
			if ui != nil {
				w.Header().Del(uiStreamHeader)
			}
			answered = s.withoutJournal(w, m, after.seq, ui)
		})
		return answered
	case err == nil && !es.Committed():
		// Nothing after the cursor, and the answer has ended: nothing to
		// resume (an EventSource stops reconnecting on 204).
		es.Uncommitted(func(w http.ResponseWriter) {
			w.Header().Set("X-Firstword-Resume", "ended")
			w.WriteHeader(http.StatusNoContent)
		})
		return nil
	case err == nil || ctx.Err() != nil:
		return nil
	}
	// The events below are the server's, not the answer's: they carry no
	// id, so a client's cursor stays at the last event it really has.
	now, serr := s.latestAnswer(ctx, p.TenantID, id)
	if serr != nil || now == nil || now.ID != m.ID {
		now = m
	}
	if errors.Is(err, journal.ErrLost) && !leaseLapsed(now, s.opt.Lease) {
		now = s.awaitLapse(ctx, p.TenantID, id, now)
	}
	var ev map[string]any
	switch {
	case errors.Is(err, journal.ErrLost) && !leaseLapsed(now, s.opt.Lease):
		// The journal lost the producer's lease, but the stored row is
		// still being written: the producer lives (Redis stalled). Not
		// an ending: resume again.
		ev = map[string]any{"message_id": m.ID, "code": "journal_unavailable", "message": "the answer's journal is catching up; resume again", "retryable": true, "status": now.Status}
	case errors.Is(err, journal.ErrLost) && now.Status != store.StatusStreaming && now.Status != store.StatusInterrupted:
		// The answer ended and is stored (here, while awaiting the
		// lapse), but its journal has not been given the end: its
		// producer's last writes wait for Redis (a failover that outlasted
		// the lease), or it died between the two. Not interrupted: the
		// next resume finds the end, or takes the journal over and ends it
		// as stored (see ContinueLost).
		ev = map[string]any{"message_id": m.ID, "code": "journal_unavailable", "message": "the answer has ended and its journal is catching up; resume again", "retryable": true, "status": now.Status}
	case errors.Is(err, journal.ErrLost):
		// The replica writing it died and it could not be taken over
		// here: what was journaled is the answer, stored interrupted (by
		// the lost-answer sweep, on some replica).
		ev = map[string]any{"message_id": m.ID, "code": "interrupted", "message": "the server writing this answer stopped; the answer so far is saved", "retryable": true, "status": store.StatusInterrupted}
	case errors.Is(err, journal.ErrTruncated):
		ev = map[string]any{"message_id": m.ID, "code": "resume_truncated", "message": "the answer is too long to resume past this point; read it with GET /v1/conversations/{id} when it ends", "retryable": false, "status": now.Status}
	default:
		s.log.Warn("following an answer's journal", "message_id", m.ID, "err", err)
		if !es.Committed() {
			return &chat.Error{Category: chat.CategoryStoreUnavailable, Code: "journal_unavailable", Message: "the answer's journal could not be read"}
		}
		ev = map[string]any{"message_id": m.ID, "code": "journal_unavailable", "message": "the answer's journal could not be read; resume again", "retryable": true, "status": now.Status}
	}
	data, _ := json.Marshal(ev)
	if ui != nil {
		es.Write(ui.append(buf[:0], journal.Event{Kind: journal.KindError, Data: data}))
		return nil
	}
	es.Write(append(append(append(buf[:0], "event: error\ndata: "...), data...), "\n\n"...))
	return nil
}

// sent decides, event by event of a journal read from its start, what a
// client at position at is sent: the events after it; and the rewind
// that starts a generation when the client had seen past the end of what
// the journal holds of the one before (events the dead replica sent but
// never journaled). A client that has every event before a rewind has
// the text it keeps: it is not sent.
type sent struct {
	at      position
	gen     int   // the generation of the events read so far
	prev    int64 // the Seq of the event read last
	sending bool  // every event from here on is sent
}

func (f *sent) send(ev journal.Event) bool {
	prev := f.prev
	f.prev = ev.Seq
	if ev.Kind == journal.KindRewind {
		f.gen = rewindGeneration(ev.Data, f.gen)
		if f.sending || f.at.gen >= f.gen {
			return false
		}
		f.sending = true
		return f.at.seq > prev
	}
	if !f.sending {
		if f.gen != f.at.gen || ev.Seq <= f.at.seq {
			return false
		}
		f.sending = true
	}
	return true
}

// rewindGeneration is the generation a rewind starts (its data's), at
// least one more than the one before it.
func rewindGeneration(data []byte, before int) int {
	var d struct {
		Generation int `json:"generation"`
	}
	json.Unmarshal(data, &d)
	return max(d.Generation, before+1)
}

// lifetime is the server's lifetime context (see WithLifetime): work
// started for r that must outlive it.
func lifetime(r *http.Request) context.Context {
	if life, _ := r.Context().Value(lifetimeKey{}).(context.Context); life != nil {
		return life
	}
	return context.WithoutCancel(r.Context())
}

// awaitLapse settles whether a lost lease is a dead producer or a
// stalled journal: a live producer that lost its journal writes its row
// at least once a lease, so it reads the row again once a lease has
// passed since the last write it saw (or the client leaves) and returns
// what it then finds.
func (s *Server) awaitLapse(ctx context.Context, tenant, conversationID string, m *store.Message) *store.Message {
	t := time.NewTimer(time.Until(m.UpdatedAt.Add(s.opt.Lease + 50*time.Millisecond)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return m
	case <-t.C:
	}
	again, err := s.latestAnswer(ctx, tenant, conversationID)
	if err != nil || again == nil || again.ID != m.ID {
		return m
	}
	return again
}

// leaseLapsed reports whether a streaming answer's row has gone unwritten
// for longer than the lease. A producer whose journal keeps the answer
// writes its row only every few seconds (its lease in the journal says
// it lives); one whose journal fails (Redis unreachable, so its lease may
// lapse) checkpoints it twice a second while text flows, and touches it
// every third of a lease while the model is silent
// (conversation.Options.TouchInterval), from half a lease after Redis
// last answered it. An answer that is no longer streaming has ended:
// lapsed.
func leaseLapsed(m *store.Message, lease time.Duration) bool {
	return m.Status != store.StatusStreaming || time.Since(m.UpdatedAt) > lease
}

// followContext is the context a resume follows the journal with: it
// ends when the client leaves, but not at once when the server shuts
// down: the answer's producer is cut then too, and its last event (an
// interrupted error) reaches the journal a moment later, for the resumer
// as for the original client.
func followContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(r.Context(), func() {
		if errors.Is(context.Cause(r.Context()), chat.ErrShutdown) {
			time.AfterFunc(time.Second, cancel)
			return
		}
		cancel()
	})
	return ctx, func() { stop(); cancel() }
}

// withoutJournal answers a resume of an answer that has no journal here:
// one written by another replica (the journal is not shared), or a
// finished one whose journal is gone (resume.retain). A finished answer
// is replayed from the store from its start; a cursor into it gets 204,
// the stored message being the answer.
func (s *Server) withoutJournal(w http.ResponseWriter, m *store.Message, after int64, ui *uiEncoder) error {
	switch {
	case m.Status == store.StatusStreaming:
		return errNoSharedJournal
	case after >= 0:
		w.Header().Set("X-Firstword-Resume", "expired")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return s.replayStored(w, m, ui)
}

// replayStored sends a finished answer whose journal is gone from the
// store: meta, its thinking as one thinking event (and one per redacted
// block), its whole text as one delta, and its last event.
func (s *Server) replayStored(w http.ResponseWriter, m *store.Message, ui *uiEncoder) error {
	es := newEventStream(w, commentHeartbeat, s.opt.Heartbeat, s.opt.WriteTimeout)
	defer es.Close()
	es.Header(func(h http.Header) {
		if ui != nil {
			setUIHeaders(h)
		} else {
			h.Set("X-Firstword-Protocol", ChatProtocol)
		}
		h.Set("X-Firstword-Resume", "stored")
	})
	meta, _ := json.Marshal(map[string]any{"conversation_id": m.ConversationID, "message_id": m.ID, "model": m.Model, "created": false})
	text, _ := json.Marshal(map[string]string{"text": m.Content})
	evs := []journal.Event{{Seq: 0, Kind: journal.KindMeta, Data: meta}}
	add := func(kind string, data []byte) {
		evs = append(evs, journal.Event{Seq: int64(len(evs)), Kind: kind, Data: data})
	}
	if th := storedThinking(m.Thinking); th != nil {
		if th.Text != "" {
			data, _ := json.Marshal(map[string]string{"text": th.Text})
			add(journal.KindThinking, data)
		}
		for range th.Redacted {
			add(journal.KindThinking, []byte(`{"redacted":true}`))
		}
	}
	if m.Content != "" {
		add(journal.KindDelta, text)
	}
	evs = append(evs, storedEnding(m, int64(len(evs))))
	var buf []byte
	for _, ev := range evs {
		if ui != nil {
			buf = ui.append(buf[:0], ev)
		} else {
			buf = appendEvent(buf[:0], m.ID, 0, ev)
		}
		if len(buf) > 0 && es.Write(buf) != nil {
			break
		}
	}
	return nil
}

// storedEnding is the last event of a stored answer.
func storedEnding(m *store.Message, seq int64) journal.Event {
	u := usageJSON{InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, CachedTokens: m.CachedTokens, Estimated: m.Estimated}
	switch m.Status {
	case store.StatusComplete, store.StatusTimeout, store.StatusCancelled:
		if m.ErrorCode == "" {
			data, _ := json.Marshal(map[string]any{"message_id": m.ID, "status": m.Status, "finish_reason": m.FinishReason,
				"model": m.Model, "deployment": m.Deployment, "usage": u, "cost": m.Cost})
			return journal.Event{Seq: seq, Kind: journal.KindDone, Data: data}
		}
	}
	code := m.ErrorCode
	if code == "" {
		code = string(m.Status)
	}
	data, _ := json.Marshal(map[string]any{"message_id": m.ID, "code": code, "message": m.ErrorMessage, "status": m.Status, "usage": u})
	return journal.Event{Seq: seq, Kind: journal.KindError, Data: data}
}

// stopAnswer serves POST /v1/conversations/{id}/stop: the conversation's
// latest answer, if it is still being written, is stopped on whatever
// replica writes it, and stored cancelled with the text produced. It
// waits (a few seconds at most) for the answer to be stored, and says how
// it ended.
func (s *Server) stopAnswer(w http.ResponseWriter, r *http.Request) error {
	p, c, err := s.ownConversation(w, r)
	if err != nil {
		return err
	}
	id := c.ID
	m, err := s.latestAnswer(r.Context(), p.TenantID, id)
	if err != nil {
		return s.storeError(err)
	}
	if m == nil {
		return &chat.Error{Category: chat.CategoryNotFound, Code: "no_answer", Message: "the conversation has no answer to stop"}
	}
	if m.Status != store.StatusStreaming {
		writeJSON(w, http.StatusOK, map[string]any{"message_id": m.ID, "stopped": false, "status": m.Status})
		return nil
	}
	if s.opt.Journal == nil {
		return errNoSharedJournal
	}
	if err := s.opt.Journal.Stop(r.Context(), m.ID); err != nil {
		if errors.Is(err, journal.ErrNotFound) {
			// It may have ended just now, racing the stop.
			if now, err := s.latestAnswer(r.Context(), p.TenantID, id); err == nil && now != nil && now.ID == m.ID && now.Status != store.StatusStreaming {
				writeJSON(w, http.StatusOK, map[string]any{"message_id": m.ID, "stopped": false, "status": now.Status})
				return nil
			}
			return errNoSharedJournal
		}
		s.log.Warn("stopping an answer", "message_id", m.ID, "err", err)
		return &chat.Error{Category: chat.CategoryStoreUnavailable, Code: "journal_unavailable", Message: "the stop could not be sent"}
	}
	// The answer is stored before its last event is journaled: once the
	// journal ends, the stored status is final.
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	ended := false
	s.opt.Journal.Follow(ctx, m.ID, -1, func(ev journal.Event) bool {
		ended = ev.Terminal()
		return true
	})
	if !ended {
		writeJSON(w, http.StatusAccepted, map[string]any{"message_id": m.ID, "stopped": true, "status": store.StatusStreaming})
		return nil
	}
	status := store.StatusCancelled
	if now, err := s.latestAnswer(r.Context(), p.TenantID, id); err == nil && now != nil && now.ID == m.ID {
		status = now.Status
	}
	// An answer that reached its end before the stop did is not stopped.
	writeJSON(w, http.StatusOK, map[string]any{"message_id": m.ID, "stopped": status == store.StatusCancelled, "status": status})
	return nil
}

// JournaledText is the text of an answer's journaled deltas, a rewind
// cutting it back to its offset, and how many deltas there were.
func JournaledText(evs []journal.Event) (string, int) {
	var b strings.Builder
	n := 0
	for _, ev := range evs {
		var d struct {
			Text        string `json:"text"`
			OffsetBytes int    `json:"offset_bytes"`
		}
		switch ev.Kind {
		case journal.KindDelta:
			if json.Unmarshal(ev.Data, &d) == nil {
				b.WriteString(d.Text)
				n++
			}
		case journal.KindRewind:
			if json.Unmarshal(ev.Data, &d) == nil && d.OffsetBytes >= 0 && d.OffsetBytes < b.Len() {
				kept := b.String()[:d.OffsetBytes]
				b.Reset()
				b.WriteString(kept)
			}
		}
	}
	return b.String(), n
}
