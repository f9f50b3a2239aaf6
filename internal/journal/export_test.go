package journal

import "time"

// Crash makes w's producer go away without an end (tests).
func Crash(w Writer) { w.(*memWriter).crash() }

// SetClock makes m read the time from now (tests).
func (m *Memory) SetClock(now func() time.Time) { m.now = now }
