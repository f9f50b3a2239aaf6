package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
)

// session is one request's walk through the deployments.
//
// Ownership: a session lives on the goroutine that ranges over the
// router's stream, and everything in it (and the Report it fills) is read
// and written there only; a hedge's goroutine touches nothing but its own
// attempt (see race).
type session struct {
	r     *Router
	alias *alias
	req   *chat.Request
	// next is the request to route when req's alias fails before the
	// first token (see StreamFallback); nil: none.
	next *chat.Request
	// fallback: the alias walked now is the fallback.
	fallback bool
	rep      *Report
	// ctx is the caller's: it ends when the client leaves, and at the
	// request's deadline (with cause chat.ErrDeadline).
	ctx   context.Context
	yield func(chat.Chunk, error) bool

	lastErr error
	marks   map[*deployment]mark
	// spare is how many more deployments may be skipped as open.
	spare int
	// thought: an attempt's thinking was passed on and no answer followed
	// yet; if another attempt serves, the caller is told to drop it.
	thought bool
	// order is the walk's order of the deployments, for a continuation.
	order []*deployment
	cont  continuer
}

// mark is what a request did with a deployment (one map, not one per
// flag: it is made for every request).
type mark uint8

const (
	// tried: asked once; asking again is a retry.
	tried mark = 1 << iota
	// broken: not asked again; it failed in a way asking again will not
	// fix, or was skipped as open.
	broken
)

// verdict is what an attempt leaves the session to do.
type verdict int

const (
	verdictDone       verdict = iota // the stream ended, one way or another
	verdictNext                      // failed before the first token: try on
	verdictNoFallback                // failed in a way another deployment won't fix
	verdictContinue                  // failed after the first token: continue the answer (resume)
)

// run is the request's stream: it walks the deployments in order until
// one serves the request, the deadline passes or the caller leaves; then,
// if it has one and may, the fallback alias's.
func (s *session) run(yield func(chat.Chunk, error) bool) {
	if err := s.start(yield); err != nil {
		s.abort(err)
		return
	}
	if s.req.Hints.Continues != "" {
		s.takeOver()
		return
	}
	// At most two walks: fallBack clears next, so the second walk's failure
	// ends the stream.
	for {
		v := s.walk()
		if v == verdictContinue {
			s.resume()
			return
		}
		if v == verdictDone {
			return
		}
		if !s.fallBack(v) {
			s.fail()
			return
		}
	}
}

// walk tries the alias's deployments. verdictNext means that none served
// and the request may go on elsewhere; verdictNoFallback that it may not
// (the deadline passed, the caller left, the request was at fault); the
// caller ends the stream in both cases.
func (s *session) walk() verdict {
	a := s.alias
	// The order is taken once per walk, not per pass: later passes retry the
	// same deployments in the same order, and what changed meanwhile (a circuit
	// that opened, a Retry-After) is caught by admit.
	order, skip, spare := s.r.order(a, time.Now(), s.rep.Deadline)
	// Made here, not in start: fallBack replaces it with the fallback alias's.
	if s.marks == nil {
		s.marks = map[*deployment]mark{}
	}
	s.spare = spare
	s.order = order
	s.cont.on = a.OnStreamFailure != StreamFailureEnd && s.req.Choices() == 1
	for _, d := range skip {
		s.skipOpen(d, s.marks[d]&tried != 0)
	}
	attempts := 0
	// A pass goes once over the order; later passes are retries, after a
	// backoff. Skipped deployments (admit said no) do not count as attempts.
	for pass := 0; attempts < a.MaxAttempts; pass++ {
		progressed := false
		for i := 0; i < len(order) && attempts < a.MaxAttempts; i++ {
			d := order[i]
			if s.marks[d]&broken != 0 {
				continue
			}
			retry := s.marks[d]&tried != 0
			if ok, stop := s.admit(d, pass, retry); stop {
				return verdictNoFallback
			} else if !ok {
				continue
			}
			attempts++
			progressed = true
			s.marks[d] |= tried
			var v verdict
			// Hedge only a first try, with a next deployment not tried yet and room
			// left for a second attempt: a hedge is never a retry (retries must go
			// through the retry budget) and never exceeds MaxAttempts.
			if a.Hedge.Enabled && !retry && i+1 < len(order) && attempts < a.MaxAttempts && s.marks[order[i+1]]&tried == 0 {
				var usedBackup bool
				v, usedBackup = s.hedged(d, order[i+1])
				// The backup was this pass's next deployment: it counts as an attempt
				// and is not tried again in this pass.
				if usedBackup {
					attempts++
					s.marks[order[i+1]] |= tried
					i++
				}
			} else {
				v = s.attempt(d, retry)
			}
			if v != verdictNext {
				return v
			}
		}
		// Nothing could be tried in a whole pass (every deployment broken, open
		// or refused by the retry budget): another pass would do the same.
		if !progressed {
			break
		}
	}
	return verdictNext
}

// fallBack moves the request to its fallback alias after its own failed
// before the first token (v says how), and reports whether it did. The
// deadline stays; what the request did with a deployment (tried, broken)
// carries over to the same deployment in the fallback alias.
func (s *session) fallBack(v verdict) bool {
	if s.next == nil || s.gone() || s.ctx.Err() != nil {
		return false
	}
	if v == verdictNoFallback && chat.AsError(s.lastErr).Category != chat.CategoryContextLength {
		return false // the request was at fault: the fallback would refuse it too
	}
	a, err := s.r.lookup(s.next.Model)
	if err != nil {
		return false
	}
	// The fallback alias has deployments of its own (other pointers), some of
	// them the same upstream: a deployment broken or tried for the first alias
	// is so for the second, matched by ID.
	marks := map[*deployment]mark{}
	for _, d := range a.deps {
		for old, m := range s.marks {
			if old.ID == d.ID {
				marks[d] |= m
			}
		}
	}
	s.rep.Alias = s.alias.Name + FellBackTo + a.Name
	s.rep.Fallback = a.Name
	s.alias, s.req, s.next, s.marks, s.fallback = a, s.next, nil, marks, true
	return true
}

// abort ends the stream with err. A chunk passed by value takes 128 bytes
// of its caller's frame, and run's frame is under every chunk's write.
//
//go:noinline
func (s *session) abort(err error) {
	s.yield(chat.Chunk{}, err)
}

// admit decides whether d may be tried now, waiting out its cooldown or
// the backoff of a later pass when the deadline allows; a deployment it
// skips is recorded as an attempt that did not start. stop means the
// request's deadline passed or the caller left while waiting.
func (s *session) admit(d *deployment, pass int, retry bool) (ok, stop bool) {
	// Checked first: once the deadline passed or the caller left, no wait and
	// no report entry for the deployment.
	if s.ctx.Err() != nil {
		return false, true
	}
	now := time.Now()
	wait := time.Duration(0)
	if cd := d.health.cooldownUntil(); cd.After(now) {
		wait = cd.Sub(now)
	}
	if pass > 0 {
		wait = max(wait, s.backoff(pass))
	}
	// A wait that ends at or after the deadline leaves no time for the
	// attempt: skip it now rather than sleep into the deadline.
	if wait > 0 && !s.rep.Deadline.IsZero() && !now.Add(wait).Before(s.rep.Deadline) {
		s.rep.add(Attempt{Deployment: d.ID, Start: now, End: now, Outcome: OutcomeRetryAfter, Retry: retry, Fallback: s.fallback})
		return false, false
	}
	// Before the sleep: a retry refused by the budget does not wait first.
	if retry && !s.r.budget.tryRetry(now) {
		s.rep.add(Attempt{Deployment: d.ID, Start: now, End: now, Outcome: OutcomeRetryBudget, Retry: true, Fallback: s.fallback})
		return false, false
	}
	if wait > 0 && !sleep(s.ctx, wait) {
		return false, true
	}
	// Asked after the wait, with the time after it: the circuit may have
	// opened meanwhile, or its half-open probe been taken. Without a spare
	// left, allow lets an open deployment through (panic routing).
	if !d.health.allow(time.Now(), s.spare > 0) {
		// It opened, or another request took its probe, since order.
		s.spare--
		s.marks[d] |= broken
		s.skipOpen(d, retry)
		return false, false
	}
	return true, false
}

// skipOpen records that d was skipped because its circuit is open.
func (s *session) skipOpen(d *deployment, retry bool) {
	now := time.Now()
	s.rep.add(Attempt{Deployment: d.ID, Start: now, End: now, Outcome: OutcomeCircuitOpen, Retry: retry, Fallback: s.fallback})
	// An upstream's own error, if any came, says more than "circuit open":
	// this is only the error of last resort.
	if s.lastErr == nil {
		s.lastErr = &chat.Error{Category: chat.CategoryUpstreamUnavailable, Provider: d.ID, Message: "circuit open: the deployment is failing", Retryable: true}
	}
}

// neutral reports whether a failure says nothing about the deployment's
// health (see BreakerConfig): the request caused or asked for it, or the
// upstream only asked to wait.
func neutral(ce *chat.Error) bool {
	switch {
	case ce.ClientInduced || ce.RetryAfter > 0:
		return true
	case ce.Category == chat.CategoryAuth || ce.Category == chat.CategoryNotFound:
		return false // a bad key or model: the deployment's own
	case ce.Category == chat.CategoryRateLimited:
		return ce.Retryable // unless a quota is spent or a bill unpaid
	case ce.Status >= 400 && ce.Status < 500:
		return true
	}
	switch ce.Category {
	case chat.CategoryInvalidRequest, chat.CategoryContextLength, chat.CategoryContentFilter:
		return true
	}
	return false
}

// induced reports whether err is a failure the request asked for.
func induced(err error) bool {
	var ce *chat.Error
	return errors.As(err, &ce) && ce.ClientInduced
}

// gone reports whether the caller went away (as opposed to the request's
// deadline passing, which the caller's context may also carry).
func (s *session) gone() bool {
	// The caller's context ends at the request's deadline too (the call
	// sets it), so its error alone does not say the client left: a
	// deadline's cause is ErrDeadline (or, from a plain WithDeadline,
	// DeadlineExceeded).
	err := s.ctx.Err()
	return err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(context.Cause(s.ctx), chat.ErrDeadline)
}

// fail ends a request that no deployment served.
func (s *session) fail() {
	// The first match wins: a caller that left gets its own cause, whatever
	// else happened; then the deadline; then the last upstream error, which is
	// the most specific failure the request met.
	switch {
	case s.gone():
		s.yield(chat.Chunk{}, context.Cause(s.ctx))
	case s.ctx.Err() != nil:
		s.yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryTimeout, Message: "no deployment answered before the request's deadline", Err: chat.ErrDeadline})
	case s.lastErr != nil:
		s.yield(chat.Chunk{}, s.lastErr)
	default:
		s.yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "no deployment is available", Retryable: true})
	}
}

func (s *session) backoff(pass int) time.Duration {
	a := s.alias
	// Exponential, capped; the shift is bounded and a result that overflowed
	// (d <= 0) takes the cap. jitter draws uniformly from (0, d]: full jitter,
	// so retries of many requests do not fall in step.
	d := a.BackoffBase << min(pass-1, 16)
	if d > a.BackoffMax || d <= 0 {
		d = a.BackoffMax
	}
	return s.r.jitter(d)
}

func sleep(ctx context.Context, d time.Duration) bool {
	// A timer, not time.After: it is stopped (and freed) when ctx ends first.
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// attempt runs one attempt and streams it to the caller if it produces a
// first token in time.
func (s *session) attempt(d *deployment, retry bool) verdict {
	a := s.open(d, retry, false)
	// Whatever the verdict, the upstream is released when the attempt ends.
	defer a.close()
	a.first()
	if !a.inTime() {
		return s.beforeFirst(a.d, a.idx, a.ctx, a.err, &a.t)
	}
	return a.serve()
}

// try is one attempt: its upstream, read chunk by chunk, and what it
// produced. Every attempt, hedged or not, goes the same way: first waits
// for its first answer, inTime tells whether it came before the
// first-token timer fired, and serve passes the winner on to the end.
type try struct {
	s      *session
	d      *deployment
	idx    int
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	ftt    time.Duration
	up     provider.Reader

	// What first read: the chunks with nothing visible before the first
	// answer (held until the attempt wins), and the answer: a chunk
	// (head), the end of a stream that showed nothing (empty), or the
	// error that ended it.
	pending []chat.Chunk
	head    chat.Chunk
	empty   bool
	err     error
	// thinking: head is thinking, not yet the answer.
	thinking bool
	// watched: the timer is the stall timer (see watch); set on the
	// session's goroutine, read by the timer's.
	watched atomic.Bool
	// reading and closed: see expire.
	reading atomic.Int64
	closed  atomic.Bool

	// For a hedged pair (see hedged): res reports that first returned,
	// on the attempt's goroutine; done that it was received.
	res  chan struct{}
	done bool

	// mu guards t while first may run on a hedge's goroutine: the
	// session reads the tally of an attempt that lost the race while it
	// may still be reading.
	mu sync.Mutex
	t  tally
}

// open starts an attempt on d: its context, first-token timer, report
// and upstream request.
func (s *session) open(d *deployment, retry, hedge bool) *try {
	// The timer starts before the request is sent: the first-token timeout
	// covers connecting and sending as well as the upstream's thinking. It
	// cancels only this attempt's context, with a cause that failedBeforeFirst
	// tells from the request's deadline.
	ftt := s.alias.firstTokenTimeout(d)
	a := &try{s: s, d: d, ftt: ftt}
	a.ctx, a.cancel = context.WithCancelCause(s.ctx)
	// One timer for the attempt: its first-token timer, then (watched) its
	// stall timer.
	a.timer = time.AfterFunc(ftt, a.expire)
	a.idx = s.rep.add(Attempt{Deployment: d.ID, Start: time.Now(), FirstTokenTimeout: ftt, Retry: retry, Hedge: hedge, Fallback: s.fallback, Continued: s.cont.resuming})
	// Counted as outstanding (for the balancing score) until finish ends it:
	// every attempt opened is finished exactly once.
	d.health.begin()
	// Each attempt gets its own copy: its Model is the deployment's, and the
	// request as asked stays intact for the other attempts and the fallback.
	req := s.req.Clone()
	req.Model = d.Model
	if s.cont.resuming {
		req = s.continuation(req, d)
	}
	a.up = pull(a.ctx, d.Provider, req)
	return a
}

// close releases an attempt whose upstream is no longer read.
func (a *try) close() {
	// Close first, aborting the upstream request; cancel(nil) keeps an
	// earlier cause (a timeout, a lost hedge) if there was one.
	a.up.Close()
	a.closed.Store(true)
	a.timer.Stop()
	a.cancel(nil)
}

// first reads the upstream until its first answer: a chunk that shows
// something, ends a choice or carries the final usage; the end of a
// stream that showed nothing; or an error. The chunks before it show
// nothing: they are held (and tallied: they may carry usage the provider
// reported).
func (a *try) first() {
	for {
		c, err := a.up.Next()
		if err == io.EOF {
			a.empty = true
			return
		}
		if err != nil {
			a.err = err
			return
		}
		// What counts as the first token: a role-only or empty delta does not,
		// so a provider that sends one at once cannot beat its first-token timer
		// with nothing to show.
		answers := c.Visible() || c.FinishReason != "" || c.Usage != nil
		a.mu.Lock()
		a.t.add(c)
		a.mu.Unlock()
		// Copied, here and into pending: the reader's chunk is valid only
		// until its next call. Thinking is progress too: a model that thinks
		// is not stuck, so it stops the first-token timer and wins a hedge
		// race; but it is not the answer (see serve).
		if answers || c.Thinks() {
			a.head = *c
			a.thinking = !answers
			return
		}
		a.pending = append(a.pending, *c)
	}
}

// inTime reports whether the attempt's first answer came before its
// first-token timer fired, stopping the timer. An answer that came as the
// timer fired was produced all the same, too late: the attempt fails with
// the timer's cause.
func (a *try) inTime() bool {
	// Stop fails if the timer fired. The attempt's context may also have
	// ended with the request's (the deadline, the caller): the cause says
	// which, and failedBeforeFirst tells them apart.
	if !a.timer.Stop() && a.err == nil && a.ctx.Err() != nil {
		a.err = context.Cause(a.ctx)
	}
	return a.err == nil
}

// serve streams the attempt, which answered in time, to the caller: what
// first held, its answer, then the rest of the upstream to its end.
//
// A stream's deepest moment is the write of a chunk, made under every
// iterator's frame at once; so this loop keeps to a small frame, and its
// rarer work (the endings) is in methods that return before the yield.
func (a *try) serve() verdict {
	s := a.s
	if s.thought {
		// An earlier attempt's thinking was shown and it failed: the
		// client drops it before this attempt's chunks.
		s.thought = false
		if !s.yield(chat.Chunk{Thought: &chat.Thought{Restart: true}}, nil) {
			return a.left()
		}
	}
	if a.thinking {
		if v, ok := a.think(); !ok {
			return v
		}
	}
	// From here on the caller sees this deployment's answer: no failure can
	// fall back any more (afterFirst).
	s.won(a.d, a.idx)
	for i := range a.pending {
		if !s.yield(a.pending[i], nil) {
			return s.stopped(a.d, a.idx)
		}
	}
	// The held chunks were passed on: drop them, they may be many.
	a.pending = nil
	if a.empty {
		// An answer with nothing visible, e.g. an empty completion: a
		// success all the same.
		return a.ended()
	}
	if !s.yield(a.head, nil) {
		return s.stopped(a.d, a.idx)
	}
	// An answer that may be continued is kept, and watched for stalls.
	on := s.cont.on
	if on {
		a.watch()
	}
	for {
		c, err := a.up.Next()
		if err == io.EOF {
			return a.ended()
		}
		if err != nil {
			return a.broke(err)
		}
		// No lock: a hedge's goroutine has reported before serve runs. Tallied
		// before the yield, so a cut at the deadline counts what was passed on.
		a.t.add(c)
		if on {
			a.progress(c)
		}
		if !s.yield(*c, nil) {
			return s.stopped(a.d, a.idx)
		}
		if on {
			a.rearm()
		}
	}
}

// think streams an attempt's thinking to the caller as it comes, until its
// first answer (which it leaves in head for serve: ok). Thinking shows the
// caller something but commits nothing: a failure before the answer is a
// failure before the first token, and the walk goes on (v), the caller
// told by a restart (see serve) to drop what it was shown.
//
//go:noinline
func (a *try) think() (v verdict, ok bool) {
	s := a.s
	s.thought = true
	// Each thought re-arms the first-token timer: a model that thinks is
	// not stuck, one that went as quiet as that while thinking is.
	a.timer.Reset(a.ftt)
	for i := range a.pending {
		if !s.yield(a.pending[i], nil) {
			return a.left(), false
		}
	}
	a.pending = nil
	if !s.yield(a.head, nil) {
		return a.left(), false
	}
	for {
		c, err := a.up.Next()
		if err == io.EOF {
			// Thinking and nothing else: an empty answer, served.
			a.timer.Stop()
			s.thought = false
			a.empty = true
			return 0, true
		}
		if err != nil {
			return s.beforeFirst(a.d, a.idx, a.ctx, err, &a.t), false
		}
		a.t.add(c)
		if c.Visible() || c.FinishReason != "" || c.Usage != nil {
			if !a.inTime() {
				return s.beforeFirst(a.d, a.idx, a.ctx, a.err, &a.t), false
			}
			s.thought = false
			a.head = *c
			return 0, true
		}
		a.timer.Reset(a.ftt)
		if !s.yield(*c, nil) {
			return a.left(), false
		}
	}
}

// left ends an attempt whose caller left before its first answer: none
// was won, so what it cost (the thinking it streamed) is billed as an
// attempt's (see spend).
func (a *try) left() verdict {
	v := a.s.stopped(a.d, a.idx)
	a.s.spend(a.idx, &a.t)
	return v
}

// ended closes an attempt whose stream ended without an error.
func (a *try) ended() verdict {
	a.s.finish(a.d, a.idx, OutcomeOK, nil, false, false)
	return verdictDone
}

// pull returns p's answer to req as a reader: a provider.Puller's own, or
// its stream's, pulled through iter.Pull2.
func pull(ctx context.Context, p provider.Provider, req *chat.Request) provider.Reader {
	// A Puller is read directly; any other provider's iterator is pulled
	// through a coroutine, which Close (stop) must release.
	if pl, ok := p.(provider.Puller); ok {
		return pl.Pull(ctx, req)
	}
	next, stop := iter.Pull2(iter.Seq2[chat.Chunk, error](p.Stream(ctx, req)))
	return &seqReader{next: next, stop: stop}
}

// seqReader reads a chat.Stream chunk by chunk.
type seqReader struct {
	next func() (chat.Chunk, error, bool)
	stop func()
	c    chat.Chunk
}

func (r *seqReader) Next() (*chat.Chunk, error) {
	c, err, ok := r.next()
	switch {
	case !ok:
		return nil, io.EOF
	case err != nil:
		return nil, err
	}
	// Kept in the reader: Next returns a pointer without an allocation per
	// chunk, valid until the next call as the Reader contract allows.
	r.c = c
	return &r.c, nil
}

func (r *seqReader) Close() { r.stop() }

// won records that attempt idx produced the first token.
func (s *session) won(d *deployment, idx int) {
	now := time.Now()
	at := &s.rep.Attempts[idx]
	at.FirstToken = now
	at.Outcome = OutcomeOK // serving; changed if it fails later
	// The request's first token is the winner's: a report read mid-stream
	// names the deployment serving (a continuation's, once one serves).
	if s.rep.FirstToken.IsZero() {
		s.rep.FirstToken = now
	}
	s.rep.Deployment = d.ID
	s.rep.Model = d.Model
}

// finish closes attempt idx and feeds the deployment's health.
func (s *session) finish(d *deployment, idx int, o Outcome, err error, failed, neutral bool) {
	now := time.Now()
	at := &s.rep.Attempts[idx]
	at.End = now
	at.Outcome = o
	if err != nil {
		at.Error = err.Error()
		var ce *chat.Error
		if errors.As(err, &ce) {
			at.Status = ce.Status
		}
	}
	var ttft time.Duration
	// Only a real first token is a latency sample: a failure's time says
	// nothing about how fast the deployment answers.
	if !at.FirstToken.IsZero() {
		ttft = at.FirstToken.Sub(at.Start)
	}
	d.health.end(now, ttft, failed, neutral)
}

// spend records what attempt idx, which did not give the answer, cost
// (see Attempt.Usage). An attempt the router gave up on (a first-token
// timeout, a deadline, a client that left, a lost hedge) is billed even
// if nothing came back: the upstream may have read the prompt. One that
// ended on an error before anything came back is not.
func (s *session) spend(idx int, t *tally) {
	// spend reads the outcome finish wrote: call it after finish.
	at := &s.rep.Attempts[idx]
	at.Usage = t.spent(s.asked(), at.Outcome != OutcomeError)
}

// stopped ends an attempt the caller broke out of: no error is yielded
// (yield must not be called again after it returned false), and leaving
// says nothing of the deployment.
func (s *session) stopped(d *deployment, idx int) verdict {
	s.finish(d, idx, OutcomeCancelled, nil, false, true)
	return verdictDone
}

// beforeFirst handles a failure before the first token: the caller has
// seen nothing, so another deployment may still serve the request. t is
// what the attempt produced, for what it cost.
func (s *session) beforeFirst(d *deployment, idx int, actx context.Context, err error, t *tally) verdict {
	// Checked first: when the caller left, the attempt's error is only the
	// echo of that, and the deployment is not blamed.
	if s.gone() {
		s.finish(d, idx, OutcomeCancelled, context.Cause(s.ctx), false, true)
		s.spend(idx, t)
		s.yield(chat.Chunk{}, context.Cause(s.ctx))
		return verdictDone
	}
	v := s.failedBeforeFirst(d, idx, actx, err)
	s.spend(idx, t)
	return v
}

// failedBeforeFirst closes an attempt that failed before the first token
// while the caller waits, and says what to do next.
func (s *session) failedBeforeFirst(d *deployment, idx int, actx context.Context, err error) verdict {
	switch {
	// Whatever the upstream said, once the deadline passed the deadline is the
	// cause (its error is usually the cancelled read): nobody is blamed and no
	// other deployment may be tried.
	case s.ctx.Err() != nil:
		s.finish(d, idx, OutcomeDeadline, chat.ErrDeadline, false, true)
		return verdictNoFallback
	case errors.Is(context.Cause(actx), chat.ErrFirstTokenTimeout):
		// A timeout the request asked for (a sim delay) is not the deployment's
		// fault; another deployment may still answer in time, hence verdictNext.
		asked := induced(err)
		err = &chat.Error{Category: chat.CategoryTimeout, Provider: d.ID, Retryable: true, Err: chat.ErrFirstTokenTimeout,
			Message: fmt.Sprintf("no first token within %s", s.rep.Attempts[idx].FirstTokenTimeout)}
		s.finish(d, idx, OutcomeFirstTokenTimeout, err, true, asked)
		s.lastErr = err
		return verdictNext
	}
	ce := chat.AsError(err)
	if ce.Provider == "" {
		ce.Provider = d.ID
	}
	// Kept for fail: if nothing else serves, the client gets the last
	// upstream error, not a generic one.
	s.lastErr = ce
	if ce.RetryAfter > 0 && !ce.ClientInduced {
		// A Retry-After the request asked for (a sim directive) holds
		// back nobody else.
		d.health.setCooldown(time.Now().Add(ce.RetryAfter))
	}
	switch {
	case ce.Retryable:
		s.finish(d, idx, OutcomeError, ce, true, neutral(ce))
		return verdictNext
	case ce.Category == chat.CategoryAuth || ce.Category == chat.CategoryNotFound || ce.Category == chat.CategoryUpstreamUnavailable || ce.Category == chat.CategoryRateLimited:
		// This deployment is misconfigured (a bad key, model or
		// base_url) or its account cannot pay (a rate limit that is not
		// retryable): another may be fine; this one is not asked again.
		s.finish(d, idx, OutcomeError, ce, true, neutral(ce))
		s.marks[d] |= broken
		return verdictNext
	}
	// The request itself is at fault: no other deployment will take it.
	s.finish(d, idx, OutcomeError, ce, false, true)
	return verdictNoFallback
}

// afterFirst handles a failure after the first token: the caller has seen
// text from this deployment, so there is no silent switch. The deadline
// cuts the stream with a timeout ending that keeps what was written; other
// failures continue the answer when the alias's policy allows it
// (verdictContinue, see resume), else are passed on as the stream's error.
func (s *session) afterFirst(d *deployment, idx int, t *tally, err error) verdict {
	switch {
	case s.gone():
		s.finish(d, idx, OutcomeCancelled, context.Cause(s.ctx), false, true)
		s.yield(chat.Chunk{}, context.Cause(s.ctx))
	// Cut, not failed: what was written is the answer, ended with
	// FinishTimeout and estimated usage.
	case s.ctx.Err() != nil:
		s.finish(d, idx, OutcomeDeadline, chat.ErrDeadline, false, true)
		s.cut(t)
	default:
		s.finish(d, idx, OutcomeMidStreamError, err, true, neutral(chat.AsError(err)))
		if s.mayContinue(t, err) {
			return s.continueAfter(d, idx, t, err)
		}
		if s.cont.req != nil && !s.ended(t) {
			return verdictDone
		}
		s.yield(chat.Chunk{}, err)
	}
	return verdictDone
}

// cut ends every open choice with FinishTimeout and estimated usage.
func (s *session) cut(t *tally) {
	open := t.Open()
	if len(open) == 0 && t.Finish != "" {
		// Every choice had finished; the deadline only cut the wait for
		// the end of the stream (a usage chunk, [DONE]). A finish reason
		// is never sent twice: the usage alone ends it.
		s.yield(chat.Chunk{Usage: t.usage(s.asked())}, nil)
		return
	}
	if len(open) == 0 {
		open = []int{0}
	}
	// Usage goes on the last chunk only, so it is counted once.
	for i, ch := range open {
		c := chat.Chunk{Choice: ch, FinishReason: chat.FinishTimeout}
		if i == len(open)-1 {
			c.Usage = t.usage(s.asked())
		}
		if !s.yield(c, nil) {
			return
		}
	}
}

// tally tracks what an attempt produced (chat.Tally): what was passed to
// the caller, for estimated usage when a stream is cut, and for an attempt
// that did not give the answer, what it cost.
type tally struct{ chat.Tally }

// add counts c, first dropping usage no provider could mean: the request
// is then metered as if none came (estimated, and flagged as missing),
// and the client is not shown it.
func (t *tally) add(c *chat.Chunk) {
	if c.Usage != nil && !c.Usage.Plausible() {
		c.Usage = nil
	}
	if c.UsageSoFar != nil && !c.UsageSoFar.Plausible() {
		c.UsageSoFar = nil
	}
	t.Add(c)
}

// usage is the provider's usage, or what it reported so far with an
// estimate of the rest (see chat.EstimateUsage).
func (t *tally) usage(req *chat.Request) *chat.Usage {
	u := t.Usage(req)
	return &u
}

// spent is what an attempt that did not give the answer cost: its usage,
// or nil when nothing came back and the router did not give up on it
// (see session.spend).
func (t *tally) spent(req *chat.Request, gaveUp bool) *chat.Usage {
	if t.Chunks == 0 && !gaveUp {
		return nil
	}
	return t.usage(req)
}
