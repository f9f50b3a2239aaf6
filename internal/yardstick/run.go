package yardstick

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/hostcpu"
)

// Options is one run.
type Options struct {
	Targets  []*Target
	Baseline string // a target's name, or ""
	// Concurrency is the sweep: requests in flight (closed loop), or the
	// cap on them at a fixed arrival rate (open loop).
	Concurrency []int
	// Requests per target and level, split over the rounds; 0 means only
	// Duration bounds a level.
	Requests int
	// Duration per target and level, split over the rounds; 0 means only
	// Requests bounds a level.
	Duration time.Duration
	// Rate in requests per second makes the load open loop.
	Rate   float64
	Rounds int
	// MaxTime caps the whole run, whatever the other bounds say.
	MaxTime        time.Duration
	RequestTimeout time.Duration
	MaxTokens      int
	Prompt         string
	// BunchAfter is X in the bunched-gap share (see bunched).
	BunchAfter  time.Duration
	AllowRemote bool

	// Upstream, when set, is the fake upstream the fault probes go
	// through; FaultProbes of each kind per target, each waiting up to
	// CancelWait for the upstream to see the client's close.
	Upstream    *Upstream
	FaultProbes int
	CancelWait  time.Duration

	// Progress is told the number of steps once, then each step done.
	Progress Progress

	started time.Time // the run's start, which Sample.At counts from
}

// Progress shows a run's progress; a nil Progress shows nothing.
type Progress interface {
	Start(total int)
	Add(n int)
	Finish()
}

// The open loop's arrival rates, per second, that bench can pace.
const minRate, maxRate float64 = 0.01, 100000

// Check reports every problem with o at once.
func (o *Options) Check() error {
	var errs []error
	if len(o.Targets) == 0 {
		errs = append(errs, errors.New("no --target"))
	}
	seen := map[string]bool{}
	for _, t := range o.Targets {
		if seen[t.Name] {
			errs = append(errs, fmt.Errorf("target %s given twice", t.Name))
		}
		seen[t.Name] = true
		if err := t.Resolve(); err != nil {
			errs = append(errs, err)
		} else if !o.AllowRemote && !t.Loopback() {
			errs = append(errs, fmt.Errorf("target %s (%s) is not on loopback: pass --allow-remote to measure it", t.Name, t.PublicURL()))
		}
	}
	if o.Baseline != "" && !seen[o.Baseline] {
		errs = append(errs, fmt.Errorf("--baseline %s names no target", o.Baseline))
	}
	if len(o.Concurrency) == 0 {
		errs = append(errs, errors.New("no concurrency level"))
	}
	for _, c := range o.Concurrency {
		if c < 1 || c > 10000 {
			errs = append(errs, fmt.Errorf("concurrency %d: want 1 to 10000", c))
		}
	}
	if o.Requests <= 0 && o.Duration <= 0 {
		errs = append(errs, errors.New("want --requests or --duration to bound each level"))
	}
	if o.MaxTime <= 0 {
		errs = append(errs, errors.New("--max-time must be positive: every run is bounded"))
	}
	if o.Rounds < 1 {
		errs = append(errs, errors.New("--rounds must be at least 1"))
	}
	if o.Rate == 0 && o.Requests > 0 {
		for _, c := range o.Concurrency {
			if c > o.Requests {
				errs = append(errs, fmt.Errorf("concurrency %d is more than --requests %d: the level could not have that many in flight", c, o.Requests))
			}
		}
	}
	if math.IsNaN(o.Rate) || o.Rate < 0 || (o.Rate > 0 && o.Rate < minRate) || o.Rate > maxRate {
		errs = append(errs, fmt.Errorf("--rate: want %g to %g requests per second", minRate, maxRate))
	}
	if o.RequestTimeout <= 0 {
		errs = append(errs, errors.New("--request-timeout must be positive"))
	}
	if o.FaultProbes < 0 || o.FaultProbes > 1000 {
		errs = append(errs, errors.New("--fault-probes: want 0 to 1000"))
	}
	if o.Upstream != nil && o.FaultProbes > 0 && o.CancelWait <= 0 {
		errs = append(errs, errors.New("--cancel-wait must be positive"))
	}
	return errors.Join(errs...)
}

// Run measures every target at every level, in alternating rounds, then
// the fault probes when an upstream is given.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.MaxTime)
	defer cancel()
	rep := newReport(&o)
	o.started = time.Now()
	host, herr := hostcpu.Read()
	if o.Progress == nil {
		o.Progress = nopProgress{}
	}
	steps := -1
	if o.Requests > 0 {
		steps = len(o.Targets)*len(o.Concurrency)*o.Requests + len(o.Targets)*o.FaultProbes*3*boolInt(o.Upstream != nil)
	}
	o.Progress.Start(steps)
	defer o.Progress.Finish()

	for _, conc := range o.Concurrency {
		c := clientFor(conc)
		acc := make([]*accum, len(o.Targets))
		for i := range acc {
			acc[i] = &accum{}
		}
		rounds := o.roundsAt(conc)
		for r := range rounds {
			for k := range o.Targets {
				i := (k + r) % len(o.Targets) // a different target goes first each round
				quota := 0
				if o.Requests > 0 {
					quota = o.Requests*(r+1)/rounds - o.Requests*r/rounds
					if quota == 0 {
						continue
					}
				}
				o.round(ctx, o.Targets[i], c, conc, quota, rounds, acc[i])
			}
		}
		c.CloseIdleConnections()
		// A level the cap or an interrupt cut is reported only when every
		// target has samples in it, its cells marked partial: never one
		// target alone.
		cut := ctx.Err() != nil
		if cut && slices.ContainsFunc(acc, func(a *accum) bool { return len(a.samples) == 0 }) {
			break
		}
		for i, t := range o.Targets {
			if len(acc[i].samples) > 0 {
				cell := acc[i].cell(t.Name, conc, o.BunchAfter)
				cell.Partial = cut
				rep.Cells = append(rep.Cells, cell)
			}
		}
		if cut {
			break
		}
	}
	if o.Upstream != nil && o.FaultProbes > 0 && ctx.Err() == nil {
		// MaxTime bounds the probes too: a probe it cuts is not counted.
		c := clientFor(4)
		for _, t := range o.Targets {
			f := measureFaults(ctx, t, o.Upstream, c, o.FaultProbes, o.CancelWait, o.MaxTokens)
			o.Progress.Add(o.FaultProbes * 3)
			rep.Faults = append(rep.Faults, f)
		}
		c.CloseIdleConnections()
	}
	rep.Interrupted = parent.Err() != nil
	rep.Truncated = ctx.Err() != nil && !rep.Interrupted || o.shortened()
	rep.compareBaseline()
	rep.Elapsed = time.Since(rep.Started).Seconds()
	if now, err := hostcpu.Read(); herr == nil && err == nil {
		u := hostcpu.Between(host, now)
		rep.Host = &u
	}
	return rep, nil
}

// roundsAt is the number of rounds a level is split into: in a closed
// loop bounded by Requests, few enough that every round has at least conc
// requests, so that conc of them are really in flight at once.
func (o *Options) roundsAt(conc int) int {
	if o.Rate > 0 || o.Requests <= 0 {
		return o.Rounds
	}
	return max(1, min(o.Rounds, o.Requests/conc))
}

// roundTime is a round's share of Duration, shortened so that every
// target's rounds at every level fit in nine tenths of MaxTime: a long
// --duration under a short --max-time measures every target a little
// rather than the first one only.
func (o *Options) roundTime(rounds int) time.Duration {
	d := o.Duration / time.Duration(rounds)
	fit := o.MaxTime * 9 / 10 / time.Duration(len(o.Targets)*len(o.Concurrency)*rounds)
	return min(d, fit)
}

// shortened reports whether roundTime cut the rounds short.
func (o *Options) shortened() bool {
	for _, c := range o.Concurrency {
		r := o.roundsAt(c)
		if o.Duration > 0 && o.roundTime(r) < o.Duration/time.Duration(r) {
			return true
		}
	}
	return false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// accum collects one target's samples at one level over the rounds.
type accum struct {
	mu      sync.Mutex
	samples []Sample
	wall    time.Duration
	cpu     time.Duration
	rss     int64
	hasProc bool
	// inFlight counts requests under way; peak is its highest value.
	inFlight, peak atomic.Int64
}

func (a *accum) begin() {
	n := a.inFlight.Add(1)
	for {
		p := a.peak.Load()
		if n <= p || a.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (a *accum) add(s Sample) {
	a.mu.Lock()
	a.samples = append(a.samples, s)
	a.mu.Unlock()
}

// round runs one round of quota requests (0: until the round's share of
// Duration) against t at concurrency conc.
func (o *Options) round(ctx context.Context, t *Target, c *http.Client, conc, quota, rounds int, a *accum) {
	var deadline time.Time
	if o.Duration > 0 {
		deadline = time.Now().Add(o.roundTime(rounds))
	}
	more := func(n int64) bool {
		return ctx.Err() == nil && (quota == 0 || n <= int64(quota)) && (deadline.IsZero() || time.Now().Before(deadline))
	}
	one := func() {
		rctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
		a.begin()
		sent := time.Now()
		s := t.measure(rctx, c, o.Prompt, o.MaxTokens)
		s.At = sent.Sub(o.started)
		a.inFlight.Add(-1)
		cancel()
		if ctx.Err() != nil {
			return // cut by the run's end, not the target's doing
		}
		a.add(s)
		o.Progress.Add(1)
	}
	stopProc := a.watch(t.PID)
	start := time.Now()
	var issued atomic.Int64
	var wg sync.WaitGroup
	if o.Rate > 0 {
		sem := make(chan struct{}, conc)
		tick := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
		for more(issued.Add(1)) {
			sem <- struct{}{}
			wg.Go(func() { one(); <-sem })
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		tick.Stop()
	} else {
		workers := conc
		if quota > 0 {
			workers = min(conc, quota)
		}
		for range workers {
			wg.Go(func() {
				for more(issued.Add(1)) {
					one()
				}
			})
		}
	}
	wg.Wait()
	a.wall += time.Since(start)
	stopProc()
}

// watch samples pid's CPU time and peak RSS until the returned func is
// called; pid 0 watches nothing.
func (a *accum) watch(pid int) func() {
	if pid <= 0 {
		return func() {}
	}
	before, err := readProc(pid)
	if err != nil {
		return func() {}
	}
	a.hasProc = true
	a.rss = max(a.rss, before.RSS)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if s, err := readProc(pid); err == nil {
					a.mu.Lock()
					a.rss = max(a.rss, s.RSS)
					a.mu.Unlock()
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if after, err := readProc(pid); err == nil {
			a.cpu += after.CPU - before.CPU
			a.rss = max(a.rss, after.RSS)
		}
	}
}

// maxGapSamples bounds the gaps a report keeps per cell for its plots.
const maxGapSamples = 20000

func (a *accum) cell(name string, conc int, bunchAfter time.Duration) Cell {
	c := Cell{Target: name, Concurrency: conc, PeakInFlight: int(a.peak.Load()), Requests: len(a.samples), Errors: map[string]int{}}
	var ttfb, ttfw, ttc, gaps, tps []float64
	nb := 0
	for _, s := range a.samples {
		if s.TTFB > 0 {
			ttfb = append(ttfb, ms(s.TTFB))
		}
		if s.TTFW > 0 {
			ttfw = append(ttfw, ms(s.TTFW))
		}
		for _, g := range s.Gaps {
			gaps = append(gaps, ms(g))
		}
		nb += bunched(s.Gaps, bunchAfter)
		if s.Err != "" {
			c.Errors[s.Err]++
			continue
		}
		c.OK++
		ttc = append(ttc, ms(s.TTC))
		if s.Tokens > 1 && s.TTC > s.TTFW && s.TTFW > 0 {
			tps = append(tps, float64(s.Tokens-1)/(s.TTC-s.TTFW).Seconds())
		}
	}
	c.TTFB, c.TTFW, c.TTC, c.TokensPerSec = summarise(ttfb), summarise(ttfw), summarise(ttc), summarise(tps)
	c.Gaps = len(gaps)
	if len(gaps) > 0 {
		s := slices.Sorted(slices.Values(gaps))
		c.GapP50, c.GapP99 = quantile(s, .5), quantile(s, .99)
		c.BunchedShare = float64(nb) / float64(len(gaps))
		c.GapSamples = thin(s, maxGapSamples)
	}
	c.TTFWSamples = slices.Sorted(slices.Values(ttfw))
	byStart := slices.SortedFunc(slices.Values(a.samples), func(x, y Sample) int { return cmp.Compare(x.At, y.At) })
	for _, s := range byStart {
		if s.TTFW > 0 {
			c.TTFWOverTime = append(c.TTFWOverTime, [2]float64{s.At.Seconds(), ms(s.TTFW)})
		}
		if s.Err != "" {
			c.FailedAt = append(c.FailedAt, s.At.Seconds())
		}
	}
	c.TTFWOverTime, c.FailedAt = thin(c.TTFWOverTime, maxGapSamples), thin(c.FailedAt, maxGapSamples)
	if a.wall > 0 {
		c.Throughput = float64(c.OK) / a.wall.Seconds()
	}
	if a.hasProc && len(a.samples) > 0 {
		cpu := ms(a.cpu) / float64(len(a.samples))
		rss := float64(a.rss) / (1 << 20)
		c.CPUPerRequestMs, c.RSSMaxMB = &cpu, &rss
	}
	return c
}

// thin keeps n of xs, evenly spaced, when it has more.
func thin[T any](xs []T, n int) []T {
	if len(xs) <= n {
		return xs
	}
	step := float64(len(xs)) / float64(n)
	out := make([]T, 0, n)
	for i := range n {
		out = append(out, xs[int(float64(i)*step)])
	}
	return out
}

type nopProgress struct{}

func (nopProgress) Start(int) {}
func (nopProgress) Add(int)   {}
func (nopProgress) Finish()   {}
