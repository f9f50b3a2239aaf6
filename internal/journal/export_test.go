package journal

import "time"

// Crash makes w's producer go away without an end, as a replica dying
// would (tests).
func Crash(w Writer) {
	mw := w.(*memWriter)
	mw.m.mu.Lock()
	defer mw.m.mu.Unlock()
	if mw.msg.live() {
		mw.m.finish(mw.msg, false)
	}
}

// SetClock makes m read the time from now (tests).
func (m *Memory) SetClock(now func() time.Time) { m.now = now }
