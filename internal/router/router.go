// Package router maps a model alias to an ordered list of deployments and
// owns everything about reaching them: first-token timeouts, the overall
// timeout, one deadline shared by every attempt, retries with backoff and a
// retry budget, fallback, hedging, latency-aware balancing and circuit
// breakers. *Router is itself a provider: callers cannot tell that a
// fallback happened except from the Report.
package router

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
)

// Defaults from the lesson: a healthy call starts within a second or two,
// so five seconds of silence means trouble; the whole answer gets twenty.
const (
	DefaultTimeout           = 20 * time.Second
	DefaultFirstTokenTimeout = 5 * time.Second
)

// Deployment is one way to serve an alias: a provider and an upstream model.
type Deployment struct {
	// Provider and Model name the upstream; ID defaults to "provider/model".
	ProviderName string
	Model        string
	ID           string
	Provider     provider.Provider
	// Priority orders deployments: lower first. Deployments of equal
	// priority are balanced by measured latency.
	Priority int
	// Weight scales a deployment's share among equals (default 1).
	Weight float64
	// FirstTokenTimeout overrides the alias's.
	FirstTokenTimeout time.Duration
	// Continuation is how the deployment is asked to continue a broken
	// answer (see ContinuationFor; "": ContinueInstruct).
	Continuation Continuation
}

// Adaptive derives the first-token timeout from the deployment's observed
// p99 TTFT: Multiplier × p99, clamped to [Min, Max], once MinSamples were
// seen; until then the static timeout applies.
type Adaptive struct {
	Multiplier float64
	Min, Max   time.Duration
	MinSamples int
}

// Hedge starts a second attempt on the next deployment when the first has
// not produced a token after Delay (0: the deployment's observed p95 TTFT,
// never below MinDelay). The first to produce a token wins.
type Hedge struct {
	Enabled  bool
	Delay    time.Duration
	MinDelay time.Duration
}

// Alias is a model name clients use and how to serve it.
type Alias struct {
	Name        string
	Deployments []Deployment
	// Timeout is the overall per-request timeout (default 20s).
	Timeout time.Duration
	// FirstTokenTimeout is the default for the deployments (default 5s).
	FirstTokenTimeout time.Duration
	Adaptive          *Adaptive
	// MaxAttempts bounds attempts per request, fallbacks and retries
	// together (default: two per deployment, at most 6).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the exponential backoff with full
	// jitter between passes over the deployments (100ms, 2s).
	BackoffBase, BackoffMax time.Duration
	Hedge                   Hedge
	Breaker                 BreakerConfig
	// OnStreamFailure is what an answer that breaks after its first token
	// does: StreamFailureContinue (the default) asks the next deployment
	// to continue it, StreamFailureEnd ends it with the error. An answer
	// that passed a tool call on, or asked for several choices, ends.
	OnStreamFailure string
	// MaxContinuations bounds the continuation attempts of one request
	// (default 2).
	MaxContinuations int
	// StallTimeout: once the answer started, this long without a chunk
	// (text, tool call, thinking, finish or usage) is a failure, which a
	// continuation takes over (default 15s; only with
	// StreamFailureContinue).
	StallTimeout time.Duration
	// ContinuationPrompt is the instruction of ContinueInstruct (default
	// DefaultContinuationPrompt).
	ContinuationPrompt string
}

// Config configures a Router.
type Config struct {
	Aliases []Alias
	// Passthrough, if set, serves PROVIDER/MODEL names besides the
	// aliases (see Passthrough).
	Passthrough *Passthrough
	// RetryRatio is the retry budget: retries per request over a 10 s
	// window (default 0.2); at least one retry a second is always allowed.
	RetryRatio float64
	// Seed seeds the balancer's random choices (0: random).
	Seed uint64
}

// Router routes requests for aliases. It is safe for concurrent use.
type Router struct {
	aliases map[string]*alias
	names   []string
	health  map[string]*health // written by New only
	pt      *passthrough       // nil: no PROVIDER/MODEL names
	budget  *retryBudget

	mu  sync.Mutex
	rng *rand.Rand
}

type alias struct {
	Alias
	deps []*deployment
	// maxEjected is how many deployments a request may skip as open.
	maxEjected int
}

type deployment struct {
	Deployment
	health *health
}

// New returns a Router. It fails on an alias without deployments or with
// a deployment that has no provider.
func New(cfg Config) (*Router, error) {
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	// PCG takes two words; the second is the seed mixed with the golden
	// ratio's bits, so one configured seed gives reproducible shuffles.
	r := &Router{
		aliases: map[string]*alias{},
		health:  map[string]*health{},
		budget:  newRetryBudget(cfg.RetryRatio, 1),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	for _, ac := range cfg.Aliases {
		if _, dup := r.aliases[ac.Name]; dup {
			return nil, fmt.Errorf("router: alias %q defined twice", ac.Name)
		}
		// Deployments of one ID share one health across aliases: the same
		// upstream fails or recovers for every alias at once. The first alias to
		// name an ID sets its breaker settings.
		a, err := newAlias(ac, func(id string) *health { return healthOf(r.health, id, ac.Breaker) })
		if err != nil {
			return nil, err
		}
		r.aliases[ac.Name] = a
		r.names = append(r.names, ac.Name)
	}
	sort.Strings(r.names)
	if pc := cfg.Passthrough; pc != nil {
		r.pt = newPassthrough(*pc)
	}
	return r, nil
}

// newAlias applies the defaults to ac; health returns the live state of
// a deployment, by ID (deployments of one ID share it, across aliases).
func newAlias(ac Alias, health func(id string) *health) (*alias, error) {
	if len(ac.Deployments) == 0 {
		return nil, fmt.Errorf("router: alias %q has no deployments", ac.Name)
	}
	a := &alias{Alias: ac}
	if a.Timeout <= 0 {
		a.Timeout = DefaultTimeout
	}
	if a.FirstTokenTimeout <= 0 {
		a.FirstTokenTimeout = DefaultFirstTokenTimeout
	}
	if a.MaxAttempts <= 0 {
		a.MaxAttempts = min(2*len(ac.Deployments), 6)
	}
	if a.BackoffBase <= 0 {
		a.BackoffBase = 100 * time.Millisecond
	}
	if a.BackoffMax <= 0 {
		a.BackoffMax = 2 * time.Second
	}
	if a.OnStreamFailure == "" {
		a.OnStreamFailure = StreamFailureContinue
	}
	if a.MaxContinuations <= 0 {
		a.MaxContinuations = DefaultMaxContinuations
	}
	if a.StallTimeout <= 0 {
		a.StallTimeout = DefaultStallTimeout
	}
	if a.ContinuationPrompt == "" {
		a.ContinuationPrompt = DefaultContinuationPrompt
	}
	if a.Hedge.MinDelay <= 0 {
		a.Hedge.MinDelay = 50 * time.Millisecond
	}
	for _, dc := range ac.Deployments {
		if dc.Provider == nil {
			return nil, fmt.Errorf("router: alias %q: deployment %s/%s has no provider", ac.Name, dc.ProviderName, dc.Model)
		}
		if dc.ID == "" {
			dc.ID = dc.ProviderName + "/" + dc.Model
		}
		if dc.Weight <= 0 {
			dc.Weight = 1
		}
		a.deps = append(a.deps, &deployment{Deployment: dc, health: health(dc.ID)})
	}
	a.maxEjected = a.Breaker.maxEjected(len(a.deps))
	return a, nil
}

// ContinuesAnswers reports whether alias name continues an answer that
// broke after its first token (on_stream_failure: continue), and so one
// whose replica died.
func (r *Router) ContinuesAnswers(name string) bool {
	a, err := r.lookup(name)
	return err == nil && a.OnStreamFailure != StreamFailureEnd && a.MaxContinuations > 0
}

// Aliases returns the alias names, sorted.
func (r *Router) Aliases() []string { return slices.Clone(r.names) }

// Timeout returns how long a request for the alias name may take, from
// its arrival: every attempt, retry and fallback shares that deadline,
// which the request's call sets on the context it routes with (package
// call). The error says why name is not served: ErrUnknownModel,
// ErrPassthroughOff or ErrPassthroughFull (see Passthrough); a
// PROVIDER/MODEL name's alias is made on first use.
func (r *Router) Timeout(name string) (time.Duration, error) {
	a, err := r.lookup(name)
	if err != nil {
		return 0, err
	}
	return a.Timeout, nil
}

// lookup finds the alias name: a configured one, else a PROVIDER/MODEL
// name's.
func (r *Router) lookup(name string) (*alias, error) {
	if a := r.aliases[name]; a != nil {
		return a, nil
	}
	if r.pt == nil {
		return nil, ErrUnknownModel
	}
	return r.pt.resolve(r, name)
}

// Health returns every deployment's live state: the configured aliases',
// then the PROVIDER/MODEL names' in use.
func (r *Router) Health() []Status {
	now := time.Now()
	var out []Status
	add := func(a *alias) {
		for _, d := range a.deps {
			s := d.health.status(now)
			s.Alias, s.Deployment = a.Name, d.ID
			out = append(out, s)
		}
	}
	for _, name := range r.names {
		add(r.aliases[name])
	}
	if r.pt != nil {
		for _, a := range r.pt.inUse() {
			add(a)
		}
	}
	return out
}

// Stream implements provider.Provider: req.Model names an alias.
func (r *Router) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return r.StreamReport(ctx, req, nil)
}

// StreamReport is Stream, filling rep with what the router did: the
// attempts, the deployment that served, the deadline. rep is written only
// on the calling goroutine, between the iterator's yields, so the caller
// may read it whenever it has control.
//
// The deadline is ctx's (none if it has none): the caller sets it, from
// the alias's Timeout; every attempt, retry and fallback shares it. When
// it passes after the first token, the stream ends with FinishTimeout
// chunks and estimated usage rather than an error, keeping what was
// written.
func (r *Router) StreamReport(ctx context.Context, req *chat.Request, rep *Report) chat.Stream {
	return (&session{r: r, req: req, rep: rep, ctx: ctx}).run
}

// StreamFallback is StreamReport with a second choice, for a routing rule
// that sent a request to another alias than the one asked for: req is for
// the rule's alias, fallback the same request for the alias asked for
// (shaped by its own levers). When every deployment of req's alias fails
// before the first token, fallback is routed, unless the deadline passed,
// the caller left or the request itself was at fault (a context too long
// for the rule's alias falls back: the other may take it).
//
// Both share ctx's deadline: the fallback gets what is left of it. The
// report says so (Report.Fallback, Attempt.Fallback, and Alias reads
// "fast, fell back to chat").
func (r *Router) StreamFallback(ctx context.Context, req, fallback *chat.Request, rep *Report) chat.Stream {
	return (&session{r: r, req: req, next: fallback, rep: rep, ctx: ctx}).run
}

// start begins a request's walk: its alias, deadline and report.
func (s *session) start(yield func(chat.Chunk, error) bool) error {
	s.yield = yield
	if s.rep == nil {
		s.rep = &Report{}
	}
	a, err := s.r.lookup(s.req.Model)
	if errors.Is(err, ErrUnknownModel) {
		return &chat.Error{Category: chat.CategoryNotFound, Message: fmt.Sprintf("the model %q does not exist", s.req.Model)}
	} else if err != nil {
		return &chat.Error{Category: chat.CategoryNotFound, Message: fmt.Sprintf("the model %q is not served: %v", s.req.Model, err)}
	}
	// The lookup is repeated here (the caller's Timeout did one): the
	// stream may be called without it, and a PROVIDER/MODEL alias is made on
	// first use.
	s.alias = a
	start := time.Now()
	s.rep.Alias = a.Name
	s.rep.Deadline, _ = s.ctx.Deadline()
	// Once per request, not per walk: a fallback is not a second request for
	// the retry budget.
	s.r.budget.request(start)
	return nil
}

// order returns the deployments to try and those to skip because their
// circuit is open (see eject for which, and for spare). To try: closed
// circuits first, then open ones, then those cooling down after a
// Retry-After; then by priority. Within a priority, closed ones put the
// two-random-choices winner by latency score first, then the rest by
// score; open ones go by the end of their cooldown, soonest first. The
// common case, every circuit closed, allocates no more than the clone.
func (r *Router) order(a *alias, now, deadline time.Time) (try, skip []*deployment, spare int) {
	// a.deps is shared by every request of the alias: each orders a copy.
	deps := slices.Clone(a.deps)
	if len(deps) == 1 {
		return deps, nil, 0
	}
	// On the stack for up to 8 deployments: ordering allocates nothing more.
	var buf [8]cand
	cs := buf[:0]
	for _, d := range deps {
		c := cand{d: d, v: d.health.view(now)}
		c.v.score /= d.Weight
		c.place()
		cs = append(cs, c)
	}
	spare = eject(cs, a.maxEjected, deadline)
	// The shuffle breaks ties at random (the sorts below are stable), and
	// makes the first two of each group two random choices. r.rng is not
	// safe for concurrent use, hence the lock.
	r.mu.Lock()
	r.rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	r.mu.Unlock()
	slices.SortStableFunc(cs, func(x, y cand) int {
		if x.rank != y.rank {
			return int(x.rank - y.rank)
		}
		if x.d.Priority != y.d.Priority {
			return x.d.Priority - y.d.Priority
		}
		if x.rank == rankOpen {
			return x.v.reopen.Compare(y.v.reopen)
		}
		return 0
	})
	for i := 0; i < len(cs); {
		j := i
		for j < len(cs) && cs[j].d.Priority == cs[i].d.Priority && cs[j].rank == cs[i].rank {
			j++
		}
		// Two random choices, not the best score: requests ordering at the
		// same moment would all pick the same best one and pile onto it
		// before its score (outstanding, latency) caught up; the better of
		// two random ones spreads the load while still avoiding the slow.
		if group := cs[i:j]; len(group) > 1 && (group[0].rank == rankClosed || group[0].rank == rankCooling) {
			// group is shuffled; compare its first two.
			if group[1].v.score < group[0].v.score {
				group[0], group[1] = group[1], group[0]
			}
			slices.SortStableFunc(group[1:], func(x, y cand) int {
				switch {
				case x.v.score < y.v.score:
					return -1
				case x.v.score > y.v.score:
					return 1
				}
				return 0
			})
		}
		i = j
	}
	n := len(cs)
	for i, c := range cs {
		deps[i] = c.d
		// rankSkipped sorts last: the skipped form the tail, from n.
		if c.rank == rankSkipped && i < n {
			n = i
		}
	}
	return deps[:n], deps[n:], spare
}

// cand is a deployment as order sees it.
type cand struct {
	d    *deployment
	v    view
	rank rank
}

// rank is order's first sort key.
type rank int

const (
	rankClosed  rank = iota
	rankOpen         // open, tried after the closed ones
	rankCooling      // under a Retry-After (open or not)
	rankSkipped      // open and skipped
)

func (c *cand) place() {
	switch {
	case c.v.cooling:
		c.rank = rankCooling
	case c.v.open:
		c.rank = rankOpen
	default:
		c.rank = rankClosed
	}
}

// eject marks the open deployments a request skips: the most recently
// opened, at most k, and never the last one that could be tried before
// the deadline (zero: none). It returns how many of the others may still be skipped if
// found open when their turn comes.
func eject(cs []cand, k int, deadline time.Time) (spare int) {
	opened := 0
	for _, c := range cs {
		if c.v.open {
			opened++
		}
	}
	// Each round skips the most recently opened not skipped yet: it is the
	// least likely to have recovered; the longest open is nearest its probe.
	for range min(opened, k) {
		last := -1
		for i, c := range cs {
			if c.v.open && c.rank != rankSkipped && (last < 0 || c.v.opened.After(cs[last].v.opened)) {
				last = i
			}
		}
		cs[last].rank = rankSkipped
	}
	// A Retry-After past the deadline rules a deployment out as surely as
	// skipping it: keep one way through that is not.
	usable, first := 0, -1
	for i, c := range cs {
		switch {
		case c.v.cooling && !deadline.IsZero() && !c.v.until.Before(deadline):
		case c.rank != rankSkipped:
			usable++
		case first < 0 || c.v.opened.Before(cs[first].v.opened):
			first = i
		}
	}
	if usable == 0 && first >= 0 {
		cs[first].place()
		usable = 1
	}
	for _, c := range cs {
		if c.v.open && c.rank != rankSkipped {
			return 0 // open ones are tried: none to spare
		}
	}
	// What is left of k, keeping one usable deployment: admit spends it on
	// deployments found open later (see session.spare).
	return max(0, min(k-opened, usable-1))
}

func (r *Router) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// In (0, d]: full jitter, never zero.
	return time.Duration(r.rng.Int64N(int64(d)) + 1)
}

// firstTokenTimeout is the deployment's first-token timeout, adaptive when
// the alias asks for it and there are enough samples.
func (a *alias) firstTokenTimeout(d *deployment) time.Duration {
	ftt := d.FirstTokenTimeout
	if ftt <= 0 {
		ftt = a.FirstTokenTimeout
	}
	if ad := a.Adaptive; ad != nil && ad.Multiplier > 0 {
		minSamples := ad.MinSamples
		if minSamples <= 0 {
			minSamples = 20
		}
		// Few samples make a noisy p99: until there are enough, the static
		// timeout holds. Min and Max keep a very fast or very slow history from
		// setting a timeout that fails every request or waits forever.
		if p99, n := d.health.quantile(0.99); n >= minSamples {
			v := time.Duration(float64(p99) * ad.Multiplier)
			if ad.Min > 0 && v < ad.Min {
				v = ad.Min
			}
			if ad.Max > 0 && v > ad.Max {
				v = ad.Max
			}
			ftt = v
		}
	}
	return ftt
}

// hedgeDelay is how long to wait for the first token before hedging.
func (a *alias) hedgeDelay(d *deployment, ftt time.Duration) time.Duration {
	delay := a.Hedge.Delay
	if delay <= 0 {
		p95, n := d.health.quantile(0.95)
		if n < 20 {
			// Nothing measured yet: half the first-token timeout leaves the backup
			// time to answer before the primary's own timer fires.
			delay = ftt / 2
		} else {
			delay = p95
		}
	}
	return max(delay, a.Hedge.MinDelay)
}
