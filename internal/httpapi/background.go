package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/journal"
)

// Background responses: OpenAI's background mode on /v1/responses
// (docs/resume.md). A request with "background": true is produced
// whatever becomes of its connection, until its end or the server's; each
// of its events is journaled under the response id as it is encoded, so
// that GET /v1/responses/{id} reads it back (the object as it stands, or
// the events after a sequence number and then the live ones) and POST
// /v1/responses/{id}/cancel stops it, on any replica when the journal is
// shared.
//
// A response's journal: Seq 0 is its owner record (bgOwner), never sent
// to a client; the event with sequence_number n is at Seq n+1, its Data
// the event's JSON. The terminal event is response.completed or
// response.incomplete (kind done) or response.failed (kind error), which
// also ends a cancelled response, as OpenAI ends one.

// bgOwner is a background response's owner record.
type bgOwner struct {
	Tenant string `json:"tenant"`
}

// backgroundSurface is a surface whose requests may run in the
// background: the Responses API's.
type backgroundSurface interface {
	surface
	// start appends the events that open a response.
	start(b []byte) []byte
	// queued is the response object answered at once when the client
	// does not stream.
	queued() []byte
	// cancelled appends the last event of a cancelled response.
	cancelled(b []byte, x *exchange) []byte
}

func (o *responsesSurface) start(b []byte) []byte { return o.enc.Start(b) }

func (o *responsesSurface) queued() []byte { return o.enc.Object(nil, "queued") }

func (o *responsesSurface) cancelled(b []byte, x *exchange) []byte {
	u := x.call.Usage(x.req)
	return o.enc.Cancelled(b, &u)
}

// background produces a background response. Its opening events are
// journaled and, to a streaming client, sent at once: the client has the
// response id before the upstream is asked. A client that does not
// stream is answered at once with the queued response object. Every later
// event is journaled, and sent while the streaming client reads. The
// client's leaving does not stop the response (its context is detached,
// see begin); a cancel, from any connection, does.
func (s *Server) background(ctx context.Context, w http.ResponseWriter, x *exchange, seq chat.Stream, sf backgroundSurface) {
	p := &producer{jw: s.opt.Journal.Begin(x.id)}
	owner, _ := json.Marshal(bgOwner{Tenant: x.tenant})
	p.jw.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: owner})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-p.jw.Stopped():
			x.call.Cancel(chat.ErrStopped)
		case <-done:
		}
	}()
	if x.stream {
		p.es = newEventStream(w, commentHeartbeat, s.opt.Heartbeat, s.opt.WriteTimeout)
		defer p.es.Close()
	}
	// The opening events reach the journal before the client: a client
	// that has the id finds the response, on any replica.
	buf := p.journal(sf.start(nil))
	s.published(x.id, p.next)
	if x.stream {
		p.write(buf)
	} else {
		answerNow(w, sf.queued())
	}
	var c chat.Chunk
	for next, err := range seq {
		if !x.take(&c, &next, err, sf) {
			break
		}
		buf = p.send(sf.chunk(buf[:0], &c))
		x.call.Shown()
	}
	x.ending = x.call.End(ctx, x.err, false)
	switch x.ending.Outcome {
	case call.Complete:
		p.send(sf.end(buf[:0], x))
	case call.Gone: // cancelled: its context is detached from its client
		p.send(sf.cancelled(buf[:0], x))
	default: // failed, or cut by the deadline (response.failed either way)
		p.send(sf.errorEvent(buf[:0], x, x.failure()))
	}
}

// producer journals a background response's events and sends them to
// its client while it reads.
type producer struct {
	jw   journal.Writer
	next int64        // the next event's sequence_number
	es   *eventStream // nil: the client does not stream
	gone bool         // the client stopped reading
}

var eventEnd = []byte("\n\n")

// send journals each event in b (whole events, as the surface encodes
// them), then writes b to the client if it reads. It returns b.
func (p *producer) send(b []byte) []byte {
	return p.write(p.journal(b))
}

// journal journals each event in b and returns b.
func (p *producer) journal(b []byte) []byte {
	for rest := b; len(rest) > 0; {
		i := bytes.Index(rest, eventEnd)
		if i < 0 {
			break
		}
		typ, data := splitEvent(rest[:i])
		rest = rest[i+len(eventEnd):]
		ev := journal.Event{Seq: p.next + 1, Kind: journal.KindDelta, Data: data}
		p.next++
		switch typ {
		case "response.completed", "response.incomplete":
			ev.Kind = journal.KindDone
			p.jw.End(ev)
		case "response.failed":
			ev.Kind = journal.KindError
			p.jw.End(ev)
		default:
			p.jw.Append(ev)
		}
	}
	return b
}

// write sends b to the client if it streams and still reads, and
// returns b.
func (p *producer) write(b []byte) []byte {
	if p.es != nil && !p.gone && len(b) > 0 && p.es.Write(b) != nil {
		p.gone = true
	}
	return b
}

// published waits until the journal holds response id's events up to
// Seq last: the Redis journal writes behind its producer, typically
// within a millisecond. It gives up after a second (Redis is slow or
// down: the response goes on, and may not be found until it catches up).
func (s *Server) published(id string, last int64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		snap, err := s.opt.Journal.Snapshot(ctx, id)
		if err == nil && len(snap.Events) > 0 && snap.Events[len(snap.Events)-1].Seq >= last {
			return
		}
		select {
		case <-ctx.Done():
			s.log.Warn("a background response is not in the journal yet", "response_id", id, "err", err)
			return
		case <-time.After(wait):
		}
	}
}

// splitEvent splits one encoded event, "event: <type>\ndata: <json>",
// into its type and data.
func splitEvent(ev []byte) (typ string, data []byte) {
	head, data, _ := bytes.Cut(ev, []byte("\ndata: "))
	return string(bytes.TrimPrefix(head, []byte("event: "))), data
}

// appendJournaled appends a journaled event as it was sent: its type is the
// one its data names.
func appendJournaled(b, data []byte) []byte {
	b = append(b, "event: "...)
	b = append(b, eventType(data)...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, eventEnd...)
}

// eventType is the type an event's data names (the encoder writes it
// first).
func eventType(data []byte) string {
	const head = `{"type":"`
	if rest, ok := bytes.CutPrefix(data, []byte(head)); ok {
		if i := bytes.IndexByte(rest, '"'); i >= 0 {
			return string(rest[:i])
		}
	}
	var v struct {
		Type string `json:"type"`
	}
	json.Unmarshal(data, &v)
	return v.Type
}

// answerNow answers a background request that does not stream while its
// handler goes on producing the response: with its length and
// Connection: close, the client has the whole answer at once and sends
// its next request on another connection, this one staying busy until
// the response ends (so a graceful shutdown waits for it as for a
// stream).
func answerNow(w http.ResponseWriter, body []byte) {
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	http.NewResponseController(w).Flush()
}

// responseNotFound answers for a response that is not a background
// response of the caller's tenant kept in the journal: never one, another
// tenant's, or dropped after its retention.
func responseNotFound(id string) *chat.Error {
	return &chat.Error{Category: chat.CategoryNotFound, Param: "response_id",
		Message: "Response with id " + quoteValue(id) + " not found. firstword keeps background responses only (background: true), for resume.retain after their end"}
}

var errJournalUnavailable = &chat.Error{Category: chat.CategoryStoreUnavailable, Code: "journal_unavailable", Message: "the journal of responses could not be read"}

// snapshot reads background response id from the journal, if it is
// tenant's.
func (s *Server) snapshot(ctx context.Context, tenant, id string) (journal.Snapshot, error) {
	if s.opt.Journal == nil || !strings.HasPrefix(id, "resp_") {
		return journal.Snapshot{}, responseNotFound(id)
	}
	snap, err := s.opt.Journal.Snapshot(ctx, id)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return snap, responseNotFound(id)
	case err != nil:
		s.log.Warn("reading a response's journal", "response_id", id, "err", err)
		return snap, errJournalUnavailable
	case len(snap.Events) == 0 || !ownedBy(snap.Events[0], tenant):
		return snap, responseNotFound(id)
	}
	return snap, nil
}

// ownedBy reports whether ev is the owner record of one of tenant's
// responses.
func ownedBy(ev journal.Event, tenant string) bool {
	var o bgOwner
	return ev.Seq == 0 && ev.Kind == journal.KindMeta && json.Unmarshal(ev.Data, &o) == nil && o.Tenant != "" && o.Tenant == tenant
}

// asItStands is the response object as the journal has it, and its
// status: the terminal event's, or, while it is produced, the last
// object sent with status in_progress and the output items done so far.
// A response whose producer died before its end (its replica was killed)
// is failed.
func asItStands(snap journal.Snapshot) (obj json.RawMessage, status string) {
	var latest json.RawMessage
	items := []json.RawMessage{}
	for _, ev := range snap.Events {
		if ev.Seq == 0 {
			continue
		}
		var d struct {
			Response json.RawMessage `json:"response"`
			Item     json.RawMessage `json:"item"`
		}
		switch typ := eventType(ev.Data); {
		case ev.Terminal(), typ == "response.created", typ == "response.in_progress":
			if json.Unmarshal(ev.Data, &d) == nil && len(d.Response) > 0 {
				latest = d.Response
			}
			if ev.Terminal() {
				var st struct {
					Status string `json:"status"`
				}
				json.Unmarshal(latest, &st)
				return latest, st.Status
			}
		case typ == "response.output_item.done":
			if json.Unmarshal(ev.Data, &d) == nil && len(d.Item) > 0 {
				items = append(items, d.Item)
			}
		}
	}
	status = "in_progress"
	out, _ := json.Marshal(items)
	set := map[string]json.RawMessage{"output": out}
	if snap.Lost {
		status = "failed"
		set["error"] = json.RawMessage(`{"code":"server_error","message":"the server producing this response stopped before its end"}`)
	}
	set["status"], _ = json.Marshal(status)
	return patch(latest, set), status
}

// patch returns the JSON object obj with set's members set.
func patch(obj json.RawMessage, set map[string]json.RawMessage) json.RawMessage {
	m := map[string]json.RawMessage{}
	json.Unmarshal(obj, &m)
	for k, v := range set {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

// retrieveParams are GET /v1/responses/{id}'s stream and starting_after,
// from the query (as OpenAI documents them and its Python and Node SDKs
// send them) or a JSON body (the Go SDK's GetStreaming sends
// {"stream":true} so).
func (s *Server) retrieveParams(w http.ResponseWriter, r *http.Request) (stream bool, after int64, err error) {
	var body struct {
		Stream        *bool  `json:"stream"`
		StartingAfter *int64 `json:"starting_after"`
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		b, err := s.readBody(w, r)
		if err != nil {
			return false, 0, err
		}
		if len(bytes.TrimSpace(b)) > 0 && json.Unmarshal(b, &body) != nil {
			return false, 0, invalid("", "the request body, if any, must be a JSON object with stream and starting_after")
		}
	}
	q := r.URL.Query()
	if body.Stream != nil {
		stream = *body.Stream
	}
	if v := q.Get("stream"); v != "" {
		if stream, err = strconv.ParseBool(v); err != nil {
			return false, 0, invalid("stream", "stream must be true or false")
		}
	}
	after = -1
	if body.StartingAfter != nil {
		after = *body.StartingAfter
	}
	if v := q.Get("starting_after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil {
			return false, 0, invalid("starting_after", "starting_after must be an event's sequence_number")
		}
	}
	if after < -1 || after > 1<<53 {
		return false, 0, invalid("starting_after", "starting_after must be an event's sequence_number")
	}
	return stream, after, nil
}

// getResponse serves GET /v1/responses/{id}: a background response of the
// caller's tenant as it stands, or, with stream=true, its events after
// starting_after (from the first without it), then the live ones, to its
// terminal event.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, nil)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	stream, after, err := s.retrieveParams(w, r)
	if err != nil {
		return err
	}
	if stream {
		return s.followResponse(w, r, p.TenantID, id, after)
	}
	snap, err := s.snapshot(r.Context(), p.TenantID, id)
	if err != nil {
		return err
	}
	obj, _ := asItStands(snap)
	writeJSON(w, http.StatusOK, obj)
	return nil
}

// followResponse streams response id's events with sequence_number >
// after, then the live ones, to its terminal event. Nothing is written
// until the owner record says the response is tenant's.
func (s *Server) followResponse(w http.ResponseWriter, r *http.Request, tenant, id string, after int64) error {
	if s.opt.Journal == nil || !strings.HasPrefix(id, "resp_") {
		return responseNotFound(id)
	}
	if s.opt.Streams != nil {
		defer s.opt.Streams.Open("responses")()
	}
	var es *eventStream
	defer func() {
		if es != nil {
			es.Close()
		}
	}()
	owned := false
	var buf []byte
	err := s.opt.Journal.Follow(r.Context(), id, -1, func(ev journal.Event) bool {
		if !owned {
			if owned = ownedBy(ev, tenant); owned {
				es = newEventStream(w, commentHeartbeat, s.opt.Heartbeat, s.opt.WriteTimeout)
			}
			return owned
		}
		if ev.Seq-1 <= after {
			return true
		}
		buf = appendJournaled(buf[:0], ev.Data)
		return es.Write(buf) == nil
	})
	switch {
	case r.Context().Err() != nil:
		return nil
	case !owned && (err == nil || errors.Is(err, journal.ErrNotFound) || errors.Is(err, journal.ErrLost) || errors.Is(err, journal.ErrTruncated)):
		return responseNotFound(id)
	case !owned:
		s.log.Warn("following a response's journal", "response_id", id, "err", err)
		return errJournalUnavailable
	case err == nil:
		if !es.Committed() {
			es.Write(nil) // nothing after the cursor: an empty stream
		}
		return nil
	}
	// The client has what was journaled; the rest cannot be sent. An
	// error event says why (OpenAI's shape: type, code, message, param).
	code, msg := "server_error", "the server producing this response stopped before its end; GET /v1/responses/"+id+" has it, failed"
	switch {
	case errors.Is(err, journal.ErrTruncated):
		code, msg = "resume_truncated", "the response is too long to resume past this point; GET /v1/responses/"+id+" has it whole once it ends"
	case !errors.Is(err, journal.ErrLost):
		s.log.Warn("following a response's journal", "response_id", id, "err", err)
		code, msg = "journal_unavailable", "the journal of responses could not be read; resume again"
	}
	data, _ := json.Marshal(map[string]any{"type": "error", "code": code, "message": msg, "param": nil})
	es.Write(appendJournaled(buf[:0], data))
	return nil
}

// cancelResponse serves POST /v1/responses/{id}/cancel: a background
// response still in progress is stopped, on whatever replica produces it
// (its upstream is cancelled at once), and answered with status
// cancelled; cancelling a cancelled one again answers it as it is; a
// response that ended otherwise cannot be cancelled (400, as OpenAI).
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, nil)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	snap, err := s.snapshot(r.Context(), p.TenantID, id)
	if err != nil {
		return err
	}
	if !snap.Ended && !snap.Lost {
		if err := s.opt.Journal.Stop(r.Context(), id); err != nil && !errors.Is(err, journal.ErrNotFound) {
			s.log.Warn("cancelling a response", "response_id", id, "err", err)
			return errJournalUnavailable
		}
		// The producer ends it with its last event: wait for it (5 s
		// at most) to answer the response as it ended.
		last := snap.Events[len(snap.Events)-1].Seq
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		s.opt.Journal.Follow(ctx, id, last, func(journal.Event) bool { return true })
		cancel()
		if again, err := s.snapshot(r.Context(), p.TenantID, id); err == nil {
			snap = again
		}
	}
	obj, status := asItStands(snap)
	switch status {
	case "cancelled":
	case "in_progress":
		// Stopped, but its end did not come within the wait: it will
		// end cancelled.
		obj = patch(obj, map[string]json.RawMessage{"status": json.RawMessage(`"cancelled"`), "output": json.RawMessage(`[]`)})
	default:
		what := "a " + status
		if status == "incomplete" {
			what = "an incomplete"
		}
		return invalid("", "Cannot cancel "+what+" response.")
	}
	writeJSON(w, http.StatusOK, obj)
	return nil
}
