package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/firstword/firstword/internal/metering"
)

// ObserveUsage reports the usage writer's queue, spill file and losses,
// reading stats at each scrape. Call it once.
func (m *Metrics) ObserveUsage(stats func() metering.UsageStats) {
	m.reg.MustRegister(&statsCollector[metering.UsageStats]{stats: stats, all: usageStats})
}

var (
	usageQueuedDesc  = prometheus.NewDesc("firstword_usage_rows_queued", "Usage rows waiting in memory to be written to the store.", nil, nil)
	usageInSpillDesc = prometheus.NewDesc("firstword_usage_spill_rows", "Usage rows in the spill file, waiting to be replayed to the store.", nil, nil)
	usageSpillDesc   = prometheus.NewDesc("firstword_usage_rows_spilled_total", "Usage rows appended to the spill file because the queue was full or the gateway was shutting down.", nil, nil)
	usageDropDesc    = prometheus.NewDesc("firstword_usage_rows_dropped_total", "Usage rows lost: the queue was full with no spill file, or the spill file failed. Those requests are not billed.", nil, nil)
	usageWrittenDesc = prometheus.NewDesc("firstword_usage_rows_written_total", "Usage rows written to the store.", nil, nil)
	usageErrorsDesc  = prometheus.NewDesc("firstword_usage_write_errors_total", "Failed attempts to write a batch of usage rows; the rows are kept and retried.", nil, nil)
)

var usageStats = []stat[metering.UsageStats]{
	{desc: usageQueuedDesc, kind: prometheus.GaugeValue, value: func(s metering.UsageStats) float64 { return float64(s.Queued) }},
	{desc: usageInSpillDesc, kind: prometheus.GaugeValue, value: func(s metering.UsageStats) float64 { return float64(s.InSpill) }},
	{desc: usageSpillDesc, kind: prometheus.CounterValue, value: func(s metering.UsageStats) float64 { return float64(s.Spilled) }},
	{desc: usageDropDesc, kind: prometheus.CounterValue, value: func(s metering.UsageStats) float64 { return float64(s.Dropped) }},
	{desc: usageWrittenDesc, kind: prometheus.CounterValue, value: func(s metering.UsageStats) float64 { return float64(s.Written) }},
	{desc: usageErrorsDesc, kind: prometheus.CounterValue, value: func(s metering.UsageStats) float64 { return float64(s.WriteErrors) }},
}
