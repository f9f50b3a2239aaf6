package router

import (
	"sync"
	"time"
)

// retryBudget caps retries at a share of requests over a sliding window,
// as Envoy's retry budgets and the SRE book's per-client retry ratio do, so
// that an outage does not multiply the load on a struggling provider.
// Fallbacks to a different deployment are not retries.
type retryBudget struct {
	ratio     float64 // retries allowed per request
	minPerSec float64 // always allowed, so low traffic can still retry

	// buckets is a ring of one-second buckets: the window is the last 10
	// seconds. A bucket holds the second it counts (sec); a stale one is
	// reset when its slot comes round again, so nothing needs a timer.
	mu      sync.Mutex
	buckets [10]struct {
		sec           int64
		reqs, retries int
	}
}

// newRetryBudget applies the defaults: 0.2 retries per request, at least
// one retry a second.
func newRetryBudget(ratio, minPerSec float64) *retryBudget {
	if ratio <= 0 {
		ratio = 0.2
	}
	if minPerSec <= 0 {
		minPerSec = 1
	}
	return &retryBudget{ratio: ratio, minPerSec: minPerSec}
}

func (b *retryBudget) bucket(now time.Time) int {
	sec := now.Unix()
	i := int(sec % int64(len(b.buckets)))
	// The slot counts another second (10 or more ago, or none yet): start
	// it afresh.
	if b.buckets[i].sec != sec {
		b.buckets[i].sec, b.buckets[i].reqs, b.buckets[i].retries = sec, 0, 0
	}
	return i
}

// request counts a request.
func (b *retryBudget) request(now time.Time) {
	b.mu.Lock()
	b.buckets[b.bucket(now)].reqs++
	b.mu.Unlock()
}

// tryRetry takes a retry from the budget, reporting whether one was left.
func (b *retryBudget) tryRetry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.bucket(now)
	sec := now.Unix()
	reqs, retries := 0, 0
	for _, bk := range b.buckets {
		// Slots not touched for a whole window hold an old second: skipped,
		// since only a slot's own access resets it.
		if sec-bk.sec < int64(len(b.buckets)) {
			reqs += bk.reqs
			retries += bk.retries
		}
	}
	// The floor (minPerSec over the window) lets low traffic retry: with
	// a handful of requests the ratio alone would allow about one retry
	// per window.
	allowed := max(b.ratio*float64(reqs), b.minPerSec*float64(len(b.buckets)))
	if float64(retries) >= allowed {
		return false
	}
	// Counted in the current second's slot (i), so it leaves the window as
	// the requests it was weighed against do.
	b.buckets[i].retries++
	return true
}
