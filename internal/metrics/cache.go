package metrics

import "github.com/prometheus/client_golang/prometheus"

// CacheStats are the response cache's health counters.
type CacheStats struct {
	// Timeouts, Errors and Skipped count operations that ran out of the
	// cache timeout, failed, or were not tried while the cache was
	// skipped; Opens counts the times skipping began, and Open says
	// whether it is skipped now.
	Timeouts, Errors, Skipped, Opens uint64
	Open                             bool
	// WritesInFlight are answers being written; WritesDropped were not
	// written because too many were.
	WritesInFlight int
	WritesDropped  uint64
}

// ObserveCache reports the response cache's health, reading stats at each
// scrape. Call it once.
func (m *Metrics) ObserveCache(stats func() CacheStats) {
	m.reg.MustRegister(&statsCollector[CacheStats]{stats: stats, all: cacheStats})
}

var (
	cacheOpsDesc = prometheus.NewDesc("firstword_cache_failures_total",
		"Response cache operations that did not succeed, by outcome: timeout (over cache.timeout), error, or skipped (not tried while the cache is skipped after repeated failures). Each counts as a miss.", []string{"outcome"}, nil)
	cacheOpensDesc   = prometheus.NewDesc("firstword_cache_skips_total", "Times the response cache started being skipped after repeated failures.", nil, nil)
	cacheOpenDesc    = prometheus.NewDesc("firstword_cache_skipped", "1 while the response cache is skipped (every read a miss) for its cooldown.", nil, nil)
	cacheWritesDesc  = prometheus.NewDesc("firstword_cache_writes_in_flight", "Finished answers being written to the response cache.", nil, nil)
	cacheDroppedDesc = prometheus.NewDesc("firstword_cache_writes_dropped_total", "Finished answers not written to the response cache because too many writes were in flight.", nil, nil)
)

var cacheStats = []stat[CacheStats]{
	{desc: cacheOpsDesc, kind: prometheus.CounterValue, byLabel: func(s CacheStats) map[string]uint64 {
		return map[string]uint64{"timeout": s.Timeouts, "error": s.Errors, "skipped": s.Skipped}
	}},
	{desc: cacheOpensDesc, kind: prometheus.CounterValue, value: func(s CacheStats) float64 { return float64(s.Opens) }},
	{desc: cacheOpenDesc, kind: prometheus.GaugeValue, value: func(s CacheStats) float64 {
		if s.Open {
			return 1
		}
		return 0
	}},
	{desc: cacheWritesDesc, kind: prometheus.GaugeValue, value: func(s CacheStats) float64 { return float64(s.WritesInFlight) }},
	{desc: cacheDroppedDesc, kind: prometheus.CounterValue, value: func(s CacheStats) float64 { return float64(s.WritesDropped) }},
}
