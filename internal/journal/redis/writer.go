package redis

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/journal"
)

// writer is one answer's producer. Append and End queue under w.mu; the
// journal's one writing goroutine (run) takes the queue and pipelines it.
type writer struct {
	j        *Journal
	id       string
	k        keys
	stopped  chan struct{}
	stopOnce sync.Once
	attached atomic.Bool
	// held is until when (Unix ns) this producer may write: two thirds
	// of a lease after the send of the last write or renewal that found
	// its lease, which lapses no sooner than a lease after it; 0 before
	// its first write. taken: another producer took the answer over.
	held  atomic.Int64
	taken atomic.Bool

	mu      sync.Mutex
	pend    []journal.Event
	spare   []journal.Event // a written batch's slice, for the next pend
	data    journal.Copier  // copies pend's data
	queued  bool            // in j.dirty
	begun   bool            // the first write (lease, fresh stream) is done
	created bool            // the stream exists (written to once)
	last    int64           // the last Seq appended
	written int64           // the last Seq written
	size    int64           // bytes counted against MaxMessageBytes
	cut     int64           // Seq of the first event not journaled, or -1
	cutDone bool            // the cut marker is written
	ended   bool            // End was called
	end     *journal.Event
	endDone bool // the end is written
	dead    bool // crashed or closed: writes nothing more
	waiting bool // its queue waits for a renewal that finds its lease
	// since is when the first event not yet taken into a write was
	// queued; urgent: the next write goes at once (FlushEvents events
	// queued, or a failed write to retry).
	since  time.Time
	urgent bool
	began  time.Time // the first write's, for the stream's TTL
}

// Stream entries. A write's events are one entry {b: the events, packed
// (see pack)} at ID "<last Seq>-3", plus e=1 if its last event is End's
// and c=1 if the answer was cut before it. Markers have m: "cut" at
// "<seq>-1" (the Seq of the first event not journaled) or "end" at
// "<seq>-4" (an End whose event did not follow the last Seq). A cursor
// "<after>-1" is before every entry that holds an event past Seq after
// (a reader skips the entry's events up to after). Earlier versions wrote
// one event an entry, {k: kind, d: data} at "<seq>-1", and the end marker
// at "<seq>-2": they are still read.
const (
	fBatch  = "b"
	fKind   = "k"
	fData   = "d"
	fEnd    = "e"
	fCut    = "c"
	fMarker = "m"
)

// ID parts: what an entry at "<seq>-<part>" is.
const (
	partEvent  = 1 // one event (earlier versions), or the cut marker
	partEndOld = 2 // the end marker, earlier versions
	partBatch  = 3 // a write's events
	partEnd    = 4 // the end marker
)

// Begin implements journal.Journal. It does no I/O: the lease is taken
// by the first write, with the first events.
func (j *Journal) Begin(id string) journal.Writer {
	w := &writer{j: j, id: id, k: j.keys(id), stopped: make(chan struct{}), last: -1, written: -1, cut: -1}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.register(w) {
		return w
	}
	j.dirty = append(j.dirty, w)
	w.queued = true
	j.signal()
	return w
}

// register makes w id's producer here; false if j is closed (w is dead
// then). j.mu is held.
func (j *Journal) register(w *writer) bool {
	if j.closed {
		w.dead = true
		return false
	}
	if old := j.writers[w.id]; old != nil {
		old.crash()
	}
	j.writers[w.id] = w
	return true
}

// Take implements journal.Journal: one script takes the lapsed lease
// if the answer has not ended, then the stream is read.
func (j *Journal) Take(ctx context.Context, id string) (journal.Writer, journal.Snapshot, error) {
	if j.isClosed() {
		return nil, journal.Snapshot{}, journal.ErrClosed
	}
	k := j.keys(id)
	sent := time.Now()
	fence, err := takeScript.Run(ctx, j.c, []string{k.lease, k.stream}, j.token, j.o.Lease.Milliseconds(), (j.o.Retention + j.o.Lease).Milliseconds(), fenceGap).Int64()
	switch {
	case err != nil:
		return nil, journal.Snapshot{}, unavailable(ctx, "take", err)
	case fence == -1:
		return nil, journal.Snapshot{}, journal.ErrNotFound
	case fence < 0:
		return nil, journal.Snapshot{}, journal.ErrHeld
	}
	w := &writer{j: j, id: id, k: k, stopped: make(chan struct{}), last: fence, written: fence, cut: -1, begun: true, created: true, began: time.Now()}
	w.held.Store(sent.Add(j.o.Lease * 2 / 3).UnixNano())
	snap, err := j.Snapshot(ctx, id)
	if err != nil {
		// The lease lapses again: another may take it.
		return nil, journal.Snapshot{}, err
	}
	// The new producer's events go after the fence.
	snap.Next = fence + 1
	if snap.Truncated {
		w.cut, w.cutDone = snap.Next, true
	}
	j.mu.Lock()
	old := j.writers[id]
	ok := j.register(w)
	j.mu.Unlock()
	if !ok {
		return nil, journal.Snapshot{}, journal.ErrClosed
	}
	if old != nil {
		// This process's own producer lost the answer (its lease lapsed
		// while Redis was away): it stops as one taken over elsewhere.
		old.taken.Store(true)
		old.stop()
	}
	return w, snap, nil
}

// fenceGap is how far past the answer's last entry a take-over puts its
// fence: further than the old producer's events could ever reach.
const fenceGap = 1 << 20

// takeScript: KEYS lease, stream; ARGV token, lease ms, stream TTL ms,
// fence gap. It takes the lapsed lease and writes the fence, a marker
// entry at "<last Seq + gap>-0": the old producer's late writes (a
// pipeline still on its way) all have lower IDs, which Redis refuses.
// Returns the fence's Seq; -2 when a producer holds the lease or the
// answer ended; -1 when there is no stream.
var takeScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return -2 end
local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #top == 0 then return -1 end
local f = top[1][2]
for i = 1, #f, 2 do
  if f[i] == 'e' or (f[i] == 'm' and f[i + 1] == 'end') then return -2 end
end
local fence = tonumber(string.match(top[1][1], '^%d+')) + tonumber(ARGV[4])
redis.call('XADD', KEYS[2], fence .. '-0', 'm', 'take')
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return fence`)

// signal wakes the writing goroutine.
func (j *Journal) signal() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

func (w *writer) Append(ev journal.Event) {
	w.mu.Lock()
	if w.dead || w.ended || ev.Seq <= w.last {
		w.mu.Unlock()
		return
	}
	w.last = ev.Seq
	if w.cut >= 0 {
		w.mu.Unlock()
		return
	}
	size := ev.Size()
	over := w.size+size > w.j.o.MaxMessageBytes
	if !over && w.j.pending.Add(size) > w.j.o.MaxTotalBytes {
		w.j.pending.Add(-size)
		w.j.dropped.Add(1)
		over = true
	}
	if over {
		w.cut = ev.Seq
	} else {
		w.size += size
		ev.Data = w.data.Copy(ev.Data)
		w.pend = append(w.pend, ev)
	}
	if w.since.IsZero() {
		w.since = time.Now()
	}
	// The first write takes the lease; a cut and FlushEvents events go
	// at once; the rest waits for the flush interval.
	urgent := !w.begun || over || len(w.pend) >= journal.FlushEvents
	w.urgent = w.urgent || urgent
	mark := !w.queued
	w.queued = true
	w.mu.Unlock()
	if mark {
		w.j.queueWriter(w, urgent)
	} else if urgent {
		w.j.signal()
	}
}

// End implements journal.Writer. The terminal event is queued whatever
// the bounds, so that a cut answer still ends.
func (w *writer) End(ev journal.Event) {
	w.mu.Lock()
	if w.dead || w.ended {
		w.mu.Unlock()
		return
	}
	w.ended = true
	if ev.Seq > w.last {
		w.last = ev.Seq
		ev.Data = append([]byte(nil), ev.Data...)
		w.end = &ev
		w.j.pending.Add(ev.Size())
	}
	w.urgent = true
	mark := !w.queued
	w.queued = true
	w.mu.Unlock()
	if mark {
		w.j.markDirty(w)
	} else {
		w.j.signal()
	}
}

func (w *writer) Stopped() <-chan struct{} { return w.stopped }

func (w *writer) Held() bool { return !w.taken.Load() }

func (w *writer) Attached() bool { return w.attached.Load() }

func (w *writer) stop() { w.stopOnce.Do(func() { close(w.stopped) }) }

// crash makes w write nothing more and renew its lease no more, as if
// its process died: followers learn it within the lease.
func (w *writer) crash() {
	w.mu.Lock()
	w.dead = true
	w.mu.Unlock()
}

func (j *Journal) markDirty(w *writer) { j.queueWriter(w, true) }

// queueWriter puts w among the writers with something to write, and
// wakes the writing goroutine if it must write now.
func (j *Journal) queueWriter(w *writer, now bool) {
	j.mu.Lock()
	j.dirty = append(j.dirty, w)
	j.mu.Unlock()
	if now {
		j.signal()
	}
}

// run is the journal's one writing goroutine: it writes what was queued
// as soon as it is idle (what piles up during a write goes in the next
// one).
func (j *Journal) run() {
	defer j.wg.Done()
	// The tick finds the writers whose events have waited a flush
	// interval: each answer's wait is between one and one and a quarter.
	tick := time.NewTicker(max(j.o.FlushInterval/4, time.Millisecond))
	defer tick.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-j.wake:
		case <-tick.C:
		case <-j.closing:
			j.shutdown()
			return
		}
		if j.flush() {
			backoff = 0
			continue
		}
		// Redis is failing: wait before the retry.
		backoff = min(max(2*backoff, 50*time.Millisecond), time.Second)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
			j.signal()
		case <-j.closing:
			t.Stop()
			j.shutdown()
			return
		}
	}
}

// renewing renews the leases every Lease/3, and when a follower left; on
// its own goroutine, so that a slow write does not let a lease lapse.
func (j *Journal) renewing() {
	defer j.wg.Done()
	tick := time.NewTicker(j.o.Lease / 3)
	defer tick.Stop()
	for n := 1; ; n++ {
		full := n%3 == 0
		select {
		case <-tick.C:
		case <-j.kick:
			full = true
		case <-j.closing:
			return
		}
		j.renew(full)
	}
}

// batch is what one flush writes for one writer.
type batch struct {
	w      *writer
	evs    []journal.Event
	begin  bool
	cut    int64 // the cut marker's Seq to write, or -1
	end    *journal.Event
	endSeq int64 // for the end marker, when end is nil; -1 if not ending
	mk     bool  // the XADDs may create the stream (else NOMKSTREAM)
	adds   []*goredis.StringCmd
	cmds   []goredis.Cmder
	bytes  int64
}

// flush writes everything queued in one pipeline, and reports whether it
// went through. What failed is queued again, in front of what came since:
// each event's stream ID is fixed by its Seq, so writing it twice is
// harmless (Redis refuses the second, which counts as done).
func (j *Journal) flush() bool {
	j.mu.Lock()
	dirty := j.dirty
	j.dirty = nil
	j.mu.Unlock()
	if len(dirty) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	pipe := j.c.Pipeline()
	var batches []*batch
	var later []*writer
	now := time.Now()
	for _, w := range dirty {
		b, wait := w.take(now)
		switch {
		case wait:
			later = append(later, w)
		case b != nil:
			j.queue(ctx, pipe, b)
			batches = append(batches, b)
		}
	}
	if len(later) > 0 {
		j.mu.Lock()
		j.dirty = append(j.dirty, later...)
		j.mu.Unlock()
	}
	if len(batches) == 0 {
		return true
	}
	sent := time.Now()
	_, _ = pipe.Exec(ctx)
	ok := true
	var ferr error
	for _, b := range batches {
		if err := failed(b.cmds); err != nil {
			ok, ferr = false, err
			b.w.requeue(b)
			continue
		}
		j.pending.Add(-b.bytes)
		if b.begin {
			b.w.held.Store(sent.Add(j.o.Lease * 2 / 3).UnixNano())
		}
		b.w.done(b)
	}
	if !ok {
		if j.failed.Add(1) == 1 || j.failed.Load()%100 == 0 {
			j.log.Warn("journal: writing to redis failed; retrying", "failures", j.failed.Load(), "err", ferr)
		}
	}
	return ok
}

// failed returns the first error among cmds, but for the refusal of an
// event written before.
func failed(cmds []goredis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, goredis.Nil) && !isDuplicate(err) {
			return err
		}
	}
	return nil
}

func isDuplicate(err error) bool {
	return strings.Contains(err.Error(), "equal or smaller than the target stream top item")
}

// take moves w's queue into a batch, or returns nil if w has nothing to
// write; wait if what it has waits for the flush interval (w stays
// queued then).
func (w *writer) take(now time.Time) (b *batch, wait bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.dead && w.begun && !w.urgent && !w.ended && !(w.cut >= 0 && !w.cutDone) &&
		!w.since.IsZero() && now.Sub(w.since) < w.j.o.FlushInterval {
		return nil, true
	}
	w.queued = false
	if w.dead {
		n := w.pendingBytes()
		if w.end != nil {
			n += w.end.Size()
		}
		w.j.pending.Add(-n)
		w.pend, w.end = nil, nil
		return nil, false
	}
	if w.begun && time.Now().UnixNano() > w.held.Load() {
		// The lease may have lapsed: nothing is written until a renewal
		// finds it (see renew), so a producer that lost it to another
		// never writes after the other's events.
		w.waiting = true
		return nil, false
	}
	w.since, w.urgent = time.Time{}, false
	b = &batch{w: w, evs: w.pend, begin: !w.begun, cut: -1, endSeq: -1, mk: !w.created}
	if w.cut >= 0 && !w.cutDone {
		b.cut = w.cut
	}
	if w.ended && !w.endDone {
		b.end = w.end
		if b.end == nil {
			b.endSeq = max(w.last, 0)
		}
	}
	w.pend, w.spare, w.data = w.spare, nil, journal.Copier{}
	if len(b.evs) == 0 && !b.begin && b.cut < 0 && b.end == nil && b.endSeq < 0 {
		return nil, false
	}
	for _, ev := range b.evs {
		b.bytes += ev.Size()
	}
	if b.end != nil {
		b.bytes += b.end.Size()
	}
	return b, false
}

// pendingBytes is what w's queue counts against MaxTotalBytes, but for
// the end (queued again with a failed batch, so counted by it).
func (w *writer) pendingBytes() int64 {
	var n int64
	for _, ev := range w.pend {
		n += ev.Size()
	}
	return n
}

// requeue puts a failed batch back in front of w's queue.
func (w *writer) requeue(b *batch) {
	w.mu.Lock()
	w.pend = append(b.evs, w.pend...)
	w.data = journal.Copier{} // b's data is in the requeued events; start a new chunk
	w.urgent = true
	mark := !w.queued
	w.queued = true
	w.mu.Unlock()
	if mark {
		w.j.markDirty(w)
	}
}

// done records a written batch.
func (w *writer) done(b *batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.begun {
		w.begun, w.began = true, time.Now()
	}
	if !b.mk && len(b.adds) > 0 && errors.Is(b.adds[0].Err(), goredis.Nil) {
		// NOMKSTREAM found no stream: what was written is gone. Cut the
		// answer at its start and write it so.
		w.created = false
		w.cut, w.cutDone = 0, false
		// Drop what came since; the end, if any, is written again, so
		// counted again if it was counted off with the batch.
		w.j.pending.Add(-w.pendingBytes())
		if b.end != nil {
			w.j.pending.Add(b.end.Size())
		}
		w.pend, w.data = nil, journal.Copier{}
		if !w.queued {
			w.queued = true
			w.j.mu.Lock()
			w.j.dirty = append(w.j.dirty, w)
			w.j.mu.Unlock()
			w.j.signal()
		}
		return
	}
	if len(b.adds) > 0 {
		w.created = true
	}
	for _, ev := range b.evs {
		w.written = max(w.written, ev.Seq)
	}
	if b.cut >= 0 {
		w.written = max(w.written, b.cut)
	}
	if w.spare == nil && cap(b.evs) <= 4096 {
		clear(b.evs) // let the data chunks go
		w.spare = b.evs[:0]
	}
	if b.cut >= 0 {
		w.cutDone = true
	}
	if b.end != nil || b.endSeq >= 0 {
		w.endDone = true
		w.end = nil
		w.j.mu.Lock()
		if w.j.writers[w.id] == w {
			delete(w.j.writers, w.id)
		}
		w.j.mu.Unlock()
	}
}

// queue adds b's commands to pipe: on the first write, a fresh stream
// and the lease; the events; the cut marker; at the end, the terminal
// event, the stream's retention and the lease's release. The terminal
// event is written before the lease is released, so a follower that
// finds no lease and then reads the stream sees the end if there was one.
func (j *Journal) queue(ctx context.Context, pipe goredis.Pipeliner, b *batch) {
	k := b.w.k
	add := func(id string, values ...any) {
		c := pipe.XAdd(ctx, &goredis.XAddArgs{Stream: k.stream, NoMkStream: !b.mk, ID: id, Values: values})
		b.cmds = append(b.cmds, c)
		b.adds = append(b.adds, c)
	}
	if b.cut == 0 && b.mk {
		// The stream vanished (a Redis that restarted empty): start it
		// again with the cut, so followers learn the answer is gone.
		b.cmds = append(b.cmds, pipe.Del(ctx, k.stream))
	}
	if b.begin {
		b.cmds = append(b.cmds,
			pipe.Del(ctx, k.stream, k.stop, k.att),
			pipe.Set(ctx, k.lease, j.token, j.o.Lease))
	}
	// The end goes with the events, unless the answer was cut: then
	// after the cut marker, in an entry of its own that says so.
	cut := b.w.cutSeq() >= 0
	evs := b.evs
	withEnd := b.end != nil && !cut
	if len(evs) > 0 || withEnd {
		last := int64(-1)
		if len(evs) > 0 {
			last = evs[len(evs)-1].Seq
		}
		var end *journal.Event
		if withEnd {
			end, last = b.end, b.end.Seq
		}
		vals := []any{fBatch, pack(evs, end)}
		if withEnd {
			vals = append(vals, fEnd, "1")
		}
		add(eventID(last, partBatch), vals...)
	}
	if b.cut >= 0 {
		add(eventID(b.cut, partEvent), fMarker, "cut")
	}
	switch {
	case b.end != nil && cut:
		add(eventID(b.end.Seq, partBatch), fBatch, pack(nil, b.end), fEnd, "1", fCut, "1")
	case b.endSeq >= 0:
		add(eventID(b.endSeq, partEnd), fMarker, "end")
	}
	if b.end != nil || b.endSeq >= 0 {
		// The lease is released only if it is still this producer's: a
		// late end must not free another's. While the producer holds it
		// (see writer.held), it is.
		b.cmds = append(b.cmds, pipe.PExpire(ctx, k.stream, j.o.Retention))
		if b.begin || time.Now().UnixNano() < b.w.held.Load() {
			b.cmds = append(b.cmds, pipe.Del(ctx, k.lease, k.stop, k.att))
		} else {
			b.cmds = append(b.cmds, releaseScript.Eval(ctx, pipe, []string{k.lease, k.stop, k.att}, j.token))
		}
	} else if b.mk && len(b.adds) > 0 {
		// The stream may be created here: give it a TTL at once, so that
		// it goes even if this process dies before its first renewal.
		b.cmds = append(b.cmds, pipe.PExpire(ctx, k.stream, j.o.Retention+j.o.Lease))
	}
}

func (w *writer) cutSeq() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cut
}

// renew extends the lease of every answer this process is writing, in
// one pipeline. A full renewal (every lease, and when a follower left)
// also reads back whether it was asked to stop (a stop the control
// channel did not bring) and how many followers are attached; so does
// any renewal of a producer whose last one is more than a third of a
// lease old (its lease may have lapsed, and been taken). Otherwise the
// lease is still this producer's, and one PEXPIRE extends it.
func (j *Journal) renew(full bool) {
	j.mu.Lock()
	ws := make([]*writer, 0, len(j.writers))
	for _, w := range j.writers {
		ws = append(ws, w)
	}
	j.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	pipe := j.c.Pipeline()
	type renewal struct {
		w     *writer
		cmd   *goredis.Cmd
		light *goredis.BoolCmd
	}
	var rs []renewal
	ttl := (j.o.Retention + j.o.Lease).Milliseconds()
	now := time.Now()
	for _, w := range ws {
		w.mu.Lock()
		live := w.begun && !w.dead && !w.endDone
		written, waiting := w.written, w.waiting
		w.mu.Unlock()
		if !live {
			continue
		}
		if !full && !waiting && now.UnixNano() < w.held.Load() {
			rs = append(rs, renewal{w: w, light: pipe.PExpire(ctx, w.k.lease, j.o.Lease)})
			continue
		}
		// The stream's TTL, set when it was made, is renewed once the
		// answer has run for half of it.
		stream := "0"
		if now.Sub(w.began) > (j.o.Retention+j.o.Lease)/2 {
			stream = "1"
		}
		cmd := renewScript.Eval(ctx, pipe, []string{w.k.lease, w.k.stream, w.k.stop, w.k.att}, j.token, j.o.Lease.Milliseconds(), ttl, written+fenceGap, stream)
		rs = append(rs, renewal{w: w, cmd: cmd})
	}
	if len(rs) == 0 {
		return
	}
	sent := time.Now()
	// Eval, not EvalSha: in a pipeline, a NOSCRIPT cannot fall back.
	_, _ = pipe.Exec(ctx)
	for _, r := range rs {
		if r.light != nil {
			if ok, err := r.light.Result(); err == nil && ok {
				r.w.held.Store(sent.Add(j.o.Lease * 2 / 3).UnixNano())
			}
			continue
		}
		v, err := r.cmd.Int64Slice()
		if err != nil || len(v) != 3 {
			continue
		}
		if v[2] == 1 {
			// Another producer took the answer over: this one ends, and
			// writes nothing more.
			r.w.taken.Store(true)
			r.w.crash()
			r.w.stop()
			continue
		}
		r.w.held.Store(sent.Add(j.o.Lease * 2 / 3).UnixNano())
		r.w.mu.Lock()
		again := r.w.waiting && !r.w.queued
		r.w.waiting = false
		if again {
			r.w.queued = true
		}
		r.w.mu.Unlock()
		if again {
			j.markDirty(r.w)
		}
		if v[0] == 1 {
			r.w.stop()
		}
		r.w.attached.Store(v[1] > 0)
	}
}

// releaseScript: KEYS lease, stop, att; ARGV token. Deletes them if the
// lease is the token's (or gone).
var releaseScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1`)

// renewScript: KEYS lease, stream, stop, att; ARGV token, lease ms,
// stream TTL ms, the Seq a take-over's fence reaches at least (the last
// Seq this producer wrote plus fenceGap), "1" to renew the stream's TTL
// too. Returns {stop requested, followers attached, taken}. A lease held
// under another token was taken over (taken = 1). One that lapsed (Redis
// unreachable for longer than a lease) was taken over too if the stream
// holds a fence past the producer's last (not merely a write of its own
// that reached Redis after it gave up on it), or ended (the end's write deletes the
// lease: a renewal that raced with it must not bring it back); otherwise
// nobody took it and the producer takes it again (followers told the
// answer was lost find it live when they follow again).
var renewScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] then
  if cur then return {0, 0, 1} end
  local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  if #top > 0 then
    if tonumber(string.match(top[1][1], '^%d+')) >= tonumber(ARGV[4]) then return {0, 0, 1} end
    local f = top[1][2]
    for i = 1, #f, 2 do
      if f[i] == 'e' or (f[i] == 'm' and f[i + 1] == 'end') then return {0, 0, 0} end
    end
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if ARGV[5] == '1' then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call('EXISTS', KEYS[3]), redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf'), 0}`)

// shutdown writes what is queued, once, and releases the leases of the
// answers still being written.
func (j *Journal) shutdown() {
	j.flush()
	j.mu.Lock()
	var leases []string
	for _, w := range j.writers {
		w.crash()
		leases = append(leases, w.k.lease)
	}
	j.writers = map[string]*writer{}
	j.mu.Unlock()
	if len(leases) > 0 {
		// One DEL each: on a cluster the leases are in many slots.
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		pipe := j.c.Pipeline()
		for _, l := range leases {
			pipe.Del(ctx, l)
		}
		_, _ = pipe.Exec(ctx)
	}
}

// eventID is the stream ID of Seq seq's entry: "<seq>-<part>".
func eventID(seq int64, part int) string {
	return strconv.FormatInt(seq, 10) + "-" + strconv.Itoa(part)
}

// parseID is eventID's inverse; ok is false for an ID it did not make.
func parseID(id string) (seq int64, part int, ok bool) {
	s, p, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	seq, err := strconv.ParseInt(s, 10, 64)
	if err != nil || seq < 0 || s != strconv.FormatInt(seq, 10) {
		return 0, 0, false
	}
	switch p {
	case "1":
		return seq, partEvent, true
	case "2":
		return seq, partEndOld, true
	case "3":
		return seq, partBatch, true
	case "4":
		return seq, partEnd, true
	}
	return 0, 0, false
}

// pack encodes evs, then end if not nil, as one entry's value: each is
// its Seq, its kind's length, its kind, its data's length and its data
// (the numbers as uvarints).
func pack(evs []journal.Event, end *journal.Event) []byte {
	n := 0
	for _, ev := range evs {
		n += 3*binary.MaxVarintLen64 + len(ev.Kind) + len(ev.Data)
	}
	if end != nil {
		n += 3*binary.MaxVarintLen64 + len(end.Kind) + len(end.Data)
	}
	b := make([]byte, 0, n)
	put := func(ev *journal.Event) {
		b = binary.AppendUvarint(b, uint64(ev.Seq))
		b = binary.AppendUvarint(b, uint64(len(ev.Kind)))
		b = append(b, ev.Kind...)
		b = binary.AppendUvarint(b, uint64(len(ev.Data)))
		b = append(b, ev.Data...)
	}
	for i := range evs {
		put(&evs[i])
	}
	if end != nil {
		put(end)
	}
	return b
}

// unpack is pack's inverse; ok is false for a value pack did not make.
// The events' data share s's bytes.
func unpack(s string) (evs []journal.Event, ok bool) {
	b := []byte(s)
	for len(b) > 0 {
		seq, n := binary.Uvarint(b)
		if n <= 0 || seq > math.MaxInt64 {
			return nil, false
		}
		b = b[n:]
		kl, n := binary.Uvarint(b)
		if n <= 0 || kl > uint64(len(b)-n) {
			return nil, false
		}
		kind := string(b[n : n+int(kl)])
		b = b[n+int(kl):]
		dl, n := binary.Uvarint(b)
		if n <= 0 || dl > uint64(len(b)-n) {
			return nil, false
		}
		var data []byte
		if dl > 0 {
			data = b[n : n+int(dl) : n+int(dl)]
		}
		b = b[n+int(dl):]
		if len(evs) > 0 && int64(seq) <= evs[len(evs)-1].Seq {
			return nil, false
		}
		evs = append(evs, journal.Event{Seq: int64(seq), Kind: kind, Data: data})
	}
	return evs, len(evs) > 0
}
