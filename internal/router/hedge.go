package router

import (
	"context"
	"errors"
	"time"
)

// errHedgeLost cancels the attempt that did not produce a token first.
var errHedgeLost = errors.New("another attempt answered first")

// race starts an attempt of a hedged pair: its goroutine waits for the
// first answer (try.first) and reports on res; the winner is then served
// on the session's goroutine, as any attempt is.
//
// Ownership: until it reports, the goroutine alone reads the upstream and
// writes the attempt's pending, head, empty and err (t under a.mu). The
// send on res hands the attempt back: once hedged has received it (done),
// the session's goroutine reads those fields without a lock. Only first
// runs on the goroutine; serving, closing and the report stay on the
// session's, so the stream's chunks pass through one goroutine as
// unhedged ones do.
func (s *session) race(d *deployment, hedge bool) *try {
	a := s.open(d, false, hedge)
	// Buffered: the goroutine ends as soon as first returns, whether
	// hedged is waiting on res, has moved on, or left it to abandon.
	a.res = make(chan struct{}, 1)
	go func() {
		a.first()
		a.res <- struct{}{}
	}()
	return a
}

// spendRunner records what attempt a, which did not give the answer, has
// cost so far (see session.spend); its goroutine may still be reading.
// The lock makes the tally a consistent count of the chunks read so far;
// the report it writes is the session's, on the session's goroutine.
func (s *session) spendRunner(a *try) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s.spend(a.idx, &a.t)
}

// abandon cancels an attempt of the race that is no longer wanted and
// releases it once its goroutine has reported.
//
// A provider.Reader is read by one goroutine at a time (an iter.Pull2
// reader must not be stopped while its next runs): Close must not run
// while first may be inside Next. So the cancel comes first (the
// upstream's Next then returns promptly with the cause), and an attempt
// still running is closed by a goroutine that waits for its report. That
// goroutine ends because the cancelled read ends; nothing waits for it,
// so the winner's stream is never held up by the loser's teardown.
func (a *try) abandon(cause error) {
	a.cancel(cause)
	// The first-token timer would only cancel an already cancelled
	// context; stopping it releases it now.
	a.timer.Stop()
	if a.done {
		a.up.Close()
		return
	}
	go func() {
		<-a.res
		a.up.Close()
	}()
}

// hedged runs primary, starting backup if primary has no token after the
// hedge delay (or at once if primary fails first). The first to answer in
// time wins and is served; the other is cancelled and billed for what it
// did. It reports whether backup was used.
//
// The loop receives each started attempt's report once: live counts
// those not received yet, and an attempt already received (done) has a
// nil channel in the select, so the select waits only on what can still
// report. Every attempt opened here is finished (finish, which feeds its
// deployment's health) exactly once: the winner by serve, a failure by
// beforeFirst, the others when they are abandoned.
func (s *session) hedged(primary, backup *deployment) (verdict, bool) {
	// Attempts abandoned before they answered are billed when they are
	// dropped, and again when the request ends, with what they had
	// produced by then (a token already on its way, say).
	var dropped []*try
	// Deferred before any other defer below, so it runs last: after the
	// winner was served to the end and closed.
	defer func() {
		for _, a := range dropped {
			s.spendRunner(a)
		}
	}()
	p := s.race(primary, false)
	var b *try
	// The hedge delay counts from the primary's start; the timer is never
	// reset, so it fires (and starts a backup) at most once.
	hedgeTimer := time.NewTimer(s.alias.hedgeDelay(primary, p.ftt))
	defer hedgeTimer.Stop()
	live := 1
	v := verdictNext
	for live > 0 {
		var bres chan struct{}
		if b != nil && !b.done {
			bres = b.res
		}
		var pres chan struct{}
		if !p.done {
			pres = p.res
		}
		var got *try
		select {
		case <-hedgeTimer.C:
			// No backup if one already runs (the primary failed first
			// and the backup started as a plain fallback), nor once the
			// deadline passed or the caller left: it could not be served.
			if b == nil && s.ctx.Err() == nil {
				b = s.race(backup, true)
				live++
			}
			continue
		case <-pres:
			got = p
		case <-bres:
			got = b
		}
		got.done = true
		live--
		if got.inTime() {
			// got produced its first token (or finished empty): it wins.
			// The other is finished as hedge_lost (neutral: losing says
			// nothing of its deployment's health), then cancelled; its
			// report is never read. finish comes before spendRunner:
			// spend reads the outcome (a loser is billed even if nothing
			// came back yet, since the upstream may have read the prompt).
			for _, other := range []*try{p, b} {
				if other != nil && other != got && !other.done {
					s.finish(other.d, other.idx, OutcomeHedgeLost, nil, false, true)
					other.abandon(errHedgeLost)
					s.spendRunner(other)
					dropped = append(dropped, other)
					live--
				}
			}
			// serve runs on this goroutine, to the stream's end; the
			// winner's upstream is released after it, before the losers
			// are billed a last time.
			defer got.close()
			sv := got.serve()
			// A winner that only thought, then failed, leaves the walk to go
			// on; the primary's backup it beat was cancelled unheard, and is
			// tried on its turn.
			return sv, b != nil && !(sv == verdictNext && got == p)
		}
		// Its goroutine has reported: its tally is the session's now.
		v = s.beforeFirst(got.d, got.idx, got.ctx, got.err, &got.t)
		got.close()
		if v != verdictNext {
			// The deadline passed, the caller left or the request was at
			// fault: the other attempt cannot help, whether or not it
			// would have answered. It is cancelled, not a lost hedge.
			for _, other := range []*try{p, b} {
				if other != nil && !other.done {
					s.finish(other.d, other.idx, OutcomeCancelled, nil, false, true)
					other.abandon(context.Canceled)
					s.spendRunner(other)
					dropped = append(dropped, other)
				}
			}
			return v, b != nil
		}
		if got == p && b == nil && s.ctx.Err() == nil {
			// The primary failed before the hedge delay: fall back now.
			// It is not flagged as a hedge: nothing raced it.
			b = s.race(backup, false)
			live++
		}
		// Otherwise the loop waits for the attempt still running, if any;
		// when both failed, the walk goes on past the pair.
	}
	return v, b != nil
}
