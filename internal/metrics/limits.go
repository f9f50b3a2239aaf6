package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/firstword/firstword/internal/limits"
)

// ObserveLimits reports admission's refusals and the state of its shared
// counts, reading stats at each scrape. Call it once.
func (m *Metrics) ObserveLimits(stats func() limits.Stats) {
	m.reg.MustRegister(&statsCollector[limits.Stats]{stats: stats, all: limitsStats})
}

var (
	limitsRefusedDesc  = prometheus.NewDesc("firstword_admission_refused_total", "Requests refused at admission, by reason: requests, tokens, concurrency or budget.", []string{"reason"}, nil)
	limitsSharedDesc   = prometheus.NewDesc("firstword_admission_shared_errors_total", "Failed or timed-out calls to the shared (Redis) counts.", nil, nil)
	limitsDegradedDesc = prometheus.NewDesc("firstword_admission_degraded_total", "Admissions counted by this replica alone because the shared counts failed or were skipped.", nil, nil)
	limitsSoftDesc     = prometheus.NewDesc("firstword_budget_soft_threshold_crossed_total", "Budgets seen past their soft threshold, once per tenant or key and period on this replica.", nil, nil)
	limitsReloadDesc   = prometheus.NewDesc("firstword_limits_reload_errors_total", "Failed reloads of the limit overrides and spend from the store.", nil, nil)
)

var limitsStats = []stat[limits.Stats]{
	{desc: limitsRefusedDesc, kind: prometheus.CounterValue, byLabel: func(s limits.Stats) map[string]uint64 { return s.Refused }},
	{desc: limitsSharedDesc, kind: prometheus.CounterValue, value: func(s limits.Stats) float64 { return float64(s.SharedErrors) }},
	{desc: limitsDegradedDesc, kind: prometheus.CounterValue, value: func(s limits.Stats) float64 { return float64(s.Degraded) }},
	{desc: limitsSoftDesc, kind: prometheus.CounterValue, value: func(s limits.Stats) float64 { return float64(s.SoftCrossed) }},
	{desc: limitsReloadDesc, kind: prometheus.CounterValue, value: func(s limits.Stats) float64 { return float64(s.ReloadErrors) }},
}
