package metering

import (
	"context"
	"sync"
	"time"
)

// Deferred records the requests whose client left on a goroutine of its
// own, once such endings have paused; it records every other request on
// the caller's goroutine. Nobody waits on a cancelled request's record,
// and closes come in bursts (a page reloaded, a client's pool torn down):
// metered in the handlers, each ending's work would sit between the next
// close and its upstream's cancellation.
type Deferred struct {
	next Meter

	mu     sync.Mutex
	queue  []deferredRecord
	closed bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

type deferredRecord struct {
	ctx context.Context
	r   *Record
}

const (
	// deferQuiet is how long no cancellation must arrive before the queue
	// is metered, and deferMax how long a record may wait at most.
	deferQuiet = time.Millisecond
	deferMax   = 20 * time.Millisecond
	// deferQueue bounds the queue; beyond it records are metered inline.
	deferQueue = 4096
)

// NewDeferred returns a Deferred in front of next. Close meters what is
// queued and stops its goroutine.
func NewDeferred(next Meter) *Deferred {
	d := &Deferred{next: next, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

// Record implements Meter.
func (d *Deferred) Record(ctx context.Context, r *Record) {
	if r.Status != StatusCancelled {
		d.next.Record(ctx, r)
		return
	}
	d.mu.Lock()
	if d.closed || len(d.queue) >= deferQueue {
		d.mu.Unlock()
		d.next.Record(ctx, r)
		return
	}
	d.queue = append(d.queue, deferredRecord{ctx, r})
	d.mu.Unlock()
	signal(d.wake)
}

// Close meters the queued records and stops the goroutine; later records
// are metered inline.
func (d *Deferred) Close() error {
	d.mu.Lock()
	first := !d.closed
	d.closed = true
	d.mu.Unlock()
	if first {
		close(d.stop)
	}
	<-d.done
	return nil
}

func (d *Deferred) run() {
	defer close(d.done)
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	for {
		select {
		case <-d.wake:
		case <-d.stop:
			d.drain()
			return
		}
		first := time.Now()
	wait:
		for {
			quiet.Reset(deferQuiet)
			select {
			case <-d.wake:
				quiet.Stop()
				if time.Since(first) >= deferMax {
					break wait
				}
			case <-quiet.C:
				break wait
			case <-d.stop:
				quiet.Stop()
				d.drain()
				return
			}
		}
		d.drain()
	}
}

// drain meters what is queued, in arrival order.
func (d *Deferred) drain() {
	d.mu.Lock()
	q := d.queue
	d.queue = nil
	d.mu.Unlock()
	for i := range q {
		d.next.Record(q[i].ctx, q[i].r)
		q[i] = deferredRecord{}
	}
}
