package metrics

import "github.com/prometheus/client_golang/prometheus"

// statsCollector reports a component's counters, reading a snapshot of
// them at each scrape.
type statsCollector[S any] struct {
	stats func() S
	all   []stat[S]
}

// stat is one metric of a snapshot S.
type stat[S any] struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	// value reads the metric; byLabel, instead, reads the values of a
	// desc with one variable label, by that label's value.
	value   func(S) float64
	byLabel func(S) map[string]uint64
}

func (c *statsCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, st := range c.all {
		ch <- st.desc
	}
}

func (c *statsCollector[S]) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, st := range c.all {
		if st.byLabel == nil {
			ch <- prometheus.MustNewConstMetric(st.desc, st.kind, st.value(s))
			continue
		}
		for label, n := range st.byLabel(s) {
			ch <- prometheus.MustNewConstMetric(st.desc, st.kind, float64(n), label)
		}
	}
}
