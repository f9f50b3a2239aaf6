package limits

import (
	"sync"
	"time"
)

// Check is one count admission takes: a rate (GCRA: Limit per Period, all
// of it as burst) or open streams (Limit at once).
type Check struct {
	Key string
	// Tag names the keys a shared store keeps together (a tenant's):
	// one admission's checks share it.
	Tag    string
	Limit  int
	Period time.Duration // 0: a concurrency cap
	Cost   int           // a rate's cost: 1 request, or the tokens reserved
}

func (c Check) concurrency() bool { return c.Period == 0 }

// Result is one check's outcome. Remaining and ResetAfter describe the
// count after this admission (when it was admitted) or as it stands.
type Result struct {
	Allowed    bool
	Remaining  int
	RetryAfter time.Duration // until the cost fits, when refused
	ResetAfter time.Duration // until the count is back to its full limit
}

// local keeps counts in this process: the default, and what a replica
// falls back to while the shared backend fails.
type local struct {
	mu   sync.Mutex
	tats map[string]time.Time // GCRA's theoretical arrival time, by key
	open map[string]int       // open streams, by key
	now  func() time.Time
	// swept is when tats was last swept of full states.
	swept time.Time
}

func newLocal(now func() time.Time) *local {
	return &local{tats: map[string]time.Time{}, open: map[string]int{}, now: now}
}

// admit takes every check or, if one refuses, none.
func (l *local) admit(checks []Check) []Result {
	res := make([]Result, len(checks))
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := true
	newTAT := make([]time.Time, len(checks))
	for i, c := range checks {
		if c.concurrency() {
			n := l.open[c.Key]
			res[i] = Result{Allowed: n < c.Limit, Remaining: max(c.Limit-n-1, 0)}
			if n >= c.Limit {
				res[i].Remaining = 0
			}
		} else {
			res[i], newTAT[i] = gcra(l.tats[c.Key], now, c)
		}
		ok = ok && res[i].Allowed
	}
	if !ok {
		return res
	}
	for i, c := range checks {
		if c.concurrency() {
			l.open[c.Key]++
		} else {
			l.tats[c.Key] = newTAT[i]
		}
	}
	l.sweep(now)
	return res
}

// note counts checks the shared counts admitted for this replica, without
// refusing: at a switch to local counts, what this replica was granted in
// the current window is already counted, so that it never admits more
// than one limit by itself (the slots are released as any local ones).
func (l *local) note(checks []Check) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range checks {
		if c.concurrency() {
			l.open[c.Key]++
			continue
		}
		tat := l.tats[c.Key]
		if tat.Before(now) {
			tat = now
		}
		l.tats[c.Key] = tat.Add(c.interval() * time.Duration(c.Cost))
	}
	l.sweep(now)
}

// gcra is the generic cell rate algorithm with the whole limit as burst,
// as redis_rate counts it: one cost unit every Period/Limit, up to Limit
// at once.
func gcra(tat, now time.Time, c Check) (Result, time.Time) {
	interval := c.interval()
	if tat.Before(now) {
		tat = now
	}
	newTAT := tat.Add(interval * time.Duration(c.Cost))
	allowAt := newTAT.Add(-c.Period)
	diff := now.Sub(allowAt)
	if diff < 0 {
		return Result{Allowed: false, Remaining: 0, RetryAfter: -diff, ResetAfter: tat.Sub(now)}, tat
	}
	return Result{Allowed: true, Remaining: int(diff / interval), ResetAfter: newTAT.Sub(now)}, newTAT
}

// interval is the time one cost unit takes to come back: Period/Limit,
// at least 1ns (a limit above the period in nanoseconds would make it 0).
func (c Check) interval() time.Duration {
	return max(c.Period/time.Duration(c.Limit), 1)
}

// adjust moves a rate's count by delta cost units (negative: a refund),
// without refusing: it settles a reservation.
func (l *local) adjust(c Check, delta int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	tat := l.tats[c.Key]
	if tat.Before(now) {
		tat = now
	}
	tat = tat.Add(c.interval() * time.Duration(delta))
	if tat.After(now) {
		l.tats[c.Key] = tat
	} else {
		delete(l.tats, c.Key)
	}
}

// release frees a concurrency slot.
func (l *local) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] <= 1 {
		delete(l.open, key)
	} else {
		l.open[key]--
	}
}

// sweep drops rate states that are back to full, bounding the map by
// the keys active within a period. Called with l.mu held; it runs at most
// once a second, and only once the map is big enough for it to matter.
func (l *local) sweep(now time.Time) {
	if len(l.tats) < 4096 || now.Sub(l.swept) < time.Second {
		return
	}
	l.swept = now
	for k, t := range l.tats {
		if !t.After(now) {
			delete(l.tats, k)
		}
	}
}
