package levers

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/router"
)

// errEveryoneLeft cancels a shared upstream stream nobody reads any more.
var errEveryoneLeft = errors.New("every client of the shared stream left")

// flight is one upstream stream shared by identical requests. Its own
// goroutine pulls the upstream (the stream must outlive any one client);
// subscribers read its chunks from the start, at their own pace.
type flight struct {
	cancel context.CancelCauseFunc

	// mu guards everything below. The flight's goroutine appends under it;
	// each subscriber copies a chunk out under it and yields outside it, so
	// a slow client never holds up the upstream or the other subscribers.
	// The chunks are kept until the flight is dropped: a subscriber that
	// joins late replays the answer from its first chunk.
	mu     sync.Mutex
	chunks []chat.Chunk
	err    error
	done   bool
	wake   chan struct{} // closed and replaced at every change
	subs   int           // subscribers attached now
	snap   router.Report // the router's report, once the first token came
	final  int           // subscribers attached when the upstream finished
}

// coalesce joins the flight for key, starting it if there is none.
func (l *Levers) coalesce(ctx context.Context, p *plan, rep *Report, store bool, yield func(chat.Chunk, error) bool) {
	key := p.key
	// l.mu is held until the subscriber is counted: fly removes the flight
	// from the map under l.mu too, so a subscriber that found it there is
	// counted before fly can mark the flight done, and is among final.
	l.mu.Lock()
	f := l.flights[key]
	leader := f == nil
	if leader {
		f = &flight{wake: make(chan struct{})}
		// The leader's context without its cancellation: the stream must go on
		// if the leader leaves while others read. Its deadline is kept, with the
		// deadline's cause, so the upstream still ends at the leader's deadline
		// (each subscriber also ends at its own, in follow).
		fctx, cancel := chat.Detach(ctx)
		f.cancel = cancel
		l.flights[key] = f
		// The flight's goroutine: it alone reads the upstream and writes the
		// router's report; it ends when the stream ends or every subscriber left.
		go l.fly(fctx, p, f, store)
	}
	f.mu.Lock()
	f.subs++
	f.mu.Unlock()
	l.mu.Unlock()
	if !leader {
		rep.Coalesced = true
	}
	f.follow(ctx, rep, yield)
}

// fly pulls the upstream into the flight, then stores a complete answer.
func (l *Levers) fly(ctx context.Context, p *plan, f *flight, store bool) {
	// Releases fctx (and its deadline timer) when the upstream is done.
	defer f.cancel(nil)
	var rep router.Report
	published := false
	for c, err := range l.route(ctx, p, &rep) {
		f.mu.Lock()
		if err != nil {
			f.err = err
		} else {
			f.chunks = append(f.chunks, c)
			// Subscribers never see the live report, which the router writes on this
			// goroutine: they copy a snapshot, published once the first token came
			// and again when the flight ends.
			if !published && !rep.FirstToken.IsZero() {
				f.snap, published = snapshot(&rep), true
			}
		}
		f.broadcast()
		f.mu.Unlock()
		if err != nil {
			break
		}
	}
	// The answer is in the cache (or on its way there, and served from
	// memory meanwhile) before anyone is told it is finished, so a request
	// that follows a finished one finds it; saving does not wait for the
	// write. Late joiners must not find a finished flight: from here on
	// they start their own (or hit the cache).
	f.mu.Lock()
	chunks, failed := f.chunks, f.err != nil
	f.mu.Unlock()
	if store && !failed {
		l.save(ctx, p.key, p.req.Model, p.alias, &rep, chunks)
	}
	l.mu.Lock()
	delete(l.flights, p.key)
	l.mu.Unlock()
	f.mu.Lock()
	// final: the subscribers attached now share the bill; one that left
	// before is billed nothing, and none can join any more.
	f.done, f.snap, f.final = true, snapshot(&rep), f.subs
	f.broadcast()
	f.mu.Unlock()
}

// snapshot copies a report the router may still be writing.
func snapshot(rep *router.Report) router.Report {
	s := *rep
	s.Attempts = slices.Clone(rep.Attempts)
	return s
}

// broadcast wakes every subscriber. Call with mu held.
//
// A closed channel, unlike a sync.Cond, can be waited on in a select
// together with the subscriber's ctx.
func (f *flight) broadcast() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// follow delivers the flight's chunks to one subscriber, from the first.
func (f *flight) follow(ctx context.Context, rep *Report, yield func(chat.Chunk, error) bool) {
	// The route is the flight's; what the levers decided for this
	// subscriber (the rest of rep) stays its own: the flight may be
	// another alias's whose rule chose the same one.
	copyReport := func() {
		rep.Report = f.snap
		rep.Attempts = slices.Clone(f.snap.Attempts)
	}
	leave := func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.done {
			// It was attached at the end, so it is one of the final
			// subscribers: billed its part, as if it had read on,
			// for the parts to add up to the one upstream answer.
			copyReport()
			rep.BillShare = 1 / float64(f.final)
			rep.BillPart = [2]int{f.final - f.subs, f.final}
			f.subs--
			return
		}
		f.subs--
		if f.subs == 0 {
			// The last one pays for what the upstream did.
			f.cancel(errEveryoneLeft)
			return
		}
		rep.BillShare, rep.BillPart = 0, [2]int{0, 0}
	}
	i := 0
	var sent delivered
	for {
		f.mu.Lock()
		if i < len(f.chunks) {
			// Read under the lock: the flight's goroutine appends concurrently.
			c := f.chunks[i]
			i++
			if !f.snap.FirstToken.IsZero() {
				copyReport()
			}
			f.mu.Unlock()
			sent.add(&c)
			if !yield(c, nil) {
				leave()
				return
			}
			continue
		}
		if f.done {
			copyReport()
			if f.final > 0 {
				// Each of the final subscribers is billed its part of
				// the one upstream usage; the parts add up exactly.
				rep.BillShare = 1 / float64(f.final)
				rep.BillPart = [2]int{f.final - f.subs, f.final}
			}
			err := f.err
			f.subs--
			f.mu.Unlock()
			if err != nil {
				yield(chat.Chunk{}, err)
			}
			return
		}
		// Taken under the lock that saw nothing new: a change after the unlock
		// closes this very channel, so no wake-up is missed.
		wake := f.wake
		f.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			leave()
			// Its own deadline or its client ended this subscriber only; the flight
			// goes on for the others.
			sent.end(ctx, yield)
			return
		}
	}
}

// delivered tallies what one subscriber was sent (chat.Tally), to end its
// stream as the router ends one at its deadline.
type delivered struct{ chat.Tally }

func (d *delivered) add(c *chat.Chunk) { d.Add(c) }

// end ends a stream whose ctx is done: when its deadline passed after the
// first token, every open choice finishes with FinishTimeout and what was
// sent is kept (usage is then estimated from it); otherwise, an error.
func (d *delivered) end(ctx context.Context, yield func(chat.Chunk, error) bool) {
	cause := context.Cause(ctx)
	if !d.Visible || !errors.Is(cause, chat.ErrDeadline) {
		yield(chat.Chunk{}, cause)
		return
	}
	open := d.Open()
	if len(open) == 0 && d.Finish != "" {
		return // every choice finished: a finish reason is never sent twice
	}
	if len(open) == 0 {
		open = []int{0}
	}
	for _, ch := range open {
		if !yield(chat.Chunk{Choice: ch, FinishReason: chat.FinishTimeout}, nil) {
			return
		}
	}
}
