package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/store"
)

// errBlocked cancels a turn's work when the guard blocks its message.
var errBlocked = errors.New("blocked by the guardrail")

// ShutdownCode is the error code of a turn cut by the server's shutdown.
const ShutdownCode = string(chat.CategoryShuttingDown)

// Event is one event of a turn after meta: thinking and deltas, then done
// or error.
type Event struct {
	Kind string // "thinking", "delta", "done" or "error"
	Text string
	// A thinking event carries Text, or one of: Restart (drop the
	// thinking shown so far: a new attempt's follows) and Redacted (a
	// redacted block, whose data is kept for the model, not shown).
	Restart, Redacted bool
	Done              *Done
	Error             *ErrorEvent
}

// ErrorEvent ends a turn that failed. The partial answer is kept.
type ErrorEvent struct {
	MessageID string         `json:"message_id"`
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Status    store.Status   `json:"status"`
	Usage     chat.Usage     `json:"usage"`
	Timings   budget.Timings `json:"timings"`
}

// Done ends a turn that finished (completely, or cut by the timeout).
type Done struct {
	MessageID    string       `json:"message_id"`
	Status       store.Status `json:"status"`
	FinishReason string       `json:"finish_reason"`
	Model        string       `json:"model"`
	Deployment   string       `json:"deployment"`
	Usage        chat.Usage   `json:"usage"`
	Cost         float64      `json:"cost"`
	Cached       bool         `json:"cached"`
	Coalesced    bool         `json:"coalesced,omitempty"`
	Rule         string       `json:"rule,omitempty"`
	Attempts     int          `json:"attempts"`
	Fallback     bool         `json:"fallback"`
	// Continued: the answer broke mid-stream and another attempt
	// continued it (docs/continuation.md).
	Continued bool           `json:"continued,omitempty"`
	Route     string         `json:"route,omitempty"`
	Timings   budget.Timings `json:"timings"`
	Sources   []SourceReport `json:"sources"`
	Citations []Citation     `json:"citations,omitempty"`
	Flags     []string       `json:"guard_flags,omitempty"`
}

// SourceReport says how a context source fared.
type SourceReport struct {
	Name     string  `json:"name"`
	Status   string  `json:"status"` // ok, timeout, failed, skipped
	Ms       float64 `json:"ms"`
	Optional bool    `json:"optional"`
	Error    string  `json:"error,omitempty"`
}

// Run streams the turn: yield receives deltas and then exactly one done or
// error event, unless the client left. yield reports whether the client
// received the event; its false ends the turn as cancelled. Every ending
// saves the assistant message with exactly the text that was delivered.
//
// The turn's steps are run's methods, and so is each way it ends:
//
//   - refuse: the guard blocked the message. The local guard blocks
//     before anything runs; the remote one (startGuard) before the model
//     in guard mode "before", or while the context was gathered; in
//     parallel mode also while the model's first text is held back for
//     its verdict, before that text (cancelling the model) or after a
//     silent answer (afterStream).
//   - failContext: the history or a required context source failed
//     (optional ones are reported and skipped).
//   - finish, after the model's stream (stream, afterStream): the call
//     (Call.End) tells apart the answer done, cut by the deadline after
//     its first text (done, status timeout), failed before or after its
//     first text, timed out, the client gone (cancelled, no event) and the
//     server shutting down (interrupted).
//
// refuse and failContext end through finish too: one place saves the
// message, sends the last event and meters the turn.
//
// ctx is the turn's call's context (call.Call.Context): it ends at the
// request's deadline, with its cause, which tells a deadline from a
// closed request.
func (t *Turn) Run(ctx context.Context, yield func(Event) bool) {
	// The work runs under runCtx, which the guard's block and the
	// client's refusing an event cancel with their cause. ctx is left
	// alone by both: its cause says whether the request was closed, cut
	// by the deadline or by the server's shutdown (see call.Call.End).
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	r := &run{t: t, yield: t.afterStored(yield), cancel: cancelRun}

	// The local guard ran in Prepare, before anything was stored.
	// No goroutine, no source and no model has started yet: a block here
	// ends the turn with nothing to cancel.
	if v := t.local; v != nil {
		if v.Blocked {
			r.refuse(ctx, *v)
			return
		}
		r.flags = v.Flags
	}
	// Started before gather, so the remote guard and the context sources run
	// at once: the turn waits for the slower, not the sum. An answer taken
	// over was let through when it began.
	var guard *remoteVerdict
	if t.continues == "" {
		guard = r.startGuard(runCtx)
	}
	g, err := t.gather(runCtx, t.user.Content)
	r.sources, r.citations = g.reports, g.citations
	switch {
	// First: the block cancelled the sources, so their error (if any) is its
	// echo, and the refusal must not turn into a context failure.
	case blockedByGuard(runCtx):
		// The remote guard blocked the message while the context was
		// gathered, cancelling what was still running.
		r.refuse(ctx, guard.wait())
		return
	case err != nil:
		guard.wait() // its stage belongs in the saved timings
		r.failContext(ctx, err)
		return
	// Otherwise (parallel mode) the guard may still be out while the model
	// runs: stream holds its first text back for the verdict.
	case t.s.opt.GuardBefore:
		if v := guard.wait(); v.Blocked {
			r.refuse(ctx, v)
			return
		}
	}
	end := t.in.Call.Timings().Begin("prompt")
	r.prompt = t.prompt(t.user.Content, g)
	r.prompt.Hints.Continues = t.continues
	end("")
	r.stream(ctx, runCtx, guard)
}

// afterStored makes the first event wait for the turn's first write:
// what comes before it (the context, the prompt, the model's first token)
// runs during the write, but nothing reaches the client before the user's
// message is durable.
func (t *Turn) afterStored(yield func(Event) bool) func(Event) bool {
	waited := false
	return func(ev Event) bool {
		if !waited {
			t.Stored()
			waited = true
		}
		return yield(ev)
	}
}

// run is one Run of a turn: what its steps share, and how it ended.
type run struct {
	t      *Turn
	yield  func(Event) bool
	cancel context.CancelCauseFunc // cancels the work (runCtx)

	// Everything below is written on Run's goroutine only; the remote
	// guard's goroutine only reads cancel (it writes to the budget recorder,
	// which locks, and cancels runCtx).
	text       string               // delivered
	thinking   []chat.ThinkingBlock // delivered, with signatures
	sentTokens chat.TokenCount
	err        error
	gone       bool // the client refused an event
	sources    []SourceReport
	citations  []Citation
	flags      []string
	prompt     *chat.Request
}

// remoteVerdict is the remote guard's verdict on the message, coming
// from a goroutine. A nil *remoteVerdict (no remote guard) passes
// everything.
type remoteVerdict struct {
	ch   chan Verdict // buffered: the guard's goroutine never waits
	v    Verdict
	done bool
}

// wait returns the verdict, waiting for it the first time.
func (g *remoteVerdict) wait() Verdict {
	if g == nil {
		return Verdict{}
	}
	if !g.done {
		// Once received, the guard's stage is in the recorder: its goroutine
		// adds it before it sends (Run's context-failure path waits for that).
		g.v, g.done = <-g.ch, true
	}
	return g.v
}

// pending reports whether the verdict was not waited for yet: in
// parallel mode, the model's text is held back until it is.
func (g *remoteVerdict) pending() bool { return g != nil && !g.done }

// blockedByGuard reports whether the remote guard's block cancelled
// runCtx.
func blockedByGuard(runCtx context.Context) bool {
	return errors.Is(context.Cause(runCtx), errBlocked)
}

// startGuard starts the remote guard on the message, if there is one, in
// parallel with the rest of the turn. A block cancels runCtx with
// errBlocked at once, so that the context sources and the model stop. A
// guard that cannot answer blocks the message (guard_unavailable), unless
// the turn is over anyway.
func (r *run) startGuard(runCtx context.Context) *remoteVerdict {
	t, s := r.t, r.t.s
	g := s.opt.Guard
	if g == nil || !s.opt.RemoteGuard {
		return nil
	}
	rv := &remoteVerdict{ch: make(chan Verdict, 1)}
	go func() {
		// Under runCtx: when the turn ends (Run cancels runCtx on return) a
		// guard call still out is abandoned, and its goroutine ends.
		gctx, cancel := context.WithTimeout(runCtx, s.opt.GuardTimeout)
		defer cancel()
		start := time.Now()
		v, err := g.Check(gctx, t.user.Content, t.in.UserID)
		if err != nil && !v.Blocked {
			v = Verdict{Blocked: true, Code: "guard_unavailable", Reason: "The message could not be checked: " + err.Error()}
			if runCtx.Err() != nil {
				v.Blocked = false // the turn is over anyway
			}
		}
		t.in.Call.Timings().Add("guard", start, time.Now(), verdictNote(v))
		// Cancelled before the send: whoever receives a block finds runCtx
		// already cancelled, and the model and the sources stop without waiting
		// for the turn's goroutine to notice.
		if v.Blocked {
			r.cancel(errBlocked)
		}
		rv.ch <- v
	}()
	return rv
}

// stream sends the prompt to the router and the answer's thinking and
// text to the client, checkpointing them, then ends the turn. While the
// remote guard's verdict is pending (parallel mode) the model's output is
// held back: nothing reaches the client before the guard has passed the
// message.
func (r *run) stream(ctx, runCtx context.Context, guard *remoteVerdict) {
	t, s := r.t, r.t.s
	var prior []chat.ThinkingBlock
	if t.continues != "" {
		prior = StoredThinking(t.assistant.Thinking)
	}
	cp := newCheckpointer(s.opt.Store, t.assistant.ID, t.written, s.opt.CheckpointInterval, s.opt.CheckpointTokens, s.opt.TouchInterval, t.in.Held, prior,
		t.in.Durable, s.opt.DurableCheckpointInterval)
	// Deferred as well as called below: the blocked path returns from
	// inside the loop (stop is idempotent).
	defer cp.stop()
	var sent strings.Builder
	// An answer taken over: what its first producer delivered is the
	// start of what is saved; the router passes on only the rest.
	sent.WriteString(t.continues)
	// Under runCtx: a guard's block or the client's leaving cancels the model
	// at once. The call's report is the router's to write between chunks,
	// and read here only when the loop body runs or the loop is over.
	for c, err := range t.in.Call.Stream(runCtx, r.prompt) {
		if err != nil {
			r.err = err
			break
		}
		// Every chunk is delivered to the call, text or not: the usage and
		// the finish reason come in chunks without text.
		t.in.Call.Deliver(&c)
		delta := c.Text + c.Refusal
		if delta == "" && !c.Thinks() {
			continue
		}
		// Parallel mode: the first output (thinking or text) waits here for
		// the verdict, with the router's stream paused under it; after that,
		// pending is false and nothing waits.
		if guard.pending() {
			if v := guard.wait(); v.Blocked {
				// Blocked while the model's first text was held back:
				// none of it is sent. The refusal goes out before the
				// model's stream is closed, with the report as it is.
				t.in.Call.EndRoute()
				r.refuse(ctx, v)
				return
			}
		}
		// Nothing of the answer goes out for a message that was not stored.
		if err := t.Stored(); err != nil {
			r.err = &chat.Error{Category: chat.CategoryStoreUnavailable, Message: "the message could not be saved", Retryable: true, Err: err}
			r.cancel(r.err)
			break
		}
		// A chunk's thinking comes before its text.
		ok := !c.Thinks() || r.think(&c, cp)
		if ok && delta != "" {
			ok = r.yield(Event{Kind: "delta", Text: delta})
		}
		if !ok {
			r.gone = true
			// The client refused an event: everything still running for it (the
			// guard, the model through the break) stops.
			r.cancel(chat.ErrClientGone)
			break
		}
		// After the yield: the first word is when the client got it.
		t.in.Call.Shown()
		if delta == "" {
			continue
		}
		sent.WriteString(delta)
		r.sentTokens.Add(delta)
		// The checkpoint gets exactly what was delivered, never what the model
		// produced beyond it.
		cp.update(sent.String(), r.sentTokens.Tokens())
	}
	t.in.Call.EndRoute() // the model's stages end with its stream
	// Before finish saves the message: stop waits for a checkpoint in
	// flight, so none runs after the turn (the store also ignores one of a
	// finished message).
	cp.stop()
	r.text, r.thinking = sent.String(), cp.delivered()
	r.afterStream(ctx, runCtx, guard)
}

// think sends a chunk's thinking to the client and records what was
// delivered of it; false if the client refused an event. A restart is
// sent only if thinking was shown; a signature is kept, not sent.
func (r *run) think(c *chat.Chunk, cp *checkpointer) bool {
	th := c.Thought
	if th != nil && th.Restart {
		// Before any answer text: what was counted is the failed attempt's
		// thinking, which the router billed as that attempt's.
		r.sentTokens = chat.TokenCount{}
	}
	if th != nil && th.Restart && len(cp.delivered()) > 0 {
		if !r.yield(Event{Kind: "thinking", Restart: true}) {
			return false
		}
		cp.think(&chat.Chunk{Thought: &chat.Thought{Restart: true}}, r.sentTokens.Tokens())
	}
	if c.Thinking != "" {
		if !r.yield(Event{Kind: "thinking", Text: c.Thinking}) {
			return false
		}
		r.sentTokens.Add(c.Thinking) // billed as output, as providers bill it
		cp.think(&chat.Chunk{Thinking: c.Thinking}, r.sentTokens.Tokens())
	}
	if th == nil || th.Signature == "" && th.Redacted == "" {
		return true
	}
	if th.Redacted != "" && !r.yield(Event{Kind: "thinking", Redacted: true}) {
		return false
	}
	end := *th
	end.Restart = false
	cp.think(&chat.Chunk{Thought: &end}, r.sentTokens.Tokens())
	return true
}

// afterStream ends a turn whose model stream ended. A pending verdict
// still decides: the guard may have blocked the message before the
// model's first text (cancelling the model), or block it after an answer
// without text.
func (r *run) afterStream(ctx, runCtx context.Context, guard *remoteVerdict) {
	switch {
	case blockedByGuard(runCtx):
		r.refuse(ctx, guard.wait())
		return
	// An answer without text (or a failure before any) never waited for
	// the verdict: a block still refuses it. A client that left is not
	// waited for.
	case guard.pending() && !r.gone:
		if v := guard.wait(); v.Blocked {
			r.refuse(ctx, v)
			return
		}
	}
	r.finish(ctx)
}

func verdictNote(v Verdict) string {
	switch {
	case v.Blocked:
		return "blocked:" + v.Code
	case len(v.Flags) > 0:
		return "flagged"
	}
	return ""
}

// refuse ends a turn the guard blocked: nothing more reaches the model or
// the client but the refusal.
func (r *run) refuse(ctx context.Context, v Verdict) {
	r.err = &chat.Error{Category: chat.CategoryBlocked, Message: v.Reason}
	if v.Code != "" {
		r.flags = append(r.flags, v.Code)
	}
	r.finish(ctx)
}

// failContext ends a turn whose history or required context source
// failed (err is a context_unavailable chat.Error), before the model.
func (r *run) failContext(ctx context.Context, err error) {
	r.err = err
	r.finish(ctx)
}

// finish saves the message, sends the last event and meters the turn.
// The message is saved before done is sent: nothing the client was told
// is finished can be lost.
func (r *run) finish(ctx context.Context) {
	t, s := r.t, r.t.s
	rec := t.in.Call.Timings()
	// The turn's first write reads the message: it must be over before
	// the message is filled in. A failed write may still be reading it
	// (a store's timeout abandons its call): the ending works on a copy.
	storeErr := t.Stored()
	if storeErr != nil {
		a := *t.assistant
		t.assistant = &a
	}
	m, u := r.message()
	code, retryable := r.settle(m, t.in.Call.End(ctx, r.err, r.gone))
	fenced := t.in.Held != nil && !t.in.Held()
	if fenced {
		// Another process continues the answer and writes it: this one
		// tells its client to resume, and stores nothing.
		m.Status, code, retryable = store.StatusInterrupted, "interrupted", true
		m.ErrorCode, m.ErrorMessage = code, "another server continues this answer: resume it to read the rest"
		r.gone = false
	}
	rec.Complete(time.Now()) // provisional: the last event follows the save
	// The saved timings need an end; the event's are completed again after
	// the save, which they then include.
	m.Timings = rec.JSON()
	m.Meta = r.meta()
	m.UpdatedAt = time.Now().UTC()

	// Saving outlives the client and the deadline, within its own bound.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	end := rec.Begin("persist")
	if storeErr != nil {
		// The turn's first write failed: there is no row to finish (the
		// caller answers with the write's error if it sent nothing yet).
		m.Status, code, retryable = store.StatusError, "store_unavailable", true
		m.ErrorCode, m.ErrorMessage = code, "the message could not be saved"
	} else if err := finishUnlessFenced(pctx, s.opt.Store, m, fenced); errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		// The database is stalled or away: the last write is retried
		// until it lands, and the client is told the answer's ending as
		// it is, which is what the store will say (issue 34).
		s.opt.Log.Warn("saving the answer failed; retrying until the store answers", "request_id", t.in.RequestID, "message_id", m.ID, "err", err)
		saved := *m
		go s.retryFinish(t.in.RequestID, &saved)
	} else if err != nil {
		s.opt.Log.Error("saving the answer", "request_id", t.in.RequestID, "message_id", m.ID, "err", err)
		// A done event promises a saved answer: an answer that could not be
		// saved is reported as an error instead.
		if m.Status == store.StatusComplete {
			m.Status, code = store.StatusError, "store_unavailable"
			m.ErrorMessage = "the answer could not be saved"
		}
	}
	end("")
	// Metered after the last event, which it does not delay.
	// Deferred after cancel, so it runs first: pctx is still live for it.
	defer r.meter(pctx, u, m)
	// Nobody reads a last event after the client left.
	if r.gone || m.Status == store.StatusCancelled {
		return
	}
	rec.Complete(time.Now())
	// Done for a complete answer and for one cut at the deadline (timeout
	// without an error: what was sent is the answer); error otherwise.
	if m.Status == store.StatusComplete || m.Status == store.StatusTimeout && r.err == nil {
		rep := t.in.Call.Report()
		r.yield(Event{Kind: "done", Done: &Done{
			MessageID: m.ID, Status: m.Status, FinishReason: m.FinishReason, Model: t.in.Model,
			Deployment: m.Deployment, Usage: u, Cost: m.Cost, Cached: rep.Cached, Coalesced: rep.Coalesced, Rule: rep.Rule, Attempts: rep.Tries(),
			Fallback: rep.Fallbacks() > 0, Continued: rep.Continued(), Route: rep.Route(), Timings: rec.Timings(),
			Sources: r.sources, Citations: r.citations, Flags: r.flags,
		}})
		return
	}
	r.yield(Event{Kind: "error", Error: &ErrorEvent{MessageID: m.ID, Code: code, Message: m.ErrorMessage, Retryable: retryable, Status: m.Status, Usage: u, Timings: rec.Timings()}})
}

// retryFinish writes an answer's last state until the store takes it
// (see retry): the store then says what its client was told. (Rows left
// streaming meanwhile may be marked interrupted by the stale-row sweep;
// this write replaces that.)
func (s *Service) retryFinish(requestID string, m *store.Message) {
	time.Sleep(500 * time.Millisecond)
	if err := retry(func(ctx context.Context) error { return s.opt.Store.FinishMessage(ctx, m) }); err != nil {
		s.opt.Log.Error("saving the answer: giving up", "request_id", requestID, "message_id", m.ID, "err", err)
		return
	}
	s.opt.Log.Info("the answer is saved after a retry", "request_id", requestID, "message_id", m.ID)
}

// finishUnlessFenced saves m, unless another process took the answer
// over (fenced): it writes the answer then.
func finishUnlessFenced(ctx context.Context, st store.Store, m *store.Message, fenced bool) error {
	if fenced {
		return nil
	}
	return st.FinishMessage(ctx, m)
}

// message is the answer as delivered: its text, deployment, finish
// reason, usage and cost. u is the usage of what was delivered: the
// provider's, else an estimate of the text sent (counts the provider
// reported before the stream ended are kept).
func (r *run) message() (m *store.Message, u chat.Usage) {
	c := r.t.in.Call
	tally := c.Tally()
	m = r.t.assistant
	m.Content, m.Thinking = r.text, thinkingJSON(r.thinking)
	m.Deployment = c.Report().Deployment
	m.FinishReason = string(tally.Finish)
	u = c.Usage(r.req())
	// No provider counts: the output is estimated from the text delivered,
	// not from all the model produced (the client may have left, or the text
	// been held back and refused).
	if tally.Reported == nil && tally.SoFar == nil {
		u.OutputTokens = r.sentTokens.Tokens()
	}
	m.InputTokens, m.OutputTokens, m.CachedTokens, m.Estimated = u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.Estimated
	m.Cost = c.Cost(u)
	return m, u
}

// settle sets the message's status and error for how the turn ended, and
// returns the error event's code and whether retrying may help.
func (r *run) settle(m *store.Message, e call.Ending) (code string, retryable bool) {
	switch e.Outcome {
	case call.Shutdown:
		// The server cut the answer, not the user: it says so.
		m.Status, code, retryable = store.StatusInterrupted, ShutdownCode, true
		m.ErrorCode, m.ErrorMessage = code, "the server is shutting down; the answer so far is saved, send the message again to continue"
	case call.Gone:
		m.Status = store.StatusCancelled
	case call.Cut:
		m.Status = store.StatusTimeout
	case call.Complete:
		m.Status = store.StatusComplete
	default: // call.Failed, call.TimedOut
		ce := e.Err
		m.Status, code, retryable = store.StatusError, string(ce.Category), ce.Retryable
		if e.Outcome == call.TimedOut {
			m.Status, code, retryable = store.StatusTimeout, "timeout", true
		}
		m.ErrorCode, m.ErrorMessage = code, ce.Message
		if ce.Category == chat.CategoryInternal {
			r.t.s.opt.Log.Error("chat turn failed", "request_id", r.t.in.RequestID, "err", r.err)
		}
	}
	return code, retryable
}

// meta is what the message keeps besides its text: how it was routed,
// its sources and citations, the guard's flags.
func (r *run) meta() []byte {
	rep := r.t.in.Call.Report()
	meta := map[string]any{"attempts": rep.Tries(), "route": rep.Route(), "sources": r.sources, "cached": rep.Cached, "fallback": rep.Fallbacks() > 0}
	if len(r.citations) > 0 {
		meta["citations"] = r.citations
	}
	if len(r.flags) > 0 {
		meta["guard_flags"] = r.flags
	}
	// Cannot fail: the values are plain strings, numbers, bools and slices
	// of structs of them.
	b, _ := json.Marshal(meta)
	return b
}

// req is the request as sent, for usage estimates.
func (r *run) req() *chat.Request {
	if r.prompt != nil {
		return r.prompt
	}
	// No prompt was built (a refusal, a context failure): the estimate is of
	// the message alone.
	return &chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: r.t.in.Message}}}
}

// meter records the turn, as it was saved; u is the usage of what was
// delivered, before any sharing (see metering.Prices.Charge).
func (r *run) meter(ctx context.Context, u chat.Usage, m *store.Message) {
	r.t.in.Call.Meter(ctx, metering.Ending{Status: meterStatus(m.Status), ErrorCode: m.ErrorCode, Error: m.ErrorMessage}, u)
}

func meterStatus(s store.Status) metering.Status {
	switch s {
	case store.StatusInterrupted:
		return metering.StatusInterrupted
	case store.StatusComplete:
		return metering.StatusComplete
	case store.StatusCancelled:
		return metering.StatusCancelled
	case store.StatusTimeout:
		return metering.StatusTimeout
	}
	return metering.StatusError
}

// gathered is the context for the prompt.
type gathered struct {
	history   []store.Message
	texts     []string
	citations []Citation
	reports   []SourceReport
}

// gather loads the history and runs every context source at once, each
// with its own timeout: the wait is the slowest, not the sum. Optional
// sources that fail are reported and skipped; a required one (and the
// history) fails the turn.
func (t *Turn) gather(ctx context.Context, question string) (*gathered, error) {
	s, rec := t.s, t.in.Call.Timings()
	g := &gathered{}
	start := time.Now()
	defer func() { rec.AddGroup("context", start, time.Now(), "") }()
	// gctx ends at the first required failure (or the history's), stopping
	// the other sources: the turn fails anyway. Each goroutine writes only
	// its own slot of results and reports; Wait orders those writes before
	// the reads below.
	grp, gctx := errgroup.WithContext(ctx)
	results := make([]struct {
		text  string
		cites []Citation
	}, len(s.opt.Sources))
	reports := make([]SourceReport, len(s.opt.Sources)+1)
	reports[0] = SourceReport{Name: "history", Status: "ok"}
	if !t.created {
		grp.Go(func() error {
			// The history is what came before the user's message: its
			// place (Seq) is known once it is written.
			if err := t.Stored(); err != nil {
				reports[0].Status, reports[0].Error = "failed", err.Error()
				return fmt.Errorf("history: %w", err)
			}
			hctx, cancel := context.WithTimeout(gctx, s.opt.HistoryTimeout)
			defer cancel()
			st := time.Now()
			msgs, err := s.opt.Store.LastMessages(hctx, t.in.TenantID, t.conv.ID, 64)
			reports[0].Ms = msSince(st)
			rec.Add("history", st, time.Now(), "")
			if err != nil {
				reports[0].Status, reports[0].Error = "failed", err.Error()
				return fmt.Errorf("history: %w", err)
			}
			g.history = historyWithin(msgs, t.historyUntil, s.opt.HistoryTokens)
			return nil
		})
	}
	q := Query{TenantID: t.in.TenantID, UserID: t.in.UserID, ConversationID: t.conv.ID, Question: question}
	for i, src := range s.opt.Sources {
		grp.Go(func() error {
			sctx, cancel := context.WithTimeout(gctx, src.Timeout)
			defer cancel()
			st := time.Now()
			text, cites, err := src.Fetch(sctx, q)
			r := &reports[i+1]
			*r = SourceReport{Name: src.Name, Status: "ok", Ms: msSince(st), Optional: src.Optional}
			note := ""
			if err != nil {
				switch {
				// Cancelled by another's failure or the turn's end, not its own fault.
				case gctx.Err() != nil:
					r.Status = "cancelled"
				case sctx.Err() != nil:
					r.Status = "timeout"
				default:
					r.Status = "failed"
				}
				r.Error, note = err.Error(), r.Status
			}
			rec.Add(src.Name, st, time.Now(), note)
			if err != nil {
				// A required source cancelled by another's failure returns nil: the
				// error reported is the one that caused it.
				if !src.Optional && gctx.Err() == nil {
					return fmt.Errorf("%s: %w", src.Name, err)
				}
				return nil
			}
			results[i].text, results[i].cites = text, cites
			return nil
		})
	}
	err := grp.Wait()
	for _, r := range results {
		if r.text != "" {
			g.texts = append(g.texts, r.text)
		}
		g.citations = append(g.citations, r.cites...)
	}
	if t.created {
		reports = reports[1:]
	}
	g.reports = reports
	if err != nil {
		return g, &chat.Error{Category: chat.CategoryContextUnavailable, Message: err.Error(), Retryable: true, Err: err}
	}
	return g, nil
}

// StoredThinking reads a message's stored thinking (store.Message.Thinking); a
// column that does not read as blocks is no thinking.
func StoredThinking(b []byte) []chat.ThinkingBlock {
	var blocks []chat.ThinkingBlock
	if len(b) == 0 || json.Unmarshal(b, &blocks) != nil {
		return nil
	}
	return blocks
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// historyWithin keeps the newest messages before seq until that fit in the
// token budget, oldest first. Partial answers count: the history is what
// was on the user's screen.
func historyWithin(msgs []store.Message, until, budget int) []store.Message {
	var out []store.Message
	used := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		// This turn's own messages (and any after them) are not history; an
		// answer that showed nothing adds nothing.
		if m.Seq >= until || m.Content == "" {
			continue
		}
		n := chat.EstimateTokens(m.Content) + 4
		// Stop at the first that does not fit, not skip it: the history stays
		// a contiguous tail of the conversation.
		if used+n > budget {
			break
		}
		used += n
		out = append(out, m)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// prompt assembles the request with its stable prefix first, so that
// provider prompt caches hit: the system prompt, then the history, then
// what is new with this question: the retrieved documents and lookups, and
// the message. The context is a user message, not a system one: it
// changes with every question, so placed before the history (where
// Anthropic puts every system message) it would make the history
// uncacheable; and it is text from documents, which should not speak with
// the system prompt's authority.
//
// The cache breakpoints (sent when the alias has prompt_caching) are the
// system prompt, the end of the history, which the next turn reads back
// (its history goes on from there), and, when no context follows it, the
// message itself, which the next turn repeats. A message followed by this
// turn's context is not marked: the next turn has no such prefix.
func (t *Turn) prompt(text string, g *gathered) *chat.Request {
	s := t.s
	var msgs []chat.Message
	if sys := s.opt.SystemPrompt(t.in.Model); sys != "" {
		msgs = append(msgs, chat.Message{Role: chat.RoleSystem, Content: sys, CacheBreakpoint: true})
	}
	for _, m := range g.history {
		msg := chat.Message{Role: chat.RoleUser, Content: m.Content}
		if m.Role == "assistant" {
			// Its thinking goes back with it: the upstream's encoder sends
			// the signed blocks to the provider that signed them and drops
			// the rest.
			msg.Role, msg.Thinking = chat.RoleAssistant, StoredThinking(m.Thinking)
		}
		msgs = append(msgs, msg)
	}
	if len(g.history) > 0 {
		msgs[len(msgs)-1].CacheBreakpoint = true
	}
	if len(g.texts) > 0 {
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: "Context for this question:\n\n" + strings.Join(g.texts, "\n\n")})
	}
	msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: text, CacheBreakpoint: len(g.texts) == 0})
	return &chat.Request{Model: t.in.Model, Messages: msgs, Hints: t.in.Hints}
}
