package router

import (
	"math"
	"slices"
	"sync"
	"time"
)

// BreakerConfig sets when a deployment's circuit opens and what an open
// circuit does.
//
// Only failures that say something about the deployment count: server
// errors (5xx), connection failures, malformed streams, first-token
// timeouts, a bad key or model (401, 403, 404), a spent quota or unpaid
// bill (a rate limit that is not retryable). Failures of the request
// itself do not: other 4xx answers (400, 408, 409, 413, 422, 429...),
// context-length and content-filter refusals, and failures the request
// asked for (chat.Error.ClientInduced, e.g. a sim fault directive). Nor do
// answers with a Retry-After: until then the deployment is tried last, and
// waited for only when the deadline allows, but its circuit stays as it
// was. Cancellations and the request's deadline never count. Any of these
// still fails the attempt as before: the request falls back, or fails when
// the fault is its own.
//
// An open circuit is not a refusal. A request skips (ejects) a deployment
// whose circuit is open only while at most MaxEjectedShare of the alias's
// deployments are skipped, and never all of them, nor the last one that
// could be tried before the request's deadline: with one deployment
// nothing is ever skipped. The most recently opened are the ones skipped;
// the other open deployments are tried after the closed ones (by priority,
// then the one whose cooldown ends soonest), so an alias whose every
// deployment is open still serves: panic routing, as in Envoy's outlier
// detection. A success closes a circuit however it was reached; a failure
// of an open deployment starts its cooldown again. After the cooldown one
// request at a time may probe a skipped deployment (half-open).
type BreakerConfig struct {
	// ConsecutiveFailures opens the circuit after this many failures in a
	// row (default 5).
	ConsecutiveFailures int
	// ErrorRate opens the circuit when the failure share over the window
	// reaches it, once MinRequests were seen (default 0.5 over 20).
	ErrorRate   float64
	MinRequests int
	// Window is the error-rate window (default 30s).
	Window time.Duration
	// Cooldown is how long the circuit stays open before one probe is let
	// through (default 10s).
	Cooldown time.Duration
	// MaxEjectedShare is the largest share of an alias's deployments that
	// a request may skip because their circuits are open: at most
	// floor(share × deployments), and never all (default 0.5).
	MaxEjectedShare float64
}

func (c *BreakerConfig) defaults() {
	if c.ConsecutiveFailures <= 0 {
		c.ConsecutiveFailures = 5
	}
	if c.ErrorRate <= 0 {
		c.ErrorRate = 0.5
	}
	if c.MinRequests <= 0 {
		c.MinRequests = 20
	}
	if c.Window <= 0 {
		c.Window = 30 * time.Second
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 10 * time.Second
	}
	if c.MaxEjectedShare <= 0 {
		c.MaxEjectedShare = 0.5
	}
}

// maxEjected is how many of n deployments a request may skip as open.
func (c BreakerConfig) maxEjected(n int) int {
	c.defaults()
	// The epsilon keeps 0.3 × 10 at 3 despite rounding.
	k := int(math.Floor(min(c.MaxEjectedShare, 1)*float64(n) + 1e-9))
	return max(0, min(k, n-1))
}

// Circuit states.
const (
	StateClosed   = "closed"
	StateOpen     = "open"
	StateHalfOpen = "half_open"
)

// health is a deployment's live state: circuit breaker, latency EWMA,
// recent TTFT samples and outstanding requests. Safe for concurrent use.
type health struct {
	cfg BreakerConfig

	// Every field below is guarded by mu: the deployment's requests run
	// concurrently, and a request reads its view while others end attempts.
	// probing: the one half-open probe is out; no other request may probe
	// until it ends (end clears it, whatever its result).
	mu          sync.Mutex
	state       string
	openedAt    time.Time
	probing     bool
	consecutive int
	window      []outcomeAt
	cooldown    time.Time // a Retry-After from the upstream

	ewma        float64 // peak-EWMA of TTFT, seconds
	ewmaAt      time.Time
	outstanding int
	samples     []float64 // ring of recent TTFT samples, seconds
	next        int
	sorted      []float64
	dirty       int
}

type outcomeAt struct {
	at     time.Time
	failed bool
}

const (
	ewmaTau    = 10 * time.Second
	maxSamples = 512
)

// healthOf returns the health of deployment id in m, made with cfg if
// m has none yet.
func healthOf(m map[string]*health, id string, cfg BreakerConfig) *health {
	h := m[id]
	if h == nil {
		h = newHealth(cfg)
		m[id] = h
	}
	return h
}

func newHealth(cfg BreakerConfig) *health {
	cfg.defaults()
	return &health{cfg: cfg, state: StateClosed}
}

// allow reports whether an attempt may be sent now. After the cooldown
// it lets one probe through (half-open). An open circuit otherwise refuses
// only when eject is set: when the alias can spare the deployment.
func (h *health) allow(now time.Time, eject bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.state {
	case StateOpen:
		if now.Sub(h.openedAt) < h.cfg.Cooldown {
			return !eject
		}
		// The cooldown is over: this request is the probe.
		h.state = StateHalfOpen
		h.probing = true
	case StateHalfOpen:
		// The probe is out: the others are treated as while open.
		if h.probing {
			return !eject
		}
		h.probing = true
	}
	return true
}

// view is what order needs of a deployment's health, read at once.
type view struct {
	score   float64
	cooling bool      // a Retry-After is in force
	until   time.Time // when the Retry-After ends
	open    bool      // the circuit refuses unless the alias needs it
	opened  time.Time // when it opened, if open
	reopen  time.Time // when its cooldown ends, if open
}

func (h *health) view(now time.Time) view {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := view{score: h.score(), cooling: h.cooldown.After(now), until: h.cooldown}
	// Past its cooldown with no probe out, an open circuit is as good as
	// closed for ordering: the next request through it is the probe.
	if (h.state == StateOpen && now.Sub(h.openedAt) < h.cfg.Cooldown) || (h.state == StateHalfOpen && h.probing) {
		v.open, v.opened, v.reopen = true, h.openedAt, h.openedAt.Add(h.cfg.Cooldown)
	}
	return v
}

// begin counts an outstanding attempt.
func (h *health) begin() {
	h.mu.Lock()
	h.outstanding++
	h.mu.Unlock()
}

// end records an attempt's result. ttft is zero when no token came.
// failed is false for outcomes that say nothing about the deployment
// (client cancellations, client errors).
func (h *health) end(now time.Time, ttft time.Duration, failed, neutral bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outstanding--
	if ttft > 0 {
		h.observe(now, ttft.Seconds())
	}
	// Neutral outcomes leave the breaker as it was, but a neutral probe
	// frees the probe slot: another request may probe next.
	if neutral {
		if h.state == StateHalfOpen {
			h.probing = false
		}
		return
	}
	h.window = append(h.window, outcomeAt{now, failed})
	cut := 0
	// The window is appended in (about) time order: the expired are at
	// its head.
	for cut < len(h.window) && now.Sub(h.window[cut].at) > h.cfg.Window {
		cut++
	}
	h.window = h.window[cut:]
	if !failed {
		h.consecutive = 0
		if h.state != StateClosed {
			h.state = StateClosed
			// A recovered deployment starts a fresh error-rate window: the failures
			// that opened it must not open it again at once.
			h.window = h.window[:0]
		}
		h.probing = false
		return
	}
	h.consecutive++
	if h.state != StateClosed {
		// A failed probe, or an open deployment tried because the alias
		// had no other way: the cooldown starts again.
		h.trip(now)
		return
	}
	if h.consecutive >= h.cfg.ConsecutiveFailures {
		h.trip(now)
		return
	}
	// The rate only counts with enough outcomes: two failures in three
	// requests is no evidence.
	if len(h.window) >= h.cfg.MinRequests {
		bad := 0
		for _, o := range h.window {
			if o.failed {
				bad++
			}
		}
		if float64(bad)/float64(len(h.window)) >= h.cfg.ErrorRate {
			h.trip(now)
		}
	}
}

func (h *health) trip(now time.Time) {
	h.state = StateOpen
	h.openedAt = now
	h.probing = false
}

// observe folds a TTFT sample into the peak-EWMA and the sample ring.
func (h *health) observe(now time.Time, v float64) {
	if h.ewmaAt.IsZero() || v > h.ewma {
		h.ewma = v // peak: jump up at once
	} else {
		// A faster sample pulls the average down with a weight that grows with
		// the time since the last one: an old peak fades with a time constant
		// of ewmaTau, however often samples come.
		w := math.Exp(-float64(now.Sub(h.ewmaAt)) / float64(ewmaTau))
		h.ewma = h.ewma*w + v*(1-w)
	}
	h.ewmaAt = now
	if len(h.samples) < maxSamples {
		h.samples = append(h.samples, v)
	} else {
		h.samples[h.next] = v
		h.next = (h.next + 1) % maxSamples
	}
	h.dirty++
}

// score is the load-balancing cost: expected TTFT times the queue in
// front of it (peak-EWMA, as in Finagle and Linkerd). Unmeasured
// deployments score by outstanding requests alone, so they get tried.
// h.mu must be held.
func (h *health) score() float64 {
	base := h.ewma
	if base == 0 {
		base = 1e-3
	}
	return base * float64(h.outstanding+1)
}

// quantile returns the q-quantile of recent TTFT samples and how many
// samples there are.
func (h *health) quantile(q float64) (time.Duration, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.samples)
	if n == 0 {
		return 0, 0
	}
	// Re-sorting the ring (512 samples) for every request would put a sort
	// on the hot path: the sorted copy is refreshed every 16 new samples, or
	// at every change while there are few.
	if h.dirty > 0 && (h.dirty >= 16 || len(h.sorted) < 64) {
		h.sorted = append(h.sorted[:0], h.samples...)
		slices.Sort(h.sorted)
		h.dirty = 0
	}
	if len(h.sorted) == 0 {
		return 0, 0
	}
	i := int(math.Ceil(q*float64(len(h.sorted)))) - 1
	i = max(0, min(i, len(h.sorted)-1))
	return time.Duration(h.sorted[i] * float64(time.Second)), n
}

func (h *health) setCooldown(until time.Time) {
	h.mu.Lock()
	if until.After(h.cooldown) {
		h.cooldown = until
	}
	h.mu.Unlock()
}

func (h *health) cooldownUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cooldown
}

// Status is a deployment's health as shown on the admin endpoint.
type Status struct {
	Alias       string  `json:"alias"`
	Deployment  string  `json:"deployment"`
	State       string  `json:"state"`
	EWMATTFTMs  float64 `json:"ewma_ttft_ms"`
	P50TTFTMs   float64 `json:"p50_ttft_ms"`
	P95TTFTMs   float64 `json:"p95_ttft_ms"`
	P99TTFTMs   float64 `json:"p99_ttft_ms"`
	Samples     int     `json:"samples"`
	Outstanding int     `json:"outstanding"`
	Consecutive int     `json:"consecutive_failures"`
	CooldownMs  float64 `json:"retry_after_ms,omitempty"`
}

func (h *health) status(now time.Time) Status {
	// Before the lock: quantile takes h.mu itself.
	p50, n := h.quantile(0.5)
	p95, _ := h.quantile(0.95)
	p99, _ := h.quantile(0.99)
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state
	if st == StateOpen && now.Sub(h.openedAt) >= h.cfg.Cooldown {
		st = StateHalfOpen
	}
	s := Status{State: st, EWMATTFTMs: h.ewma * 1000, P50TTFTMs: ms(p50), P95TTFTMs: ms(p95), P99TTFTMs: ms(p99), Samples: n, Outstanding: h.outstanding, Consecutive: h.consecutive}
	if d := h.cooldown.Sub(now); d > 0 {
		s.CooldownMs = ms(d)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
