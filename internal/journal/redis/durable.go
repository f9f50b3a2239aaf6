package redis

import "time"

// Durable implements journal.Durability: Redis answered this producer
// within half a lease (its first write, or a renewal that found its
// lease, was sent less than Lease/2 ago: renewals go every Lease/3, so a
// healthy journal always has one), nobody took the answer over, its
// queue is not waiting for a renewal, and nothing of it was cut (a cap,
// writes dropped while Redis was away, a Redis that came back empty).
//
// It turns false within half a lease of Redis's last answer, while the
// lease still has half a lease to run: a producer that then saves its
// answer elsewhere at once (the /v1/chat row's checkpoints) has done so
// before another replica can find the lease lapsed.
func (w *writer) Durable() bool {
	if w.taken.Load() || time.Now().UnixNano() > w.held.Load()-int64(w.j.o.Lease/6) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.dead && !w.waiting && w.cut < 0
}
