package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// The kinds of event a /v1/chat answer is made of: one meta, thinking
// and deltas, then exactly one terminal done or error.
const (
	KindMeta     = "meta"
	KindThinking = "thinking"
	KindDelta    = "delta"
	KindDone     = "done"
	KindError    = "error"
	// KindRewind starts a take-over: the text from its offset on is
	// replaced by the deltas after it (see Journal.Take).
	KindRewind = "rewind"
)

// Event is one SSE event of an answer.
type Event struct {
	// Seq orders the event within its message: 0 for meta, then one more
	// for each event. It is what the client hands back as its cursor.
	Seq int64
	// Kind is the SSE event name: meta, thinking, delta, done or error.
	Kind string
	// Data is the SSE data (JSON). A journal keeps its own copy; an Event
	// a journal yields shares its Data with the journal and must not be
	// modified.
	Data []byte
}

// Terminal reports whether e is the last event of its answer.
func (e Event) Terminal() bool { return e.Kind == KindDone || e.Kind == KindError }

// Size is what an event counts against a journal's bounds: its data and
// a fixed allowance for the rest, so that a flood of empty events is
// bounded too.
func (e Event) Size() int64 { return int64(len(e.Data)) + eventOverhead }

const eventOverhead = 64

// Copier makes the copies of event data a journal keeps. Data up to
// smallData bytes is copied into shared chunks of chunkSize, so that an
// append allocates nothing most of the time; the memory held beyond what
// is counted is under an eighth of it plus one chunk per Copier. The zero
// Copier is ready; it is not safe for concurrent use.
type Copier struct {
	buf []byte // the current chunk
}

const (
	smallData = 1 << 10
	chunkSize = 8 << 10
)

// Copy returns a copy of d, nil if d is empty. Nothing else writes to the
// copy's bytes.
func (c *Copier) Copy(d []byte) []byte {
	if len(d) == 0 {
		return nil
	}
	if len(d) > smallData {
		return append([]byte(nil), d...)
	}
	if cap(c.buf)-len(c.buf) < len(d) {
		c.buf = make([]byte, 0, chunkSize)
	}
	start := len(c.buf)
	c.buf = append(c.buf, d...)
	return c.buf[start:len(c.buf):len(c.buf)]
}

var (
	// ErrNotFound: the journal has no such message (never begun, or
	// dropped after its retention), or, from Stop, no live producer holds
	// it.
	ErrNotFound = errors.New("journal: no such message")
	// ErrLost: the producer went away (its lease lapsed) before the
	// terminal event. Everything journaled was yielded first.
	ErrLost = errors.New("journal: producer lost before the end of the answer")
	// ErrTruncated: the message outgrew what the journal keeps of it (its
	// cap, the total bound, or writes dropped while the store was
	// unreachable), so the rest cannot be replayed. Everything before the
	// cut was yielded first.
	ErrTruncated = errors.New("journal: answer too large to replay past this point")
	// ErrUnavailable wraps a failure to reach the journal's store.
	ErrUnavailable = errors.New("journal: store unavailable")
	// ErrClosed: the Journal was closed.
	ErrClosed = errors.New("journal: closed")
	// ErrHeld: Take found the answer held by a producer (its own, which
	// lives, or one that took it over first) or ended.
	ErrHeld = errors.New("journal: answer held by a producer, or ended")
)

// Journal keeps the events of answers being produced, so that a client
// can replay them from a cursor and follow the rest live, on any replica.
// Its methods are safe for concurrent use.
type Journal interface {
	// Begin starts message id's journal, produced by this process, and
	// returns its only Writer. The producer holds a lease on id until End
	// (renewed in the background); Begin does no I/O. Beginning an id
	// again replaces its journal.
	Begin(id string) Writer
	// Follow yields the events of id with Seq > after, in order, exactly
	// once each, then the new ones as they are appended, until the
	// terminal event (it returns nil after yielding it), ctx ends (it
	// returns ctx's error), or yield returns false (it returns nil).
	// after is -1 to start at the beginning. It returns ErrNotFound if id
	// has no journal, ErrLost if the producer went away before the end,
	// ErrTruncated at a cut, each after yielding all there was before it.
	// While Follow runs, the follower counts as attached to id.
	Follow(ctx context.Context, id string, after int64, yield func(Event) bool) error
	// Stop asks id's producer, on whatever replica, to stop: its Writer's
	// Stopped channel closes. It returns ErrNotFound if no live producer
	// holds id (never begun, ended, or lost).
	Stop(ctx context.Context, id string) error
	// Snapshot returns what is journaled for id now, for the sweeper
	// that stores a lost answer's text. ErrNotFound as for Follow.
	Snapshot(ctx context.Context, id string) (Snapshot, error)
	// Take takes over answer id, whose producer went away before its end
	// (Snapshot.Lost), for this process to continue it: it returns the
	// journal as it stands and a Writer whose events follow its last
	// one. Of those that try at once, one wins; the others get ErrHeld,
	// as does an answer whose producer lives or that ended. The new
	// producer holds the lease as Begin's does; a follower that got
	// ErrLost may follow again.
	Take(ctx context.Context, id string) (Writer, Snapshot, error)
	// Close releases the journal. Producers still writing are lost:
	// their followers get ErrLost (on this process, ErrClosed).
	Close() error
}

// Writer is the producer's side of one message's journal. Its methods are
// safe for concurrent use but an answer has one producer.
type Writer interface {
	// Append journals ev (a copy of its Data). It never waits for I/O.
	// Seq must grow from event to event; an event whose Seq does not is
	// ignored. After End, Append does nothing.
	Append(ev Event)
	// End journals the terminal event and releases the lease; the
	// journal is kept for the retention period, then dropped. It does not
	// wait for I/O either. Only the first End counts.
	End(ev Event)
	// Stopped is closed when Stop was called for the message, on any
	// replica.
	Stopped() <-chan struct{}
	// Attached reports whether a follower, on any replica, is attached
	// to the message now (as of the last lease renewal at most, for a
	// follower on another replica).
	Attached() bool
	// Held is false once another producer took the answer over (Take,
	// after this one's lease lapsed): Stopped is closed then too, and
	// this producer must not write the answer anywhere any more.
	Held() bool
}

// Durability is implemented by a Writer that can tell whether its
// journal keeps the answer where another process can continue it from
// (Journal.Take) if this one dies: a shared journal that is reachable
// and holds all of the answer so far. A producer that relies on it (see
// Durable) may save the answer elsewhere less often while it holds; it
// must save as before once it does not.
type Durability interface {
	// Durable reports whether the journal is writing the answer now:
	// its store answered this producer recently (within half a lease),
	// the producer holds the answer, and nothing of it was cut. What
	// was appended in the last moments may not be written yet (a crash
	// loses it; a take-over rewinds to what was).
	Durable() bool
}

// Durable reports whether w says its journal keeps the answer for
// another process (see Durability); false for a Writer that cannot
// tell.
func Durable(w Writer) bool {
	d, ok := w.(Durability)
	return ok && d.Durable()
}

// Snapshot is what a journal holds for a message at one moment.
type Snapshot struct {
	// Events are the journaled events, in order. If Truncated, they stop
	// at the cut (and the terminal event, if any, is last).
	Events []Event
	// Ended: the terminal event is journaled (the last of Events).
	Ended bool
	// Lost: the producer went away without a terminal event.
	Lost bool
	// Truncated: events after some point were not journaled.
	Truncated bool
	// Next is the Seq the answer's next event would have (past the cut's
	// events too, when Truncated): where a producer that takes it over
	// goes on.
	Next int64
}

// Options configure a journal; the zero value of each field means its
// default (see Defaults).
type Options struct {
	// Lease is how long a producer's claim on an answer lasts without
	// renewal (it renews every Lease/3). A replica that dies mid-answer
	// leaves its answers lost (ErrLost to followers, the sweeper stores
	// them interrupted) within about this long. Redis only: in process, a
	// producer dies with its journal. Default 5s.
	Lease time.Duration
	// Retention is how long an ended (or lost) answer stays replayable.
	// Default 10m.
	Retention time.Duration
	// MaxMessageBytes caps what one answer journals (event data plus 64
	// bytes an event). An answer that would pass it is cut there: the
	// events after the cut are not journaled (the terminal event still
	// is), and a follower gets ErrTruncated at the cut. Default 4 MiB.
	MaxMessageBytes int64
	// MaxTotalBytes bounds memory. In process: all journals together;
	// when an append would pass it, the ended journals are dropped
	// oldest end first until it fits, and if only live ones are left,
	// the appending answer is cut as at MaxMessageBytes. Redis: the
	// events waiting to be written (piled up while Redis is slow or
	// unreachable); an append that would pass it is dropped and its
	// answer cut. Default 256 MiB in process, 64 MiB for Redis.
	MaxTotalBytes int64
	// KeyPrefix starts every Redis key and channel of the journal.
	// Default "firstword:journal:".
	KeyPrefix string
	// FlushInterval is how often, at most, the Redis journal writes one
	// answer's events (all since the last write, in one entry): sooner
	// only for its first write, its end, a cut, or FlushEvents events.
	// A follower on another replica sees events up to about this late;
	// the live stream never waits for it. Default 250ms.
	FlushInterval time.Duration
}

// FlushEvents is how many events an answer's next write waits for at
// most (see Options.FlushInterval).
const FlushEvents = 64

// Defaults for Options.
const (
	DefaultLease           = 5 * time.Second
	DefaultRetention       = 10 * time.Minute
	DefaultMaxMessageBytes = 4 << 20
	DefaultMaxTotalBytes   = 256 << 20
	DefaultKeyPrefix       = "firstword:journal:"
	DefaultFlushInterval   = 250 * time.Millisecond
)

// WithDefaults returns o with each zero field set to its default. The
// Redis journal substitutes its own default for MaxTotalBytes first.
func (o Options) WithDefaults() Options {
	o.Lease = cmp.Or(o.Lease, DefaultLease)
	o.Retention = cmp.Or(o.Retention, DefaultRetention)
	o.MaxMessageBytes = cmp.Or(o.MaxMessageBytes, DefaultMaxMessageBytes)
	o.MaxTotalBytes = cmp.Or(o.MaxTotalBytes, DefaultMaxTotalBytes)
	o.KeyPrefix = cmp.Or(o.KeyPrefix, DefaultKeyPrefix)
	o.FlushInterval = cmp.Or(o.FlushInterval, DefaultFlushInterval)
	return o
}

// Validate reports every field out of range at once.
func (o Options) Validate() error {
	var errs []error
	if o.Lease < 0 || (o.Lease > 0 && o.Lease < 30*time.Millisecond) {
		errs = append(errs, fmt.Errorf("lease %v: must be at least 30ms", o.Lease))
	}
	if o.FlushInterval < 0 {
		errs = append(errs, fmt.Errorf("flush interval %v: must not be negative", o.FlushInterval))
	}
	if o.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention %v: must not be negative", o.Retention))
	}
	if o.MaxMessageBytes < 0 {
		errs = append(errs, fmt.Errorf("max message bytes %d: must not be negative", o.MaxMessageBytes))
	}
	if o.MaxTotalBytes < 0 {
		errs = append(errs, fmt.Errorf("max total bytes %d: must not be negative", o.MaxTotalBytes))
	}
	if o.MaxTotalBytes > 0 && o.MaxMessageBytes > o.MaxTotalBytes {
		errs = append(errs, fmt.Errorf("max message bytes %d: must not exceed max total bytes %d", o.MaxMessageBytes, o.MaxTotalBytes))
	}
	return errors.Join(errs...)
}
