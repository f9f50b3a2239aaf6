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
func (s *session) race(d *deployment, hedge bool) *try {
	a := s.open(d, false, hedge)
	a.res = make(chan struct{}, 1)
	go func() {
		a.first()
		a.res <- struct{}{}
	}()
	return a
}

// spendRunner records what attempt a, which did not give the answer, has
// cost so far (see session.spend); its goroutine may still be reading.
func (s *session) spendRunner(a *try) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s.spend(a.idx, &a.t)
}

// abandon cancels an attempt of the race that is no longer wanted and
// releases it once its goroutine has reported.
func (a *try) abandon(cause error) {
	a.cancel(cause)
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
func (s *session) hedged(primary, backup *deployment) (verdict, bool) {
	// Attempts abandoned before they answered are billed when they are
	// dropped, and again when the request ends, with what they had
	// produced by then (a token already on its way, say).
	var dropped []*try
	defer func() {
		for _, a := range dropped {
			s.spendRunner(a)
		}
	}()
	p := s.race(primary, false)
	var b *try
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
			if b == nil && s.dctx.Err() == nil {
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
			for _, other := range []*try{p, b} {
				if other != nil && other != got && !other.done {
					s.finish(other.d, other.idx, OutcomeHedgeLost, nil, false, true)
					other.abandon(errHedgeLost)
					s.spendRunner(other)
					dropped = append(dropped, other)
					live--
				}
			}
			defer got.close()
			return got.serve(), b != nil
		}
		// Its goroutine has reported: its tally is the session's now.
		v = s.beforeFirst(got.d, got.idx, got.ctx, got.err, &got.t)
		got.close()
		if v != verdictNext {
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
		if got == p && b == nil && s.dctx.Err() == nil {
			// The primary failed before the hedge delay: fall back now.
			b = s.race(backup, false)
			live++
		}
	}
	return v, b != nil
}
