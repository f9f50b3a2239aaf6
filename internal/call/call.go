// Package call owns one request's life between the surface that speaks
// HTTP and the levers: its alias, resolved once (unknown, or its
// deadline); its context, ending at that deadline with cause
// chat.ErrDeadline; its stream as delivered (tallied, the upstream model
// named, the router's stages recorded, the first thought and the first
// word stamped when the surface shows them, the thinking cleared when the
// alias does not show it); and how it ended, classified once, from which
// its metering record is built.
//
//	surface: parse ─► Calls.Resolve ─► Call.Context ─► Call.Stream ─► each chunk: Call.Deliver, encode, write, Call.Shown ─► Call.End ─► Call.Meter
//
// A surface (httpapi's OpenAI, Anthropic and Responses endpoints,
// conversation's /v1/chat turn) only parses and encodes: every fact about
// the request that outlives one chunk is the Call's.
package call

import (
	"context"
	"errors"
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
)

// Routes is what a call is routed through: the levers in front of the
// router (*levers.Levers).
type Routes interface {
	// Timeout is how long a request for alias may take from its arrival,
	// or why the alias is not served (router.ErrUnknownModel, or a reason
	// of the router's own).
	Timeout(alias string) (time.Duration, error)
	// Plan decides what the levers do with req; its stream fills rep with
	// what the levers and the router did.
	Plan(req *chat.Request, rep *levers.Report) levers.Planned
}

// Options configures Calls.
type Options struct {
	Routes Routes
	// Prices turn usage into cost.
	Prices metering.Prices
	// Meter receives each call's record (nil: none is built).
	Meter metering.Meter
}

// Calls resolves requests into calls. It is safe for concurrent use; a
// Call is not: it belongs to its request's goroutine.
type Calls struct {
	opt Options
}

// New returns Calls.
func New(opt Options) *Calls { return &Calls{opt: opt} }

// Resolve starts the call for q: it resolves q.Alias once, and the call's
// deadline is the alias's timeout from the request's arrival
// (q.Timings.Start(); q.Timings is required), or client after it when the
// client asked for less (0: it did not). The error says why the alias is
// not served: the routes' (router.ErrUnknownModel, or a reason of the
// router's own).
func (cs *Calls) Resolve(q metering.Request, client time.Duration) (*Call, error) {
	timeout, err := cs.opt.Routes.Timeout(q.Alias)
	if err != nil {
		return nil, err
	}
	if client > 0 && client < timeout {
		timeout = client
	}
	return &Call{calls: cs, q: q, deadline: q.Timings.Start().Add(timeout)}, nil
}

// Call is one request's life: see the package comment. Its methods are
// called from the request's goroutine (the stream's consumer), but for
// Cancel, which goroutines started after Context may call.
type Call struct {
	calls    *Calls
	q        metering.Request
	deadline time.Time
	cancel   context.CancelCauseFunc // ends the call's context (Context)

	rep   levers.Report
	tally metering.Tally
	model string // the upstream model, from the first chunk that names one
	// routeAt is when Stream handed the request to the levers; release
	// frees a routing rule's deadline; staged says the router's stages
	// are in the timings.
	routeAt time.Time
	release context.CancelFunc
	staged  bool
	shown   bool // the first word is stamped
	// hide clears the thinking from what is delivered (the alias's show:
	// false). thought says where the first thought stands; thoughtAt is
	// when it was delivered, then when it was shown.
	hide      bool
	thought   thought
	thoughtAt time.Time
}

// thought is where a call's first thought stands.
type thought uint8

const (
	thoughtNone      thought = iota // no thought delivered (or a restart dropped them)
	thoughtDelivered                // delivered, to be stamped when shown
	thoughtSettled                  // stamped: shown, hidden, or recorded
)

// Context returns the call's context: parent, ending at the call's
// deadline with cause chat.ErrDeadline, and cancelled with a cause by
// Cancel or by the returned function, which also releases it (call it
// once the call's work is over). It is made once per call; everything the
// call routes runs under it or a context derived from it.
func (c *Call) Context(parent context.Context) (context.Context, context.CancelCauseFunc) {
	ctx, cancelDeadline := chat.WithDeadline(parent, c.deadline)
	ctx, cancel := context.WithCancelCause(ctx)
	c.cancel = cancel
	return ctx, func(cause error) { cancel(cause); cancelDeadline() }
}

// Cancel ends the call's context with cause (chat.ErrClientGone: the
// client stopped reading; chat.ErrStopped: the user stopped the answer),
// from any goroutine started after Context; a no-op before Context.
func (c *Call) Cancel(cause error) {
	if c.cancel != nil {
		c.cancel(cause)
	}
}

// Stream plans req with the routes and returns its stream under ctx (the
// call's context, or one derived from it), as the routes give it: the
// call adds no frame to the path of a chunk (each chunk is written to the
// client from under every frame between the handler and the upstream
// read; see docs/architecture.md). The surface gives each chunk it
// receives to Deliver before it encodes it. When a routing rule sends req
// to another alias whose timeout, from now, ends before the call's
// deadline, the stream (the router's walk, a cache replay, a shared
// stream) ends then, with cause chat.ErrDeadline; the call's own context
// is left as it is. The iterator is single-use; breaking out of it or
// cancelling ctx aborts the upstream at once.
func (c *Call) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	routes := c.calls.opt.Routes
	c.routeAt = time.Now()
	p := routes.Plan(req, &c.rep)
	c.hide = c.rep.HideThinking
	if to := p.Alias(); to != req.Model {
		if timeout, err := routes.Timeout(to); err == nil {
			if d := c.routeAt.Add(timeout); d.Before(c.deadline) {
				ctx, c.release = chat.WithDeadline(ctx, d)
			}
		}
	}
	return p.Stream(ctx)
}

// Deliver counts a chunk of Stream's that the surface delivers (or holds
// back: what the model produced counts, see chat.Tally): it tallies it
// (the usage, the finish, the gaps between visible chunks, the thinking),
// notes the first thought, and names the upstream model from the first
// chunk that carries one, reporting true for that chunk (the surface then
// tells its encoder Model). When the alias does not show the thinking it
// then clears the chunk's Thinking and Thought: the surface sends none,
// and it is still measured and billed.
func (c *Call) Deliver(ch *chat.Chunk) (named bool) {
	c.add(ch)
	return c.model == "" && c.name(ch.Model)
}

// add tallies a chunk and follows the thinking (apart from Deliver, which
// stays small enough to inline in the surfaces' loops).
func (c *Call) add(ch *chat.Chunk) {
	c.tally.Add(ch)
	if ch.Thinking != "" || ch.Thought != nil || c.thought == thoughtDelivered {
		c.think(ch)
	}
}

// think follows a chunk of thinking, or the first chunk after a thought
// not yet shown: a restart drops the first thought noted (the attempt
// that thought failed; the next one's counts), and the first thinking
// text or redacted block before the answer is noted when delivered, to be
// stamped again when shown (a hidden one never is). A thought that no
// write showed before the next chunk came (the surface sends no thinking,
// or sends it with that chunk) stays stamped at its delivery. Thinking
// after the answer began (between tool calls) is no first thought.
func (c *Call) think(ch *chat.Chunk) {
	th := ch.Thought
	switch {
	case c.staged:
		// Recorded: nothing changes it any more.
	case c.thought == thoughtDelivered && !ch.Thinks():
		c.thought = thoughtSettled
	case th != nil && th.Restart:
		c.thought, c.thoughtAt = thoughtNone, time.Time{}
	case c.thought == thoughtNone && (ch.Thinking != "" || th != nil && th.Redacted != "") && (!c.tally.Visible || ch.Visible()):
		c.thought, c.thoughtAt = thoughtDelivered, time.Now()
		if c.hide {
			c.thought = thoughtSettled
		}
	}
	if c.hide {
		ch.Thinking, ch.Thought = "", nil
	}
}

// name names the upstream model, if m is one.
func (c *Call) name(m string) bool {
	c.model = m
	return m != ""
}

// EndRoute records the router's stages in the call's timings (routing,
// each attempt, its time to first token and generation), once, and
// releases what Stream set up: End does, and a surface that answers while
// the stream is still open (a refusal sent before the model's stream is
// closed) calls it first, so that the answer's timings hold them.
func (c *Call) EndRoute() {
	if c.staged || c.routeAt.IsZero() {
		return
	}
	c.staged = true
	c.rep.AddStages(c.q.Timings, c.routeAt, time.Now())
	c.thinkingStages()
	if c.release != nil {
		c.release()
	}
}

// thinkingStages records the model's thinking, when it thought: the
// stages first_thought, from the start of the upstream call that thought
// to its first thought shown (delivered, when nothing showed it: a
// complete answer sent whole, hidden thinking), and thinking, from there
// to its first answer token; and the recorder's time to first thought and
// thinking time (see budget.Recorder.Thought).
func (c *Call) thinkingStages() {
	if c.thought == thoughtNone {
		return
	}
	c.thought = thoughtSettled
	at := c.thoughtAt
	start, note := c.thinker()
	rec := c.q.Timings
	rec.Add("first_thought", start, at, note)
	// The router's first token, but for an answer it did not route (a
	// cache hit's is when its replay began): the first text delivered.
	// One that came in the read that brought the thought came with it.
	answer := c.rep.FirstToken
	if answer.Before(at) {
		answer = c.tally.First
	}
	var thinking time.Duration
	if !answer.IsZero() {
		answer = later(answer, at)
		rec.Add("thinking", at, answer, note)
		thinking = answer.Sub(at)
	}
	rec.Thought(at, thinking)
}

// thinker is the start of the upstream call that thought, and its
// deployment: the attempt that served (the router's first token is its),
// else the last one started by the first thought; the call's routing for
// an answer no attempt gave (a cache hit).
func (c *Call) thinker() (time.Time, string) {
	at := c.rep.Attempts
	for i := len(at) - 1; i >= 0; i-- {
		if a := &at[i]; !a.FirstToken.IsZero() && a.FirstToken.Equal(c.rep.FirstToken) {
			return a.Start, a.Deployment
		}
	}
	for i := len(at) - 1; i >= 0; i-- {
		if a := &at[i]; !a.Start.After(c.thoughtAt) {
			return a.Start, a.Deployment
		}
	}
	return c.routeAt, ""
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Shown tells the call that everything it delivered so far reached the
// client: the surface calls it after each write. The first time that
// includes thinking is the first thought (see Deliver); the first time
// that includes visible text (or a tool call) is the request's first
// word; an answer that showed nothing has none.
func (c *Call) Shown() {
	if !c.shown && (c.tally.Visible || c.thought == thoughtDelivered) {
		c.stamp()
	}
}

// stamp stamps the first thought and the first word, as they are shown
// (apart from Shown, which stays small enough to inline in the surfaces'
// loops).
func (c *Call) stamp() {
	now := time.Now()
	if c.thought == thoughtDelivered {
		c.thought, c.thoughtAt = thoughtSettled, now
	}
	if c.tally.Visible {
		c.shown = true
		c.q.Timings.FirstWord(now)
	}
}

// ServerTiming is the Server-Timing header value of a response that
// commits at now: the stages that ended by now and, while the route is
// open (its stages are recorded when it ends: EndRoute), the route's so
// far: routing, the time to the first thought (the thought being sent)
// and the thinking, the time to the first token.
func (c *Call) ServerTiming(now time.Time) string {
	st := c.q.Timings.ServerTiming(now)
	rep := &c.rep
	if c.staged || len(rep.Attempts) == 0 {
		return st
	}
	b := []byte(st)
	add := func(name string, d time.Duration, note string) { b = budget.AppendServerTiming(b, name, d, note) }
	add("route", rep.Attempts[0].Start.Sub(c.routeAt), "")
	if c.thought != thoughtNone {
		start, dep := c.thinker()
		add("first_thought", c.thoughtAt.Sub(start), dep)
		if !rep.FirstToken.IsZero() {
			add("thinking", later(rep.FirstToken, c.thoughtAt).Sub(c.thoughtAt), dep)
		}
	}
	if !rep.FirstToken.IsZero() {
		last := rep.Attempts[len(rep.Attempts)-1]
		add("ttft", rep.FirstToken.Sub(last.Start), last.Deployment)
	}
	return string(b)
}

// Timings is the request's stage recorder (the request's Timings).
func (c *Call) Timings() *budget.Recorder { return c.q.Timings }

// Report is what the levers and the router did. The router writes it on
// the stream's goroutine, between chunks: read it when the surface has
// control.
func (c *Call) Report() *levers.Report { return &c.rep }

// Tally is what was delivered: chunks, usage, finish, timings.
func (c *Call) Tally() *metering.Tally { return &c.tally }

// Model is the upstream model that served ("" until a chunk named one).
func (c *Call) Model() string { return c.model }

// RouteStart is when the request was handed to the levers (zero before
// Stream ran).
func (c *Call) RouteStart() time.Time { return c.routeAt }

// Usage is the usage of what was delivered for req: the provider's
// count, else an estimate (see chat.Tally.Usage).
func (c *Call) Usage(req *chat.Request) chat.Usage { return c.tally.Usage(req) }

// Cost is what usage u of the answer costs, billed as the levers say (a
// cache hit nothing, a shared stream its part).
func (c *Call) Cost(u chat.Usage) float64 {
	return c.calls.opt.Prices.Cost(c.rep.Deployment, metering.Billed(u, c.rep.Cached, c.rep.BillShare, c.rep.BillPart))
}

// Outcome is how a call ended, as End tells them apart.
type Outcome int

var outcomeNames = [...]string{"complete", "cut", "failed", "timed out", "gone", "shutdown"}

func (o Outcome) String() string { return outcomeNames[o] }

const (
	// Complete: the answer finished.
	Complete Outcome = iota
	// Cut: the deadline passed after the first text and the router ended
	// the answer with chat.FinishTimeout: what was sent is all there is,
	// and no success. A surface ends it with its error form (Err, a
	// timeout) after the text; /v1/chat keeps it as the answer.
	Cut
	// Failed: the router, the model or the surface's own work (a guard's
	// block, the context) failed the call.
	Failed
	// TimedOut: failed by a timeout (a first-token timeout, the deadline
	// before any text).
	TimedOut
	// Gone: the client left (refused an event, closed the request) or
	// the answer was stopped.
	Gone
	// Shutdown: the server's shutdown cut the call.
	Shutdown
)

// Ending is how a call ended: its outcome, its metering status and, for a
// failure, the error.
type Ending struct {
	Outcome Outcome
	metering.Ending
	// Err is the failure (Failed and TimedOut), or the timeout that cut
	// the answer (Cut); nil otherwise.
	Err *chat.Error
}

// End classifies how the call ended from err (the stream's error, or the
// surface's own failure; nil: the stream ended by itself), gone (the
// surface saw its client leave: it refused an event, a write failed) and
// the cause of ctx (the call's context). The surface writes the ending
// from it (the last events, an error, nothing to a client that left) and
// meters it. The first match wins: a client that left; a stream that
// ended by itself (Cut if the deadline cut it), even if the server's
// shutdown came after; the server's shutdown; ctx ended other than by the
// deadline (the client closed the request, the answer was stopped, or
// Cancel); a timeout (one wrapped in another error too); any other
// failure.
func (c *Call) End(ctx context.Context, err error, gone bool) Ending {
	c.EndRoute()
	cause := context.Cause(ctx)
	switch {
	case gone:
		return Ending{Outcome: Gone, Ending: metering.Ending{Status: metering.StatusCancelled}}
	case err == nil && c.tally.Finish == chat.FinishTimeout:
		return Ending{Outcome: Cut, Err: cutError(), Ending: metering.Ending{Status: metering.StatusTimeout}}
	case err == nil:
		return Ending{Outcome: Complete, Ending: metering.Ending{Status: metering.StatusComplete}}
	case errors.Is(err, chat.ErrShutdown), errors.Is(cause, chat.ErrShutdown):
		return Ending{Outcome: Shutdown, Ending: metering.Ending{Status: metering.StatusInterrupted,
			ErrorCode: string(chat.CategoryShuttingDown), Error: chat.ErrShutdown.Error()}}
	case ctx.Err() != nil && !errors.Is(cause, chat.ErrDeadline),
		errors.Is(err, chat.ErrClientGone), errors.Is(err, chat.ErrStopped), errors.Is(err, context.Canceled):
		return Ending{Outcome: Gone, Ending: metering.Ending{Status: metering.StatusCancelled}}
	}
	ce := chat.AsError(err)
	e := Ending{Outcome: Failed, Err: ce, Ending: metering.Ending{Status: metering.StatusError, ErrorCode: string(ce.Category), Error: ce.Error()}}
	if ce.Category == chat.CategoryTimeout || errors.Is(err, chat.ErrDeadline) {
		e.Outcome, e.Status = TimedOut, metering.StatusTimeout
	}
	return e
}

// cutError is the timeout that cut an answer after its first text.
func cutError() *chat.Error {
	return &chat.Error{Category: chat.CategoryTimeout, Err: chat.ErrDeadline,
		Message: "the request's overall timeout cut the answer short: the text sent before this error is all of it"}
}

// Meter records the call: its record is built (metering.Prices.Build)
// from the request, the report, the tally, u (the usage of what was
// delivered, before any sharing) and e (End's, or what the surface made
// of it: a stored answer's status), and sent to the meter. The timings
// are completed now unless the surface completed them. ctx bounds the
// meter's work; it is not the call's, which may be over.
func (c *Call) Meter(ctx context.Context, e metering.Ending, u chat.Usage) {
	c.EndRoute()
	rec := c.q.Timings
	if rec.TTC() == 0 {
		rec.Complete(time.Now())
	}
	if m := c.calls.opt.Meter; m != nil {
		m.Record(ctx, c.calls.opt.Prices.Build(c.q, &c.rep, &c.tally, u, e))
	}
}
