package cache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeout is the cause of a guarded operation that ran out of its time.
var ErrTimeout = errors.New("cache: operation timed out")

// ErrBadEntry marks an entry the store returned but could not decode (or
// could not encode for writing): the store is up, the entry is not.
var ErrBadEntry = errors.New("cache: bad entry")

// Defaults of GuardOptions.
const (
	DefaultGuardTimeout  = 50 * time.Millisecond
	DefaultGuardFailures = 3
	DefaultGuardCooldown = 10 * time.Second
)

// warnEvery spaces the failure warnings: a frozen store fails every
// request, and one line per request would drown the log.
const warnEvery = 10 * time.Second

// GuardOptions configures Guard. Zero fields take the defaults.
type GuardOptions struct {
	// Timeout bounds each Get and Set (default 50ms). A Get that fails
	// or runs out of time is a miss.
	Timeout time.Duration
	// Failures is how many failed or timed-out operations in a row make
	// the guard skip the cache (default 3).
	Failures int
	// Cooldown is how long the cache is skipped; then one operation
	// probes it, and its success brings the cache back (default 10s).
	Cooldown time.Duration
	// Log gets a warning when the cache fails (at most one every 10s,
	// with the count since the last), when it is skipped and when it is
	// back. Nil discards.
	Log *slog.Logger
}

// GuardStats are a Guarded's counters since it was made.
type GuardStats struct {
	Timeouts uint64 // operations that ran out of Timeout
	Errors   uint64 // operations the inner cache failed, bad entries included
	Skipped  uint64 // operations not tried while the cache was skipped
	Opens    uint64 // times the cache started being skipped
	Open     bool   // the cache is being skipped now
	// Abandoned counts inner operations still running after their
	// caller moved on. It stays above zero only when the inner cache
	// does not honour its context.
	Abandoned int64
}

// Guarded is a Cache in front of a remote one that may be slow, down or
// frozen: it costs a request at most Timeout per operation, and nothing
// while the inner cache is skipped. Its Get and Set never return an
// error; failures are counted and logged. Safe for concurrent use.
type Guarded struct {
	inner Cache
	opt   GuardOptions

	timeouts, errs, skipped, opens atomic.Uint64
	abandoned                      atomic.Int64

	mu        sync.Mutex
	failures  int       // in a row
	openUntil time.Time // zero while the cache is in use
	probing   bool
	warned    time.Time // the last failure warning
	unwarned  int       // failures since
}

// Guard wraps inner.
func Guard(inner Cache, opt GuardOptions) *Guarded {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultGuardTimeout
	}
	if opt.Failures <= 0 {
		opt.Failures = DefaultGuardFailures
	}
	if opt.Cooldown <= 0 {
		opt.Cooldown = DefaultGuardCooldown
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	return &Guarded{inner: inner, opt: opt}
}

// Get implements Cache. It returns within Timeout (or ctx, if sooner);
// a failure, a timeout or a skipped cache is a miss.
func (g *Guarded) Get(ctx context.Context, key string) (*Entry, error) {
	return g.do(ctx, "get", func(ctx context.Context) (*Entry, error) { return g.inner.Get(ctx, key) }), nil
}

// Set implements Cache. It returns within Timeout, whatever ctx does: the
// write is not abandoned because the caller left. It never fails.
func (g *Guarded) Set(ctx context.Context, key string, e *Entry) error {
	g.do(context.WithoutCancel(ctx), "set", func(ctx context.Context) (*Entry, error) { return nil, g.inner.Set(ctx, key, e) })
	return nil
}

// Stats returns the counters.
func (g *Guarded) Stats() GuardStats {
	g.mu.Lock()
	open := !g.openUntil.IsZero()
	g.mu.Unlock()
	return GuardStats{
		Timeouts: g.timeouts.Load(), Errors: g.errs.Load(), Skipped: g.skipped.Load(), Opens: g.opens.Load(),
		Open: open, Abandoned: g.abandoned.Load(),
	}
}

type outcome int

const (
	succeeded outcome = iota
	failed
	callerLeft // says nothing about the inner cache
)

type result struct {
	e   *Entry
	err error
}

// call is one inner operation, run on its own goroutine so that an inner
// cache that ignores its context still cannot hold the caller.
type call struct {
	done  chan result // buffered: the goroutine never blocks on it
	state atomic.Int32
}

const (
	running int32 = iota
	finished
	abandoned
)

func (g *Guarded) do(ctx context.Context, op string, f func(context.Context) (*Entry, error)) *Entry {
	probe, ok := g.admit()
	if !ok {
		g.skipped.Add(1)
		return nil
	}
	due := time.Now().Add(g.opt.Timeout)
	ctx, cancel := context.WithDeadlineCause(ctx, due, ErrTimeout)
	defer cancel()
	c := &call{done: make(chan result, 1)}
	go func() {
		e, err := f(ctx)
		c.done <- result{e, err}
		if c.state.Swap(finished) == abandoned {
			g.abandoned.Add(-1)
		}
	}()
	var r result
	select {
	case r = <-c.done:
	case <-ctx.Done():
		g.abandoned.Add(1)
		if c.state.Swap(abandoned) != finished {
			r.err = context.Cause(ctx)
			break
		}
		// It finished as we gave up: take its result.
		g.abandoned.Add(-1)
		r = <-c.done
	}
	o := succeeded
	switch {
	case r.err == nil:
	case errors.Is(r.err, ErrBadEntry):
		g.errs.Add(1) // the store answered: not a failure of the store
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrTimeout):
		o = callerLeft
	case ctx.Err() != nil || !time.Now().Before(due):
		// A client that sets socket deadlines from ctx may fail with
		// its own timeout error a moment before ctx says it is done.
		g.timeouts.Add(1)
		o, r.err = failed, ErrTimeout
	default:
		g.errs.Add(1)
		o = failed
	}
	g.settle(probe, o, op, r.err)
	if r.err != nil {
		return nil
	}
	return r.e
}

// admit says whether an operation may use the inner cache, and whether
// it is the probe of a skipped one.
func (g *Guarded) admit() (probe, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.openUntil.IsZero() {
		return false, true
	}
	if g.probing || time.Now().Before(g.openUntil) {
		return false, false
	}
	g.probing = true
	return true, true
}

// settle records an operation's outcome.
func (g *Guarded) settle(probe bool, o outcome, op string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if probe {
		g.probing = false
	}
	if err != nil && o != callerLeft {
		g.warn(op, err)
	}
	switch o {
	case succeeded:
		g.failures = 0
		if probe {
			g.openUntil = time.Time{}
			g.opt.Log.Info("cache back in use")
		}
	case failed:
		g.failures++
		switch {
		case probe:
			g.openUntil = time.Now().Add(g.opt.Cooldown)
		case g.openUntil.IsZero() && g.failures >= g.opt.Failures:
			g.openUntil = time.Now().Add(g.opt.Cooldown)
			g.opens.Add(1)
			g.opt.Log.Warn("cache skipped: every read is a miss and every write is dropped until it answers again",
				"failures", g.failures, "retry_in", g.opt.Cooldown)
		}
	}
}

// warn logs a failure, at most once every warnEvery, with the number of
// failures since the last warning. Call with mu held.
func (g *Guarded) warn(op string, err error) {
	g.unwarned++
	now := time.Now()
	if !g.warned.IsZero() && now.Sub(g.warned) < warnEvery {
		return
	}
	g.opt.Log.Warn("cache failing: reads are misses", "op", op, "err", err, "failures", g.unwarned)
	g.warned, g.unwarned = now, 0
}
