// Package metrics exposes firstword's Prometheus metrics: the latency
// histograms (TTFT, TTFW, TTC, the time to first thought and the thinking
// time, every stage, inter-token gaps, output rate)
// and the counters of what requests cost and how they ended. Labels are
// bounded: aliases and deployments come from the config, stages from the
// pipeline, statuses from a fixed set. It is the only package that imports
// the Prometheus client.
package metrics

import (
	"context"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
)

// LatencyBuckets suit 1 ms to 60 s, in seconds.
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60}

// Metrics is the registry and its collectors. Safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	ttft, ttfw, ttc *prometheus.HistogramVec
	thought, think  *prometheus.HistogramVec
	stage           *prometheus.HistogramVec
	rate            *prometheus.HistogramVec
	requests        *prometheus.CounterVec
	tokens          *prometheus.CounterVec
	cost            *prometheus.CounterVec
	events          *prometheus.CounterVec
	rules           *prometheus.CounterVec
	ruleFallbacks   *prometheus.CounterVec
	open            *prometheus.GaugeVec
	gaps            *gapCollector
}

// New returns Metrics registered on a fresh registry, with Go runtime and
// process collectors. health, if not nil, is read at each scrape for the
// deployments' circuit state and latency EWMA.
func New(health func() []router.Status) *Metrics {
	reg := prometheus.NewRegistry()
	lat := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "firstword", Name: name, Help: help, Buckets: LatencyBuckets}, labels)
	}
	m := &Metrics{
		reg:  reg,
		ttft: lat("ttft_seconds", "Time from the request's arrival to the upstream's first visible token.", "surface", "alias", "deployment", "status"),
		ttfw: lat("ttfw_seconds", "Time to first word: from the request's arrival to the first visible text flushed to the client.", "surface", "alias", "deployment", "status"),
		ttc:  lat("ttc_seconds", "Time to complete: from the request's arrival to the last byte.", "surface", "alias", "deployment", "status"),
		thought: lat("time_to_first_thought_seconds", "Time to first thought: from the request's arrival to the model's first thinking flushed to the client (delivered, when not shown), for requests whose model thought.",
			"surface", "alias", "deployment", "status"),
		think: lat("thinking_seconds", "Thinking time: from the model's first thought to its first answer token, the part of the time to first word spent thinking.",
			"surface", "alias", "deployment", "status"),
		stage: lat("stage_seconds", "Duration of each pipeline stage.", "surface", "alias", "stage"),
		rate: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "firstword", Name: "output_tokens_per_second", Help: "Output rate between the first and the last visible token.",
			Buckets: []float64{5, 10, 20, 40, 60, 80, 100, 150, 200, 300, 500, 1000}}, []string{"alias", "deployment"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "firstword", Name: "requests_total", Help: "Requests by how they ended."}, []string{"surface", "alias", "deployment", "status"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "firstword", Name: "tokens_total",
			Help: "Tokens metered, by kind: input, output, cached (included in input), reasoning (thinking, included in output); part: answer (the attempt that served) or attempt (attempts sent that did not give the answer: lost hedges, first-token timeouts...)."}, []string{"alias", "deployment", "kind", "part"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "firstword", Name: "cost_usd_total",
			Help: "Cost of the metered tokens, in USD; part: answer or attempt, as for tokens_total."}, []string{"alias", "deployment", "part"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "firstword", Name: "events_total",
			Help: "Things that happened to requests: cancellation, fallback, retry, hedge, continuation, cache_hit, coalesced, guardrail_block, usage_missing, usage_estimated, timeout."}, []string{"alias", "event"}),
		rules: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "firstword", Name: "routing_rule_total",
			Help: "Requests a routing rule sent from the alias asked for to another (to)."}, []string{"alias", "rule", "to"}),
		ruleFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "firstword", Name: "routing_rule_fallback_total",
			Help: "Requests a routing rule sent to another alias (to) that failed before the first token, so the alias asked for was tried instead; a subset of routing_rule_total."}, []string{"alias", "rule", "to"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "firstword", Name: "open_streams", Help: "Streams open now."}, []string{"surface"}),
		gaps: newGapCollector(),
	}
	reg.MustRegister(m.ttft, m.ttfw, m.ttc, m.thought, m.think, m.stage, m.rate, m.requests, m.tokens, m.cost, m.events, m.rules, m.ruleFallbacks, m.open, m.gaps,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if health != nil {
		reg.MustRegister(&healthCollector{health: health})
	}
	return m
}

// Events are the names counted by firstword_events_total.
var Events = []string{"cancellation", "timeout", "fallback", "retry", "hedge", "continuation", "cache_hit", "coalesced", "guardrail_block", "usage_missing", "usage_estimated"}

// Init creates the event counters of every alias at zero, so that rates
// and dashboards see them before the first event.
func (m *Metrics) Init(aliases []string) {
	for _, a := range aliases {
		for _, e := range Events {
			m.events.WithLabelValues(a, e)
		}
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Open counts a stream as open until the returned function is called.
func (m *Metrics) Open(surface string) func() {
	g := m.open.WithLabelValues(surface)
	g.Inc()
	return g.Dec
}

// Record implements metering.Meter: everything about a finished request.
func (m *Metrics) Record(_ context.Context, r *metering.Record) {
	status := string(r.Status)
	dep := r.Deployment
	if dep == "" {
		dep = "none"
	}
	m.requests.WithLabelValues(r.Surface, r.Alias, dep, status).Inc()
	if r.TTFT > 0 {
		m.ttft.WithLabelValues(r.Surface, r.Alias, dep, status).Observe(r.TTFT.Seconds())
	}
	if r.TTFW > 0 {
		m.ttfw.WithLabelValues(r.Surface, r.Alias, dep, status).Observe(r.TTFW.Seconds())
	}
	if r.TTFThought > 0 {
		m.thought.WithLabelValues(r.Surface, r.Alias, dep, status).Observe(r.TTFThought.Seconds())
		if r.Thinking > 0 {
			m.think.WithLabelValues(r.Surface, r.Alias, dep, status).Observe(r.Thinking.Seconds())
		}
	}
	if r.Total > 0 && (r.Status == metering.StatusComplete || r.Status == metering.StatusTimeout) {
		m.ttc.WithLabelValues(r.Surface, r.Alias, dep, status).Observe(r.Total.Seconds())
	}
	m.bill(r.Alias, dep, "answer", &r.Usage, r.Cost)
	for i := range r.Spent {
		s := &r.Spent[i]
		m.bill(r.Alias, s.Deployment, "attempt", &s.Usage, s.Cost)
	}
	event := func(name string, n int) {
		if n > 0 {
			m.events.WithLabelValues(r.Alias, name).Add(float64(n))
		}
	}
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	event("cancellation", b2i(r.Status == metering.StatusCancelled))
	event("timeout", b2i(r.Status == metering.StatusTimeout))
	event("fallback", r.Fallbacks)
	event("retry", r.Retries)
	event("hedge", b2i(r.Hedged))
	event("continuation", r.Continuations)
	event("cache_hit", b2i(r.Cached))
	event("coalesced", b2i(r.Coalesced))
	if r.Rule != "" {
		// routed_to reads "fast, fell back to chat" after a fallback.
		to, fellBack := router.RuleTarget(r.RoutedTo)
		m.rules.WithLabelValues(r.Alias, r.Rule, to).Inc()
		if fellBack {
			m.ruleFallbacks.WithLabelValues(r.Alias, r.Rule, to).Inc()
		}
	}
	event("guardrail_block", b2i(r.ErrorCode == "guardrail_blocked"))
	event("usage_missing", b2i(r.UsageMissing))
	event("usage_estimated", b2i(r.Usage.Estimated))
	if r.Gaps != nil && r.Gaps.N > 0 {
		m.gaps.add(r.Alias, dep, r.Gaps)
	}
	if r.StreamMs > 0 && r.Usage.OutputTokens > 1 {
		m.rate.WithLabelValues(r.Alias, dep).Observe(float64(r.Usage.OutputTokens-1) / (r.StreamMs / 1000))
	}
	if r.Timings != nil {
		for _, s := range r.Timings.Stages() {
			m.stage.WithLabelValues(r.Surface, r.Alias, s.Name).Observe(s.Duration().Seconds())
		}
	}
}

// bill counts tokens and cost of one part of a request.
func (m *Metrics) bill(alias, dep, part string, u *chat.Usage, cost float64) {
	// A counter panics on a negative add; the router drops implausible
	// usage, and this keeps it so whatever else a record carries.
	m.tokens.WithLabelValues(alias, dep, "input", part).Add(float64(max(u.InputTokens, 0)))
	m.tokens.WithLabelValues(alias, dep, "output", part).Add(float64(max(u.OutputTokens, 0)))
	if u.CachedInputTokens > 0 {
		m.tokens.WithLabelValues(alias, dep, "cached", part).Add(float64(u.CachedInputTokens))
	}
	if u.ReasoningTokens > 0 {
		m.tokens.WithLabelValues(alias, dep, "reasoning", part).Add(float64(u.ReasoningTokens))
	}
	if cost > 0 {
		m.cost.WithLabelValues(alias, dep, part).Add(cost)
	}
}

// gapCollector is the inter-token gap histogram, filled a request at a
// time from per-request bucket counts.
type gapCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	by   map[[2]string]*gapSeries
}

type gapSeries struct {
	counts [len(metering.Gaps{}.Counts)]uint64
	sum    float64
	n      uint64
}

func newGapCollector() *gapCollector {
	return &gapCollector{
		desc: prometheus.NewDesc("firstword_inter_token_gap_seconds", "Delay between consecutive visible chunks delivered to the client.", []string{"alias", "deployment"}, nil),
		by:   map[[2]string]*gapSeries{},
	}
}

func (c *gapCollector) add(alias, dep string, g *metering.Gaps) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.by[[2]string{alias, dep}]
	if s == nil {
		s = &gapSeries{}
		c.by[[2]string{alias, dep}] = s
	}
	for i, n := range g.Counts {
		s.counts[i] += uint64(n)
	}
	s.sum += g.Sum
	s.n += uint64(g.N)
}

func (c *gapCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *gapCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.by {
		buckets := make(map[float64]uint64, len(metering.GapBuckets))
		var cum uint64
		for i, le := range metering.GapBuckets {
			cum += s.counts[i]
			buckets[le] = cum
		}
		ch <- prometheus.MustNewConstHistogram(c.desc, s.n, s.sum, buckets, k[0], k[1])
	}
}

// healthCollector reports each deployment's circuit and latency estimate.
type healthCollector struct {
	health func() []router.Status
}

var (
	circuitDesc  = prometheus.NewDesc("firstword_deployment_circuit_open", "1 when the deployment's circuit breaker is open (or half open), 0 when closed.", []string{"alias", "deployment", "state"}, nil)
	ewmaDesc     = prometheus.NewDesc("firstword_deployment_ttft_ewma_seconds", "The deployment's peak-EWMA time to first token, used to balance load.", []string{"alias", "deployment"}, nil)
	inflightDesc = prometheus.NewDesc("firstword_deployment_outstanding", "Attempts in flight at the deployment.", []string{"alias", "deployment"}, nil)
)

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- circuitDesc
	ch <- ewmaDesc
	ch <- inflightDesc
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.health() {
		open := 0.0
		if s.State != router.StateClosed {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(circuitDesc, prometheus.GaugeValue, open, s.Alias, s.Deployment, s.State)
		ch <- prometheus.MustNewConstMetric(ewmaDesc, prometheus.GaugeValue, s.EWMATTFTMs/1000, s.Alias, s.Deployment)
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(s.Outstanding), s.Alias, s.Deployment)
	}
}
