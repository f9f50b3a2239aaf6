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
	m.reg.MustRegister(&cacheCollector{stats: stats})
}

var (
	cacheOpsDesc = prometheus.NewDesc("firstword_cache_failures_total",
		"Response cache operations that did not succeed, by outcome: timeout (over cache.timeout), error, or skipped (not tried while the cache is skipped after repeated failures). Each counts as a miss.", []string{"outcome"}, nil)
	cacheOpensDesc   = prometheus.NewDesc("firstword_cache_skips_total", "Times the response cache started being skipped after repeated failures.", nil, nil)
	cacheOpenDesc    = prometheus.NewDesc("firstword_cache_skipped", "1 while the response cache is skipped (every read a miss) for its cooldown.", nil, nil)
	cacheWritesDesc  = prometheus.NewDesc("firstword_cache_writes_in_flight", "Finished answers being written to the response cache.", nil, nil)
	cacheDroppedDesc = prometheus.NewDesc("firstword_cache_writes_dropped_total", "Finished answers not written to the response cache because too many writes were in flight.", nil, nil)
)

type cacheCollector struct {
	stats func() CacheStats
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheOpsDesc, cacheOpensDesc, cacheOpenDesc, cacheWritesDesc, cacheDroppedDesc} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(cacheOpsDesc, prometheus.CounterValue, float64(s.Timeouts), "timeout")
	ch <- prometheus.MustNewConstMetric(cacheOpsDesc, prometheus.CounterValue, float64(s.Errors), "error")
	ch <- prometheus.MustNewConstMetric(cacheOpsDesc, prometheus.CounterValue, float64(s.Skipped), "skipped")
	ch <- prometheus.MustNewConstMetric(cacheOpensDesc, prometheus.CounterValue, float64(s.Opens))
	open := 0.0
	if s.Open {
		open = 1
	}
	ch <- prometheus.MustNewConstMetric(cacheOpenDesc, prometheus.GaugeValue, open)
	ch <- prometheus.MustNewConstMetric(cacheWritesDesc, prometheus.GaugeValue, float64(s.WritesInFlight))
	ch <- prometheus.MustNewConstMetric(cacheDroppedDesc, prometheus.CounterValue, float64(s.WritesDropped))
}
