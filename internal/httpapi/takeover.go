package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/store"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// Answers whose replica died (docs/continuation.md): the replica that
// finds one lost (a resume on it, or its sweep) takes it over in the
// journal, under the same message id, and continues it from the text the
// journal holds; a resumer that had seen more than that gets a rewind
// event. One process with the in-process journal, restarted after a
// crash, continues from the stored checkpoint when a client resumes.

// ErrNotTaken: the answer was not continued here (another producer holds
// it, it ended, or its alias does not continue answers).
var ErrNotTaken = errors.New("the answer was not taken over here")

// ContinueLost takes answer id over from its lost producer (Journal.Take)
// and continues it in the background, under ctx (the server's lifetime:
// the continuation outlives the request that found it lost). It returns
// once the take-over is journaled, or ErrNotTaken, or an error. An answer
// that cannot be continued (its alias ends broken answers, nothing of its
// text was journaled, its journal was cut) is ended in the journal and
// stored interrupted with the text the journal holds.
func (s *Server) ContinueLost(ctx context.Context, id string) error {
	if s.opt.Journal == nil || s.opt.Chat == nil {
		return ErrNotTaken
	}
	m, err := s.opt.Store.GetMessage(ctx, id)
	if err != nil {
		return err
	}
	// A live producer whose journal fails writes its row at least every
	// third of a lease (conversation.Options.TouchInterval; from half a
	// lease after Redis last answered it, journal.Durability): one
	// written within the lease may have lost only Redis. It is left
	// alone (see journal.Writer.Held for one that comes back).
	if !leaseLapsed(m, s.opt.Lease) {
		return ErrNotTaken
	}
	jw, snap, err := s.opt.Journal.Take(ctx, id)
	if errors.Is(err, journal.ErrHeld) || errors.Is(err, journal.ErrNotFound) {
		return ErrNotTaken
	}
	if err != nil {
		return err
	}
	if m, err = s.opt.Store.GetMessage(ctx, id); err != nil {
		s.endTaken(jw, snap.Next, id, store.StatusInterrupted)
		return err
	}
	text, deltas := JournaledText(snap.Events)
	switch {
	case m.Status != store.StatusStreaming && m.Status != store.StatusInterrupted:
		// Stored as ended (its producer's last write reached the
		// database, not the journal): the journal ends as the store.
		s.endStored(jw, snap.Next, m, text)
		return ErrNotTaken
	case m.Status == store.StatusInterrupted:
		if ok, err := s.opt.Store.ReopenMessage(ctx, id, time.Now().UTC()); err != nil || !ok {
			s.endTaken(jw, snap.Next, id, store.StatusInterrupted)
			return ErrNotTaken
		}
	}
	if text == "" || snap.Truncated || !s.continues(m.Model) {
		s.endTaken(jw, snap.Next, id, store.StatusInterrupted)
		s.interrupt(ctx, id, text, deltas)
		return ErrNotTaken
	}
	gen := 0
	for _, ev := range snap.Events {
		if ev.Kind == journal.KindRewind {
			gen = rewindGeneration(ev.Data, gen)
		}
	}
	gen++
	return s.continueAnswer(ctx, m, text, jw, snap.Next, gen, nil)
}

// continueStored continues answer m, interrupted by a crash, whose journal
// is gone (the in-process journal of a process that restarted): it
// reopens the row (of callers at once, one does; ErrNotTaken for the
// others) and journals the answer anew from the stored checkpoint: meta,
// a rewind to its start, the checkpoint's text, then the rest.
func (s *Server) continueStored(ctx context.Context, m *store.Message) error {
	if s.opt.Journal == nil || s.opt.Chat == nil || m.Content == "" || !s.continues(m.Model) {
		return ErrNotTaken
	}
	ok, err := s.opt.Store.ReopenMessage(ctx, m.ID, time.Now().UTC())
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotTaken
	}
	jw := s.opt.Journal.Begin(m.ID)
	// The journal starts again from nothing: its generation must be
	// above any a client of an earlier restart may hold.
	gen := int(time.Now().UnixMilli())
	return s.continueAnswer(ctx, m, m.Content, jw, 0, gen, func(t *conversation.Turn) []journal.Event {
		meta, _ := json.Marshal(t.Meta())
		text, _ := json.Marshal(map[string]string{"text": m.Content})
		return []journal.Event{{Seq: 0, Kind: journal.KindMeta, Data: meta}, {Kind: journal.KindRewind}, {Kind: journal.KindDelta, Data: text}}
	})
}

// continues reports whether alias continues broken answers.
func (s *Server) continues(alias string) bool {
	c, ok := s.opt.Models.(interface{ ContinuesAnswers(string) bool })
	return ok && c.ContinuesAnswers(alias)
}

// continueAnswer runs the continuation of answer m, whose durable text is
// text, journaling to jw from Seq next: first (nil: none) gives the events
// before the rewind and the rewind's place, then the rewind to
// len(text) of generation gen, then the rest as the turn yields it. It
// returns once those first events are journaled.
func (s *Server) continueAnswer(ctx context.Context, m *store.Message, text string, jw journal.Writer, next int64, gen int, first func(*conversation.Turn) []journal.Event) error {
	reqID := store.NewID("req_")
	rec := budget.New(time.Now())
	var c *call.Call
	turn, err := s.opt.Chat.Continue(ctx, conversation.Takeover{RequestID: reqID, Answer: m, Text: text, Hints: chat.Hints{Tenant: m.TenantID}, Held: jw.Held,
		Durable: func() bool { return journal.Durable(jw) },
		Resolve: func(user string) (*call.Call, error) {
			var err error
			c, err = s.resolve(metering.Request{ID: reqID, Surface: "chat", Tenant: m.TenantID, User: user, Alias: m.Model, Stream: true, Timings: rec}, 0)
			return c, err
		}})
	if err != nil {
		s.log.Warn("continuing an answer whose replica died", "message_id", m.ID, "err", err)
		s.endTaken(jw, next, m.ID, store.StatusInterrupted)
		s.interrupt(context.WithoutCancel(ctx), m.ID, text, 1)
		return err
	}
	p := &continuer{jw: jw, id: m.ID, seq: next}
	var evs []journal.Event
	if first != nil {
		evs = first(turn)
	} else {
		evs = []journal.Event{{Kind: journal.KindRewind}}
	}
	for _, ev := range evs {
		if ev.Kind == journal.KindRewind {
			ev.Data = rewindJSON(m.ID, text, gen, first != nil)
		}
		p.event(ev.Kind, ev.Data)
	}
	s.log.Warn("continuing an answer whose replica died", "message_id", m.ID, "request_id", reqID, "from_bytes", len(text))
	go func() {
		tctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			select {
			case <-jw.Stopped():
				cancel(chat.ErrStopped)
			case <-tctx.Done():
			}
		}()
		cctx, release := c.Context(tctx)
		defer release(nil)
		turn.Run(cctx, p.turnEvent)
		p.close()
	}()
	return nil
}

// rewindJSON is a rewind event's data: the text from offset (characters;
// offset_bytes in UTF-8) on is replaced by what follows. Journaled anew
// (the journal was lost), the answer is replayed from its start.
func rewindJSON(id, text string, gen int, fromStart bool) []byte {
	n := len(text)
	if fromStart {
		n = 0
	}
	b, _ := json.Marshal(map[string]any{"message_id": id, "offset": utf8.RuneCountInString(text[:n]), "offset_bytes": n, "generation": gen})
	return b
}

// interrupt stores an answer that is not continued interrupted, with the
// durable text (none: its last checkpoint's stays).
func (s *Server) interrupt(ctx context.Context, id, text string, deltas int) {
	var content *string
	tokens := 0
	if deltas > 0 {
		var tc chat.TokenCount
		tc.Add(text)
		content, tokens = &text, tc.Tokens()
	}
	if _, err := s.opt.Store.InterruptMessage(ctx, id, content, tokens, time.Now().UTC()); err != nil {
		s.log.Warn("storing a lost answer", "message_id", id, "err", err)
	}
}

// endStored ends the journal of an answer taken over that the store
// says has ended: with the stored text the journal lacks, then the
// stored ending.
func (s *Server) endStored(jw journal.Writer, next int64, m *store.Message, journaled string) {
	if rest, ok := strings.CutPrefix(m.Content, journaled); ok && rest != "" {
		data, _ := json.Marshal(map[string]string{"text": rest})
		jw.Append(journal.Event{Seq: next, Kind: journal.KindDelta, Data: data})
		next++
	}
	jw.End(storedEnding(m, next))
}

// endTaken ends an answer taken over that is not continued: its journal
// ends with the interrupted error, as a dead replica's answer did before.
func (s *Server) endTaken(jw journal.Writer, next int64, id string, status store.Status) {
	data, _ := json.Marshal(map[string]any{"message_id": id, "code": "interrupted", "message": "the server writing this answer stopped; the answer so far is saved", "retryable": true, "status": status})
	jw.End(journal.Event{Seq: next, Kind: journal.KindError, Data: data})
}

// continuer journals the events of an answer that has no client of its
// own: every reader follows the journal.
type continuer struct {
	jw    journal.Writer
	id    string
	seq   int64
	data  []byte
	mu    sync.Mutex
	ended bool
}

func (p *continuer) event(kind string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := journal.Event{Seq: p.seq, Kind: kind, Data: data}
	p.seq++
	if ev.Terminal() {
		p.ended = true
		p.jw.End(ev)
		return
	}
	p.jw.Append(ev)
}

// turnEvent journals one of the turn's events, as chat does for a client.
func (p *continuer) turnEvent(ev conversation.Event) bool {
	d := p.data[:0]
	switch {
	case ev.Restart:
		d = append(d, `{"restart":true}`...)
	case ev.Redacted:
		d = append(d, `{"redacted":true}`...)
	case ev.Kind == "delta" || ev.Kind == "thinking":
		d = append(d, `{"text":`...)
		d = wire.AppendString(d, ev.Text)
		d = append(d, '}')
	case ev.Kind == "done":
		d, _ = json.Marshal(ev.Done)
	case ev.Kind == "error":
		d, _ = json.Marshal(ev.Error)
	}
	p.data = d
	p.event(ev.Kind, d)
	return p.jw.Held()
}

// close ends a continuation whose turn yielded no last event (stopped):
// stored cancelled, as answer.close says.
func (p *continuer) close() {
	p.mu.Lock()
	ended := p.ended
	p.mu.Unlock()
	if !ended {
		data, _ := json.Marshal(map[string]string{"message_id": p.id, "status": string(store.StatusCancelled), "finish_reason": "cancelled"})
		p.event("done", data)
	}
}
