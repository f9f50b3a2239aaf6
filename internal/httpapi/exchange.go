package httpapi

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/tracing"
)

// exchange is one request's state on a surface: what was asked, in what
// wire format, and the call (package call) that owns the rest: its
// deadline, what was routed and delivered, and how it ended.
type exchange struct {
	id      string
	surface string
	dialect dialect // the error shape of the API called
	start   time.Time
	req     *chat.Request
	stream  bool
	call    *call.Call
	err     error
	ending  call.Ending // how it ended: the call's word, which the surface writes and meters
	tenant  string
	user    string
	key     string         // the API key's ID ("" in local mode)
	ticket  *limits.Ticket // admission's hold (nil: nothing limits the request)
	rec     *budget.Recorder
	trace   tracing.ID
	parent  string // the client's traceparent

	// background: the response outlives its request (background.go).
	background bool
}

// newExchange starts a request's state on a: its ID, clock, stage
// recorder and trace, announced in the response headers.
func newExchange(w http.ResponseWriter, r *http.Request, a *api) *exchange {
	x := &exchange{id: store.NewID(a.idPrefix), surface: a.name, dialect: a.dialect, start: time.Now()}
	x.rec = budget.New(x.start)
	x.trace, x.parent = tracing.FromRequest(r), r.Header.Get("Traceparent")
	h := w.Header()
	h.Set("X-Request-Id", x.id)
	h.Set("X-Trace-Id", x.trace.String())
	return x
}

// readBody reads a bounded request body within the body timeout: its
// errors are 413, 415, 408 and 400s.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.opt.MaxRequestBytes {
		// Said before a byte of it is read: no 100 Continue for it.
		return nil, bodyTooLarge(s.opt.MaxRequestBytes)
	}
	var src io.ReadCloser = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		src = &gunzip{body: r.Body} // the limit below bounds what it inflates to
	default:
		return nil, &chat.Error{Category: chat.CategoryUnsupportedMedia, Code: "unsupported_encoding",
			Message: "Content-Encoding " + strconv.Quote(enc) + " is not supported; send the body as is, or gzip"}
	}
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(s.opt.BodyTimeout)) == nil
	body, err := io.ReadAll(http.MaxBytesReader(w, src, s.opt.MaxRequestBytes))
	if deadline && err == nil {
		// Clearing it also frees the read that watches for the client
		// leaving, which may already be waiting. After a failure it
		// stays, bounding net/http's drain of the unread body.
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyTooLarge(mbe.Limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			return nil, &chat.Error{Category: chat.CategoryRequestTimeout,
				Message: "the request body did not arrive within " + s.opt.BodyTimeout.String()}
		}
		e := &chat.Error{Category: chat.CategoryInvalidRequest, Code: "invalid_body", Message: "could not read the request body"}
		var ne net.Error
		if !errors.As(err, &ne) {
			e.Message += ": " + err.Error() // a gzip error, not one naming sockets
		}
		return nil, e
	}
	return body, nil
}

// bodyTooLarge refuses a body over limit bytes.
func bodyTooLarge(limit int64) *chat.Error {
	return &chat.Error{Category: chat.CategoryTooLarge, Message: "request body is over " + strconv.FormatInt(limit, 10) + " bytes"}
}

// gunzip inflates a gzip body, reading its header on the first Read, so
// that the body's deadline and errors apply to it as to any other.
type gunzip struct {
	body io.ReadCloser
	zr   *gzip.Reader
}

func (g *gunzip) Read(p []byte) (int, error) {
	if g.zr == nil {
		zr, err := gzip.NewReader(g.body)
		if err != nil {
			return 0, err
		}
		g.zr = zr
	}
	return g.zr.Read(p)
}

func (g *gunzip) Close() error { return g.body.Close() }

// api is one client-facing wire format's entry point.
type api struct {
	name, idPrefix string
	// dialect is the shape of every error the API answers with before
	// its response commits, the refusals made before routing included.
	dialect dialect
	// parse decodes body into x.req and x.stream and returns the surface
	// that renders the answer, or the request's error (a 400).
	parse func(r *http.Request, x *exchange, body []byte) (surface, error)
	// answered, if set, runs once the answer was sent and metered.
	answered func(r *http.Request, sf surface)
}

// apiHandler serves one API surface. As a Handler of its own, rather than
// a method value in a HandlerFunc, it is one frame under every chunk's
// write instead of two.
type apiHandler struct {
	s *Server
	a *api
}

func (h apiHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if sf := h.s.serveAPI(w, r, h.a); sf != nil && h.a.answered != nil {
		h.a.answered(r, sf)
	}
}

func (h apiHandler) errorDialect() dialect { return h.a.dialect }

// serveAPI runs one request on a surface: authenticate, read and parse
// the body, derive the deadline, route, stream or answer whole, meter. It
// returns the surface after the answer was sent, or nil when the request
// was refused before routing.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, a *api) surface {
	// The chunks of a stream are written under this frame: what comes
	// before routing lives in accept.
	x, sf, ctx, release := s.accept(w, r, a)
	if sf == nil {
		return nil
	}
	defer release(nil)
	if !x.background {
		// A background response's slot is freed when it is metered.
		defer x.ticket.Close()
	}
	if s.opt.Streams != nil {
		defer s.opt.Streams.Open(a.name)()
	}
	seq := x.call.Stream(ctx, x.req)
	bs, bg := sf.(backgroundSurface)
	switch {
	case bg && x.background:
		s.background(ctx, w, x, seq, bs)
	case x.stream:
		s.stream(ctx, w, x, seq, sf)
	default:
		s.complete(ctx, w, x, seq, sf)
	}
	s.finish(r, x)
	return sf
}

// accept authenticates, reads and parses a request and derives its
// context, or answers it in the API's dialect and returns a nil surface.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, a *api) (*exchange, surface, context.Context, context.CancelCauseFunc) {
	x := newExchange(w, r, a)
	sf, err := s.parse(w, r, x, a)
	if err != nil {
		x.ticket.Close()
		a.dialect.writeError(w, err)
		return nil, nil, nil, nil
	}
	ctx, cancel := s.begin(r, x)
	return x, sf, ctx, cancel
}

// parse authenticates, reads and parses a request and checks it against
// the limits.
func (s *Server) parse(w http.ResponseWriter, r *http.Request, x *exchange, a *api) (surface, error) {
	p, err := s.authenticate(w, r, x.rec)
	if err != nil {
		return nil, err
	}
	x.tenant, x.user, x.key = p.TenantID, p.UserID, p.KeyID
	endParse := x.rec.Begin("parse")
	body, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	sf, err := a.parse(r, x, body)
	endParse("")
	if err != nil {
		return nil, err
	}
	if err := s.withinLimits(x.req); err != nil {
		return nil, err
	}
	h := r.Header
	if x.background {
		// The SDKs' timeout is how long they wait for the HTTP answer,
		// not how long a background response may run.
		h = h.Clone()
		h.Del("X-Stainless-Timeout")
	}
	q := metering.Request{ID: x.id, Surface: x.surface, Tenant: x.tenant, User: x.user, KeyID: x.key, Alias: x.req.Model, Stream: x.stream,
		Timings: x.rec, TraceID: x.trace.String(), TraceParent: x.parent}
	if x.call, err = s.resolve(q, clientDeadline(h)); err != nil {
		return nil, err // before admission: a 404 spends no rate limit
	}
	x.ticket, err = s.admission(w, r, x.rec, limits.Request{ID: x.id, Tenant: x.tenant, Key: x.key, Tokens: reserve(x.req)})
	if err != nil {
		return nil, err
	}
	return sf, nil
}

// withinLimits checks a parsed request against the message count and
// prompt size limits: over one, it is a 413.
func (s *Server) withinLimits(req *chat.Request) error {
	if n := len(req.Messages); n > s.opt.MaxMessages {
		return &chat.Error{Category: chat.CategoryTooLarge, Code: "too_many_messages",
			Message: "the request has " + strconv.Itoa(n) + " messages; the limit (max_messages) is " + strconv.Itoa(s.opt.MaxMessages)}
	}
	size := 0
	for i := range req.Messages {
		m := &req.Messages[i]
		size += len(m.Content)
		for _, tc := range m.ToolCalls {
			size += len(tc.Arguments)
		}
	}
	if size > s.opt.MaxPromptBytes {
		return &chat.Error{Category: chat.CategoryTooLarge, Code: "prompt_too_large",
			Message: "the messages hold " + strconv.Itoa(size) + " bytes of text; the limit (max_prompt_bytes) is " + strconv.Itoa(s.opt.MaxPromptBytes)}
	}
	return nil
}

// begin derives the request's context: the call's (package call), ending
// at its deadline; every attempt inside shares it. A background
// response's context does not end with its client, only with the server.
func (s *Server) begin(r *http.Request, x *exchange) (context.Context, context.CancelCauseFunc) {
	x.req.Hints = requestHints(r, x.tenant)
	parent, release := r.Context(), context.CancelCauseFunc(func(error) {})
	if x.background {
		parent, release = detach(r)
	}
	ctx, cancel := x.call.Context(parent)
	return ctx, func(err error) { cancel(err); release(err) }
}

// resolve starts the call for q, or refuses a model the router does not
// serve (404).
func (s *Server) resolve(q metering.Request, client time.Duration) (*call.Call, error) {
	c, err := s.calls.Resolve(q, client)
	if err != nil {
		return nil, modelNotFound(q.Alias, notServed(err))
	}
	return c, nil
}

// notServed is why the router does not serve a model, when it is more
// than not knowing it: a PROVIDER/MODEL name may be refused for a reason
// of its own (models_passthrough is off, too many names in use).
func notServed(err error) error {
	if errors.Is(err, router.ErrUnknownModel) {
		return nil
	}
	return err
}

// commitHeaders are set when the response commits: the route, and the
// stages so far as Server-Timing (see call.Call.ServerTiming).
func (x *exchange) commitHeaders(h http.Header) {
	routeHeaders(h, x.call.Report())
	if st := x.call.ServerTiming(time.Now()); st != "" {
		h.Set("Server-Timing", st)
	}
}

func msString(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', -1, 64)
}

// routeHeaders says which deployment served and how it got there.
func routeHeaders(h http.Header, rep *levers.Report) {
	if rep.Deployment != "" {
		h.Set("X-Firstword-Deployment", rep.Deployment)
	}
	h.Set("X-Firstword-Attempts", strconv.Itoa(rep.Tries()))
	if len(rep.Attempts) > 1 {
		h.Set("X-Firstword-Route", rep.Route())
	}
	if rep.Cached {
		h.Set("X-Firstword-Cache", "hit")
	}
	if rep.Coalesced {
		h.Set("X-Firstword-Coalesced", "1")
	}
	if rep.Rule != "" {
		h.Set("X-Firstword-Rule", rep.Rule+" ("+rep.Requested+" → "+rep.Alias+")")
	}
}

// surface is a wire format clients speak: it renders the normalised
// stream, endings and error events (its API's dialect writes the errors
// answered before the first byte).
type surface interface {
	// chunk appends the events for c (maybe none).
	chunk(b []byte, c *chat.Chunk) []byte
	// end appends what ends a successful stream.
	end(b []byte, x *exchange) []byte
	// errorEvent appends a failure after the response committed.
	errorEvent(b []byte, x *exchange, e *chat.Error) []byte
	// response is a whole answer, for non-streaming requests.
	response(x *exchange, model string, r *chat.Response) any
	// setModel tells the surface the upstream model, once known.
	setModel(model string)
	// heartbeat is what keeps a quiet stream open.
	heartbeat() []byte
}

// stream runs a streaming request: each chunk is encoded and flushed as it
// arrives (chunks that arrived together in one write), heartbeats keep a
// quiet stream open, a failure before the first byte is a real status and
// after it an error event, and a client that leaves cancels the upstream.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, x *exchange, seq chat.Stream, sf surface) {
	es := newEventStream(w, sf.heartbeat(), s.opt.Heartbeat, s.opt.WriteTimeout)
	defer es.Close()
	// A pooled buffer is held only while events are being encoded and
	// written, so an open stream waiting on its upstream holds none.
	var out writeBuf
	defer out.release()
	// headed: the route's headers were offered (es.Header), which only
	// the first write needs: a heartbeat that committed first makes
	// them moot.
	headed := false
	// One chunk variable for the whole loop: taking the address of the
	// loop's own would allocate a chunk per iteration.
	var c chat.Chunk
	for next, err := range seq {
		if !x.take(&c, &next, err, sf) {
			break
		}
		out.b = sf.chunk(out.get(), &c)
		if len(out.b) == 0 || (c.More && len(out.b) < maxCoalesce) {
			continue // the next chunk is already here: one write for both
		}
		if !headed {
			es.Header(x.commitHeaders)
			headed = true
		}
		err := es.Write(out.b)
		out.release()
		if err != nil {
			x.err = err
			x.call.Cancel(chat.ErrClientGone)
			break
		}
		x.call.Shown()
	}
	x.ending = x.call.End(ctx, x.err, es.Failed())
	s.end(ctx, x, es, &out, sf)
	if rep := x.call.Report(); rep.Continuations() > 0 {
		x.routeTrailer(es, rep)
	}
}

// routeTrailer sends the route again as a trailer: an answer continued
// after its headers were sent took a route they could not tell.
func (x *exchange) routeTrailer(es *eventStream, rep *levers.Report) {
	es.Trailer(func(h http.Header) { h.Set(http.TrailerPrefix+"X-Firstword-Route", rep.Route()) })
}

// end writes a stream's ending as the call tells it (x.ending): the
// surface's last events, nothing to a client that left, or the error (a
// real status when nothing was sent yet). It is flushed at once: what
// follows (metering, keeping Responses items) may block, and must not hold
// the ending back.
func (s *Server) end(ctx context.Context, x *exchange, es *eventStream, out *writeBuf, sf surface) {
	switch x.ending.Outcome {
	case call.Gone:
		if len(out.b) == 0 && !es.Failed() {
			// Nothing was sent: a client that only half-closed still
			// reads, and an empty 200 would tell it nothing.
			es.Uncommitted(func(w http.ResponseWriter) { x.dialect.writeError(w, chat.ErrClientClosed) })
		}
		return
	case call.Failed, call.TimedOut, call.Shutdown, call.Cut:
		// A cut answer is no success: after its text, the surface's
		// error form says the deadline cut it (no finish, no usage
		// presented as reported, no end marker).
		ce := x.failure()
		if len(out.b) == 0 && es.Uncommitted(func(w http.ResponseWriter) {
			x.commitHeaders(w.Header())
			x.dialect.writeError(w, ce)
		}) {
			return
		}
		if !es.Committed() {
			// Visible chunks and the failure came in one read: the
			// chunks go first, after the route's headers.
			es.Header(x.commitHeaders)
		}
		es.Write(sf.errorEvent(out.get(), x, ce))
		return
	}
	out.b = sf.end(out.get(), x)
	if !es.Committed() {
		es.Header(x.commitHeaders)
	}
	if err := es.Write(out.b); err != nil {
		x.err = err
		x.ending = x.call.End(ctx, err, true) // the client left before the end
		return
	}
	x.call.Shown() // the whole answer may have come in the last read
}

// writeBuf is an output buffer taken from a pool when needed.
type writeBuf struct {
	b      []byte
	pooled *[]byte
}

// get returns the buffer to append to, taking one from the pool if none
// is held.
func (w *writeBuf) get() []byte {
	if w.pooled == nil {
		w.pooled = bufPool.Get().(*[]byte)
		w.b = (*w.pooled)[:0]
	}
	return w.b
}

// release returns the buffer to the pool.
func (w *writeBuf) release() {
	if w.pooled == nil {
		return
	}
	if cap(w.b) <= 64<<10 {
		*w.pooled = w.b[:0]
		bufPool.Put(w.pooled)
	}
	w.pooled, w.b = nil, nil
}

// complete runs a non-streaming request: the upstream is streamed all the
// same (for timeouts and metering) and the answer is sent whole.
func (s *Server) complete(ctx context.Context, w http.ResponseWriter, x *exchange, seq chat.Stream, sf surface) {
	var col chat.Collector
	var c chat.Chunk
	for next, err := range seq {
		if !x.take(&c, &next, err, sf) {
			break
		}
		col.Add(c)
	}
	x.ending = x.call.End(ctx, x.err, false)
	if x.ending.Outcome != call.Complete {
		// A cut answer too: its text is no whole answer, and a 200
		// would say it is.
		ce := x.failure()
		if x.ending.Outcome == call.Gone {
			ce = chat.ErrClientClosed
		}
		x.commitHeaders(w.Header())
		x.dialect.writeError(w, ce)
		return
	}
	model := x.call.Model()
	if model == "" {
		model = x.req.Model
	}
	resp := col.Response()
	u := x.call.Usage(x.req)
	resp.Usage = &u
	x.commitHeaders(w.Header())
	writeJSON(w, http.StatusOK, sf.response(x, model, resp))
	x.call.Shown()
}

// take takes the call's stream's next pair into c for sf, and delivers
// it to the call (telling sf the upstream model when it first comes);
// false (x.err set) when the pair is the stream's error, which ends it.
// A cut's finish (chat.FinishTimeout) is the call's to know, not sf's to
// show: no API's finish reason means "cut by a deadline", and the answer
// ends with the call's timeout error instead (call.Cut).
func (x *exchange) take(c, next *chat.Chunk, err error, sf surface) bool {
	if err != nil {
		x.err = err
		return false
	}
	*c = *next
	if x.call.Deliver(c) {
		sf.setModel(c.Model)
	}
	if c.FinishReason == chat.FinishTimeout {
		c.FinishReason = ""
	}
	return true
}

// failure is the error that ends x's answer: the call's (a cut's
// timeout, a failure as classified), else the stream's as classified.
func (x *exchange) failure() *chat.Error {
	if x.ending.Err != nil {
		return x.ending.Err
	}
	return chat.AsError(x.err)
}

// finish meters and logs the request as it ended (x.ending).
func (s *Server) finish(r *http.Request, x *exchange) {
	x.call.Meter(context.WithoutCancel(r.Context()), x.ending.Ending, x.call.Usage(x.req))
}

// maxCoalesce bounds how much a stream holds back while later chunks that
// arrived together are appended to one write.
const maxCoalesce = 16 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}
