package metering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// UsageStore is where a UsageWriter puts its rows; store.Store is one.
type UsageStore interface {
	RecordUsage(ctx context.Context, us ...*store.Usage) error
}

// UsageOptions tune a UsageWriter. Zero values take the defaults.
type UsageOptions struct {
	// Timeout bounds one write attempt (default 2s): a stalled store
	// fails the attempt, it does not hold the writer.
	Timeout time.Duration
	// Queue bounds the rows kept in memory while the store is slow or
	// down (default 100000).
	Queue int
	// SpillPath is the file rows past Queue are appended to, replayed
	// when the store is back and by the next writer on the same path. ""
	// means no file: rows past Queue are dropped (and counted). One file
	// belongs to one writer; two processes must not share a path.
	SpillPath string
	// RetryMin is the first backoff after a failed write (default
	// 100ms); each failure doubles it, up to RetryMax (default 30s).
	RetryMin, RetryMax time.Duration
	// ShutdownBudget bounds how long Close keeps trying to write what is
	// queued before spilling it (default 5s).
	ShutdownBudget time.Duration
	// Log receives write failures and losses (default: discarded).
	Log *slog.Logger
}

// UsageStats are a UsageWriter's counts, for metrics. Queued and InSpill
// are levels; the rest only grow.
type UsageStats struct {
	Queued      int64 // rows in memory, not yet written
	InSpill     int64 // rows in the spill file, not yet replayed
	Spilled     int64 // rows ever appended to the spill file
	Dropped     int64 // rows lost: no spill file, or it failed
	Written     int64 // rows written to the store
	WriteErrors int64 // failed write attempts
}

const (
	// usageBatch rows at most go in one transaction, gathered for up to
	// usageLinger after the first: one commit for many requests.
	usageBatch  = 256
	usageLinger = 20 * time.Millisecond
	// pendingMax bounds the rows waiting for the spill file: past it the
	// disk is slower than the traffic and rows are dropped.
	pendingMax = 16384
)

// UsageWriter writes each request's usage row to the store in the
// background, in batches. Record only queues: a slow or stalled store never
// holds a request. A failed batch is retried with exponential backoff and
// jitter; its rows stay at the head of the queue, in order. Past
// UsageOptions.Queue rows, new rows go to the spill file (JSON lines,
// fsync'd a batch at a time) until it has been replayed, so rows reach the
// store in the order they were recorded.
//
// Delivery is at least once: a batch whose commit succeeded but whose
// answer was lost (a timeout at the wrong moment) is written again, and so
// are spilled rows replayed before a crash removed the file. The store
// makes that exactly once by ignoring a request_id it already has.
type UsageWriter struct {
	st  UsageStore
	opt UsageOptions
	log *slog.Logger

	wake      chan struct{} // cap 1: the writer has something to look at
	linger    *time.Timer   // the writer's wait for a batch to fill; reused
	spillWake chan struct{} // cap 1: rows are pending for the spill file
	closing   chan struct{} // closed by Close: write at once, then stop
	stopSpill chan struct{} // closed by Close once the writer is done
	giveUp    context.CancelFunc
	ran       chan struct{} // the writer's goroutine ended
	spilled   chan struct{} // the spiller's goroutine ended
	closeOnce sync.Once
	closeErr  error

	// fmu guards the spill file and is taken before mu, so the spiller's
	// appends and the writer's replay see the file and the queues agree.
	fmu      sync.Mutex
	spill    *spillFile
	finished bool // Close is done with the file: a late row closes it again

	mu        sync.Mutex
	closed    bool
	queue     fifo
	oldest    time.Time      // when the queue's head arrived, for the linger; zero: write now
	pending   []*store.Usage // rows for the spill file, newer than the queue
	diverting bool           // new rows go to the spill file until it is replayed
	dropLog   time.Time      // the last time a drop was logged

	inSpill, spilledRows, dropped, written, writeErrors atomic.Int64
}

// positiveOr returns v if it is positive, else def: an option's value or
// its default.
func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// NewUsageWriter starts a writer. A spill file left at opt.SpillPath by an
// earlier writer is replayed first. It fails if that file cannot be read
// or the path cannot hold one, so a bad path shows at start, not in an
// outage.
func NewUsageWriter(st UsageStore, opt UsageOptions) (*UsageWriter, error) {
	opt.Timeout = positiveOr(opt.Timeout, 2*time.Second)
	opt.Queue = positiveOr(opt.Queue, 100000)
	opt.RetryMin = positiveOr(opt.RetryMin, 100*time.Millisecond)
	opt.RetryMax = max(positiveOr(opt.RetryMax, 30*time.Second), opt.RetryMin)
	opt.ShutdownBudget = positiveOr(opt.ShutdownBudget, 5*time.Second)
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sf, torn, err := openSpill(opt.SpillPath)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	w := &UsageWriter{
		st: st, opt: opt, log: log, spill: sf,
		wake: make(chan struct{}, 1), spillWake: make(chan struct{}, 1),
		closing: make(chan struct{}), stopSpill: make(chan struct{}),
		ran: make(chan struct{}), spilled: make(chan struct{}),
		linger: time.NewTimer(time.Hour),
	}
	// Made stopped, and reused for every batch: no timer per batch.
	w.linger.Stop()
	if torn > 0 {
		// The last append of a process that died mid-write.
		w.dropped.Add(int64(torn))
		log.Warn("usage spill file ended in a partial row; dropped it", "path", opt.SpillPath)
	}
	w.inSpill.Store(int64(sf.rows))
	// Rows left from an earlier run are older than any recorded now: new
	// rows queue behind them, through the file.
	w.diverting = sf.rows > 0
	if sf.rows > 0 {
		log.Info("replaying usage rows spilled by an earlier run", "path", opt.SpillPath, "rows", sf.rows)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.giveUp = cancel
	// Two goroutines: the writer (run) alone takes rows off the queue and
	// the file's front; the spiller alone appends to the file while running.
	// Record only adds, under mu, and wakes them.
	go w.run(ctx)
	go w.spiller()
	return w, nil
}

// Record implements Meter: it queues r's usage row and returns at once.
// After Close the row is appended to the spill file directly.
func (w *UsageWriter) Record(_ context.Context, r *Record) {
	tenant := r.Tenant
	if tenant == "" {
		tenant = "local"
	}
	// Stamped now, not when written: after an outage the row must still
	// carry the request's time.
	at := r.Time
	if at.IsZero() {
		at = time.Now()
	}
	u := &store.Usage{
		RequestID: r.RequestID, TenantID: tenant, Time: at.UTC(), Surface: r.Surface,
		Model: r.Alias, Deployment: r.Deployment, Status: string(r.Status),
		InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CachedTokens: r.Usage.CachedInputTokens,
		Estimated: r.Usage.Estimated, Cost: r.Cost,
		TTFTMs: float64(r.TTFT.Microseconds()) / 1000, TotalMs: float64(r.Total.Microseconds()) / 1000,
		KeyID: r.KeyID, TTFWMs: float64(r.TTFW.Microseconds()) / 1000,
	}
	if len(r.Spent) > 0 {
		au, ac := r.AttemptsTotal()
		u.AttemptsInputTokens, u.AttemptsOutputTokens, u.AttemptsCost = au.InputTokens, au.OutputTokens, ac
	}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		w.spillLate(u)
		return
	// While diverting, a row must not overtake the spilled rows by taking a
	// free place in the queue: it goes behind them, to the file.
	case !w.diverting && w.queue.len() < w.opt.Queue:
		if w.queue.len() == 0 {
			w.oldest = time.Now()
		}
		w.queue.push(u)
		w.mu.Unlock()
		signal(w.wake)
		return
	case w.opt.SpillPath == "":
		w.dropLocked(1, "the queue is full and there is no spill file")
		w.mu.Unlock()
		return
	// Dropped rather than wait: Record must never hold a request.
	case len(w.pending) >= pendingMax:
		w.dropLocked(1, "the spill file is slower than the traffic")
		w.mu.Unlock()
		return
	}
	w.diverting = true
	w.pending = append(w.pending, u)
	w.mu.Unlock()
	signal(w.spillWake)
}

// Stats returns the writer's counts. Safe for concurrent use.
func (w *UsageWriter) Stats() UsageStats {
	w.mu.Lock()
	queued := w.queue.len() + len(w.pending)
	w.mu.Unlock()
	return UsageStats{
		Queued: int64(queued), InSpill: w.inSpill.Load(), Spilled: w.spilledRows.Load(),
		Dropped: w.dropped.Load(), Written: w.written.Load(), WriteErrors: w.writeErrors.Load(),
	}
}

// Close stops queueing, keeps writing what is queued (and spilled) for up
// to the shutdown budget, and then appends whatever is left to the spill
// file. It returns an error if rows were dropped because there is no spill
// file or it failed. Safe to call more than once.
func (w *UsageWriter) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		// From here Record spills rows itself (spillLate).
		w.mu.Unlock()
		close(w.closing)
		// When the budget is spent, giveUp cancels the writer's ctx: a write in
		// flight fails, and run returns with its rows still queued.
		budget := time.AfterFunc(w.opt.ShutdownBudget, w.giveUp)
		<-w.ran
		budget.Stop()
		w.giveUp()
		// The spiller stops only after the writer: while the writer drains, the
		// spiller may still have to put rows in the file for it to replay.
		close(w.stopSpill)
		<-w.spilled
		// Both goroutines are gone: only spillLeftovers (and late rows, under
		// fmu) touch the queue and the file now.
		w.closeErr = w.spillLeftovers()
	})
	return w.closeErr
}

// source is where a batch came from, to remove it once written.
type source struct {
	file bool
	end  int64 // the file offset after the batch
	n    int   // rows, or from the file lines, the batch used up
}

// run writes batches until Close has drained everything or the shutdown
// budget, which cancels ctx, is spent.
func (w *UsageWriter) run(ctx context.Context) {
	defer close(w.ran)
	for {
		rows, src, ok := w.next(ctx)
		if !ok {
			return
		}
		if len(rows) > 0 && !w.write(ctx, rows, &src) {
			return // the rows stay queued (or in the file) for spillLeftovers
		}
		w.consume(src)
	}
}

// next waits for the next batch: the queue's head first (after the
// linger), then the spill file, then the rows that were waiting for it. It
// returns false when the writer should stop.
func (w *UsageWriter) next(ctx context.Context) ([]*store.Usage, source, bool) {
	for {
		var wait time.Duration
		// Lock order: fmu, then mu, everywhere both are taken.
		w.fmu.Lock()
		w.mu.Lock()
		if ctx.Err() != nil {
			w.mu.Unlock()
			w.fmu.Unlock()
			return nil, source{}, false
		}
		switch {
		case w.queue.len() > 0:
			wait = usageLinger - time.Since(w.oldest)
			if w.queue.len() >= usageBatch || w.closed || w.oldest.IsZero() || wait <= 0 {
				// Peeked, not popped: the rows stay at the head until written
				// (consume), so a failed write or a shutdown keeps them in order.
				rows := w.queue.peek(usageBatch)
				w.mu.Unlock()
				w.fmu.Unlock()
				return rows, source{n: len(rows)}, true
			}
		case w.spill.rows > 0:
			w.mu.Unlock()
			// Read with fmu only: Record, which takes mu alone, is not held up by
			// the disk.
			rows, end, lines, bad, err := w.spill.next(usageBatch)
			w.fmu.Unlock()
			if err != nil {
				// An unreadable file cannot be replayed; it stays for
				// the next start, and new rows go to it meanwhile.
				w.log.Error("reading the usage spill file", "path", w.opt.SpillPath, "err", err)
				if !w.sleep(ctx, w.opt.RetryMax) {
					return nil, source{}, false
				}
				continue
			}
			if bad > 0 {
				w.dropped.Add(int64(bad))
				w.log.Error("usage spill file has undecodable rows; dropped them", "path", w.opt.SpillPath, "rows", bad)
			}
			return rows, source{file: true, end: end, n: lines}, true
		case len(w.pending) > 0:
			// The file is replayed: the rows waiting for it are the next
			// in order, and the queue is empty.
			// Still bounded by Queue; what does not fit keeps the writer diverting.
			n := min(len(w.pending), w.opt.Queue)
			for _, u := range w.pending[:n] {
				w.queue.push(u)
			}
			w.pending = append(w.pending[:0], w.pending[n:]...)
			w.diverting = len(w.pending) > 0
			// Zero: the moved rows are written at once, without a linger.
			w.oldest = time.Time{}
			w.mu.Unlock()
			w.fmu.Unlock()
			continue
		default:
			w.diverting = false
			if w.closed {
				w.mu.Unlock()
				w.fmu.Unlock()
				return nil, source{}, false
			}
		}
		w.mu.Unlock()
		w.fmu.Unlock()
		var expired <-chan time.Time
		if wait > 0 {
			w.linger.Reset(wait)
			expired = w.linger.C
		}
		select {
		case <-w.wake:
		case <-expired:
		case <-w.closing:
			// Close wants the queue written now: w.closed is set, and
			// the next turn takes it without lingering or returns.
		case <-ctx.Done():
		}
		if expired != nil {
			w.linger.Stop()
		}
	}
}

// write writes rows, retrying with backoff until it succeeds. It returns
// false if ctx ends (the shutdown budget is spent) first. A retry from the
// queue takes the rows queued meanwhile too, up to a batch, and says so in
// src.
func (w *UsageWriter) write(ctx context.Context, rows []*store.Usage, src *source) bool {
	closing := w.closing
	for attempt := 0; ; attempt++ {
		// A retry takes the queue's head afresh: rows recorded during the wait
		// join the batch. Rows from the file are retried as they were.
		if attempt > 0 && !src.file {
			w.mu.Lock()
			rows = w.queue.peek(usageBatch)
			w.mu.Unlock()
			src.n = len(rows)
		}
		actx, cancel := context.WithTimeout(ctx, w.opt.Timeout)
		err := w.st.RecordUsage(actx, rows...)
		cancel()
		if err == nil {
			w.written.Add(int64(len(rows)))
			if attempt > 0 {
				w.log.Info("usage rows written after failures", "rows", len(rows), "attempts", attempt+1)
			}
			return true
		}
		w.writeErrors.Add(1)
		if ctx.Err() != nil {
			return false
		}
		d := w.backoff(attempt)
		w.log.Warn("writing usage failed; retrying", "rows", len(rows), "first_request_id", rows[0].RequestID,
			"attempt", attempt+1, "retry_in", d.String(), "queued", w.Stats().Queued, "err", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-closing:
			// Close is worth one prompt attempt: the store may be back,
			// and the budget is short.
			closing = nil
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// backoff is the wait after the attempt-th failure (from 0): RetryMin
// doubled per failure up to RetryMax, of which a random half is taken
// off, so that replicas that failed together do not retry together.
func (w *UsageWriter) backoff(attempt int) time.Duration {
	d := w.opt.RetryMax
	if attempt < 32 {
		d = min(w.opt.RetryMin<<attempt, w.opt.RetryMax)
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx ends, reporting whether it waited d.
func (w *UsageWriter) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// consume removes a written batch from where it came from.
func (w *UsageWriter) consume(src source) {
	if !src.file {
		w.mu.Lock()
		// Only the writer pops, so the head is still the batch just written.
		w.queue.pop(src.n)
		// What is left arrived during the write: gathered as if it had
		// arrived now, as a full batch or after the linger.
		w.oldest = time.Now()
		w.mu.Unlock()
		return
	}
	w.fmu.Lock()
	defer w.fmu.Unlock()
	if err := w.spill.consumed(src.end, src.n); err != nil {
		// The rows are written; only the file's removal failed. They
		// will be written again by the next start.
		w.log.Error("removing the replayed usage spill file", "path", w.opt.SpillPath, "err", err)
	}
	w.inSpill.Store(int64(w.spill.rows))
}

// spiller appends pending rows to the spill file, a batch per fsync, until
// Close stops it.
func (w *UsageWriter) spiller() {
	defer close(w.spilled)
	for {
		select {
		case <-w.spillWake:
		case <-w.stopSpill:
			return
		}
		w.fmu.Lock()
		w.mu.Lock()
		// The spiller takes the pending rows as they are; Record starts a new
		// slice. fmu is held across the append, so the writer cannot replay the
		// file half-written.
		rows := w.pending
		w.pending = nil
		w.mu.Unlock()
		w.appendSpill(rows)
		w.fmu.Unlock()
		signal(w.wake) // the writer may be waiting for the file
	}
}

// appendSpill appends rows to the spill file, counting them spilled, or
// dropped if that fails. The caller holds fmu.
func (w *UsageWriter) appendSpill(rows []*store.Usage) error {
	if len(rows) == 0 {
		return nil
	}
	n, err := w.spill.append(rows)
	w.spilledRows.Add(int64(n))
	w.inSpill.Store(int64(w.spill.rows))
	if err != nil {
		w.mu.Lock()
		w.dropLocked(len(rows)-n, "appending to the spill file failed")
		w.mu.Unlock()
		w.log.Error("appending to the usage spill file", "path", w.opt.SpillPath, "rows", len(rows), "appended", n, "err", err)
		return err
	}
	return nil
}

// spillLate appends a row recorded after Close to the spill file, for the
// next start to replay.
func (w *UsageWriter) spillLate(u *store.Usage) {
	w.fmu.Lock()
	defer w.fmu.Unlock()
	if w.opt.SpillPath == "" {
		w.mu.Lock()
		w.dropLocked(1, "recorded after Close, and there is no spill file")
		w.mu.Unlock()
		return
	}
	// After Close is done with the file, each late row opens it again (the
	// append does) and closes it behind itself.
	if w.appendSpill([]*store.Usage{u}) == nil && w.finished {
		w.spill.close(nil)
	}
}

// spillLeftovers puts what Close could not write in the spill file, in
// order: the queue ahead of the file's rows, the rows pending for it
// after them. Then it closes the file.
func (w *UsageWriter) spillLeftovers() error {
	w.fmu.Lock()
	defer w.fmu.Unlock()
	w.finished = true
	w.mu.Lock()
	// The queue is older than the file's rows, pending newer: close puts
	// front ahead of the file's rows, the pending go at the end.
	front, pending := w.queue.drain(), w.pending
	w.pending = nil
	w.mu.Unlock()
	if w.opt.SpillPath == "" {
		if n := len(front) + len(pending); n > 0 {
			w.mu.Lock()
			w.dropLocked(n, "not written by shutdown, and there is no spill file")
			w.mu.Unlock()
			return fmt.Errorf("usage: %d rows not written, and dropped: no spill file", n)
		}
		return nil
	}
	perr := w.appendSpill(pending)
	n, err := w.spill.close(front)
	w.spilledRows.Add(int64(n))
	w.inSpill.Store(int64(w.spill.rows))
	if lost := len(front) - n; lost > 0 {
		w.mu.Lock()
		w.dropLocked(lost, "not written by shutdown, and the spill file failed")
		w.mu.Unlock()
	}
	if err != nil {
		w.log.Error("closing the usage spill file", "path", w.opt.SpillPath, "err", err)
	}
	if n+len(pending) > 0 {
		w.log.Warn("usage rows not written by shutdown are in the spill file, for the next start", "path", w.opt.SpillPath,
			"rows", w.spill.rows)
	}
	if err = errors.Join(perr, err); err != nil {
		return fmt.Errorf("usage: spilling at shutdown: %w", err)
	}
	return nil
}

// dropLocked counts n rows dropped, logging why at most every 10 seconds.
// The caller holds mu.
func (w *UsageWriter) dropLocked(n int, why string) {
	total := w.dropped.Add(int64(n))
	if now := time.Now(); now.Sub(w.dropLog) >= 10*time.Second {
		w.dropLog = now
		w.log.Error("usage rows dropped: "+why, "rows", n, "dropped_total", total, "queue", w.opt.Queue, "spill_path", w.opt.SpillPath)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// fifo is the in-memory queue: a slice with a moving head, compacted when
// the dead prefix is most of it.
type fifo struct {
	s    []*store.Usage
	head int
}

func (q *fifo) len() int { return len(q.s) - q.head }

func (q *fifo) push(u *store.Usage) { q.s = append(q.s, u) }

// peek returns a copy of up to n rows at the head, leaving them queued.
func (q *fifo) peek(n int) []*store.Usage {
	n = min(n, q.len())
	return append([]*store.Usage(nil), q.s[q.head:q.head+n]...)
}

func (q *fifo) pop(n int) {
	n = min(n, q.len())
	// Cleared so the popped rows can be collected while the slice lives on.
	clear(q.s[q.head : q.head+n])
	q.head += n
	switch {
	case q.head == len(q.s):
		q.s, q.head = q.s[:0], 0
	case q.head > len(q.s)/2 && q.head >= 1024:
		m := copy(q.s, q.s[q.head:])
		clear(q.s[m:])
		q.s, q.head = q.s[:m], 0
	}
}

// drain empties the queue, returning its rows in order.
func (q *fifo) drain() []*store.Usage {
	rows := append([]*store.Usage(nil), q.s[q.head:]...)
	q.s, q.head = nil, 0
	return rows
}
