package limits

import (
	"math/rand/v2"
	"sync/atomic"
)

// Stats are admission's counters, for the metrics.
type Stats struct {
	// Refused counts refusals by reason: requests, tokens, concurrency,
	// budget.
	Refused map[string]uint64
	// SharedErrors counts failed or timed-out Shared calls; Degraded the
	// admissions counted locally because Shared failed or was skipped.
	SharedErrors, Degraded uint64
	// SoftCrossed counts budgets that went past their soft threshold, once
	// per subject and period on this replica.
	SoftCrossed uint64
	// ReloadErrors counts failed reloads of overrides and spend.
	ReloadErrors uint64
}

type statCounters struct {
	refused                                    map[string]*atomic.Uint64
	sharedErrors, degraded, soft, reloadErrors atomic.Uint64
}

func newRefusedCounters() map[string]*atomic.Uint64 {
	m := map[string]*atomic.Uint64{}
	for _, r := range []string{reasonRequests, reasonTokens, reasonConcurrency, reasonBudget} {
		m[r] = new(atomic.Uint64)
	}
	return m
}

// Stats returns the counters so far.
func (l *Limiter) Stats() Stats {
	s := Stats{Refused: map[string]uint64{}, SharedErrors: l.stats.sharedErrors.Load(), Degraded: l.stats.degraded.Load(),
		SoftCrossed: l.stats.soft.Load(), ReloadErrors: l.stats.reloadErrors.Load()}
	if d, ok := l.opt.Shared.(interface{ LateErrors() uint64 }); ok {
		s.SharedErrors += d.LateErrors()
	}
	for r, c := range l.stats.refused {
		s.Refused[r] = c.Load()
	}
	return s
}

func randUint32() uint32 { return rand.Uint32() }
