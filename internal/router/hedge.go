package router

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/chat"
)

// errHedgeLost cancels the attempt that did not produce a token first.
var errHedgeLost = errors.New("another attempt answered first")

// runner is one attempt of a hedged pair. Its goroutine pulls until the
// first token (or failure) and reports on res; the winner is then pulled to
// the end on the session's goroutine.
type runner struct {
	d       *deployment
	idx     int
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	ftt     time.Duration
	next    func() (chat.Chunk, error, bool)
	stop    func()
	pending []chat.Chunk
	res     chan first
	done    bool // its result was received

	// mu guards t, what the runner's goroutine pulled, which the session
	// reads to bill a runner that lost while it may still be pulling.
	mu sync.Mutex
	t  tally
}

type first struct {
	chunk chat.Chunk
	err   error
	ended bool // the stream ended with nothing visible
}

func (s *session) startRunner(d *deployment, hedge bool) *runner {
	ftt := s.alias.firstTokenTimeout(d)
	ctx, cancel := context.WithCancelCause(s.dctx)
	r := &runner{d: d, ctx: ctx, cancel: cancel, ftt: ftt, res: make(chan first, 1)}
	r.timer = time.AfterFunc(ftt, func() { cancel(chat.ErrFirstTokenTimeout) })
	r.idx = s.rep.add(Attempt{Deployment: d.ID, Start: time.Now(), FirstTokenTimeout: ftt, Hedge: hedge, Fallback: s.fallback})
	d.health.begin()
	req := s.req.Clone()
	req.Model = d.Model
	r.next, r.stop = iter.Pull2(iter.Seq2[chat.Chunk, error](d.Provider.Stream(ctx, req)))
	go func() {
		for {
			c, err, ok := r.next()
			switch {
			case !ok:
				r.res <- first{ended: true}
				return
			case err != nil:
				r.res <- first{err: err}
				return
			}
			// Tallied a copy: the chunk goes on as it came.
			answers := c.Visible() || c.FinishReason != "" || c.Usage != nil
			tc := c
			r.mu.Lock()
			r.t.add(&tc)
			r.mu.Unlock()
			if answers {
				r.res <- first{chunk: c}
				return
			}
			r.pending = append(r.pending, c)
		}
	}()
	return r
}

// spend records what runner r, which did not give the answer, has cost so
// far (see session.spend); its goroutine may still be pulling.
func (s *session) spendRunner(r *runner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.spend(r.idx, &r.t)
}

// abandon cancels a runner that is no longer wanted and releases it once
// its goroutine has reported.
func (r *runner) abandon(cause error) {
	r.cancel(cause)
	r.timer.Stop()
	if r.done {
		r.stop()
		return
	}
	go func() {
		<-r.res
		r.stop()
	}()
}

// hedged runs primary, starting backup if primary has no token after the
// hedge delay (or at once if primary fails first). It reports whether
// backup was used.
func (s *session) hedged(primary, backup *deployment) (verdict, bool) {
	// Runners abandoned before they answered are billed when they are
	// dropped, and again when the request ends, with what they had
	// produced by then (a token already on its way, say).
	var dropped []*runner
	defer func() {
		for _, r := range dropped {
			s.spendRunner(r)
		}
	}()
	p := s.startRunner(primary, false)
	var b *runner
	hedgeTimer := time.NewTimer(s.alias.hedgeDelay(primary, p.ftt))
	defer hedgeTimer.Stop()
	live := 1
	v := verdictNext
	for live > 0 {
		var bres chan first
		if b != nil && !b.done {
			bres = b.res
		}
		var pres chan first
		if !p.done {
			pres = p.res
		}
		var got *runner
		var res first
		select {
		case <-hedgeTimer.C:
			if b == nil && s.dctx.Err() == nil {
				b = s.startRunner(backup, true)
				live++
			}
			continue
		case res = <-pres:
			got = p
		case res = <-bres:
			got = b
		}
		got.done = true
		live--
		if res.err == nil {
			// got produced its first token (or finished empty): it wins.
			if !got.timer.Stop() && got.ctx.Err() != nil {
				res.err = context.Cause(got.ctx)
			} else {
				for _, other := range []*runner{p, b} {
					if other != nil && other != got && !other.done {
						s.finish(other.d, other.idx, OutcomeHedgeLost, nil, false, true)
						other.abandon(errHedgeLost)
						s.spendRunner(other)
						dropped = append(dropped, other)
						live--
					}
				}
				return s.serve(got, res), b != nil
			}
		}
		got.timer.Stop()
		// Its goroutine has reported: its tally is the session's now.
		v = s.beforeFirst(got.d, got.idx, got.ctx, res.err, &got.t)
		got.stop()
		if v != verdictNext {
			for _, other := range []*runner{p, b} {
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
			b = s.startRunner(backup, false)
			live++
		}
	}
	return v, b != nil
}

// serve streams the winner to the caller on this goroutine.
func (s *session) serve(r *runner, res first) verdict {
	defer r.stop()
	defer r.cancel(nil)
	s.won(r.d, r.idx)
	var t tally
	for _, c := range r.pending {
		t.add(&c)
		if !s.yield(c, nil) {
			return s.stopped(r.d, r.idx)
		}
	}
	if !res.ended {
		t.add(&res.chunk)
		if !s.yield(res.chunk, nil) {
			return s.stopped(r.d, r.idx)
		}
		for {
			c, err, ok := r.next()
			if !ok {
				break
			}
			if err != nil {
				return s.afterFirst(r.d, r.idx, &t, err)
			}
			t.add(&c)
			if !s.yield(c, nil) {
				return s.stopped(r.d, r.idx)
			}
		}
	}
	s.finish(r.d, r.idx, OutcomeOK, nil, false, false)
	return verdictDone
}
