package cli

import (
	"io"
	"sync"
	"time"
)

// logFlushEvery bounds how long a log line waits in the buffer.
const logFlushEvery = 10 * time.Millisecond

// logBuffer batches log lines on their way to w: each line is written at
// most logFlushEvery after it was logged (at once when 64 KiB are
// waiting), so a request's log line costs no system call of its own under
// load. Close writes what is left. A SIGKILL loses at most the last
// logFlushEvery of lines. Writes are whole records (slog writes each
// record in one call), so lines never interleave.
type logBuffer struct {
	w     io.Writer
	mu    sync.Mutex
	buf   []byte
	spare []byte
	armed bool
	done  bool
	timer *time.Timer
	// wmu serialises writes to w, which happen outside mu.
	wmu sync.Mutex
}

func newLogBuffer(w io.Writer) *logBuffer {
	l := &logBuffer{w: w}
	l.timer = time.AfterFunc(time.Hour, l.Flush)
	l.timer.Stop()
	return l
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		l.wmu.Lock()
		defer l.wmu.Unlock()
		return l.w.Write(p)
	}
	l.buf = append(l.buf, p...)
	full := len(l.buf) >= 64<<10
	if !full && !l.armed {
		l.armed = true
		l.timer.Reset(logFlushEvery)
	}
	l.mu.Unlock()
	if full {
		l.Flush()
	}
	return len(p), nil
}

// Flush writes the buffered lines.
func (l *logBuffer) Flush() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	b := l.buf
	l.buf, l.spare = l.spare[:0], nil
	l.armed = false
	l.mu.Unlock()
	if len(b) > 0 {
		l.w.Write(b)
	}
	l.mu.Lock()
	if cap(b) <= 256<<10 {
		l.spare = b[:0]
	}
	l.mu.Unlock()
}

// Close writes what is buffered; later lines are written at once, after
// it (they wait for wmu, which Close holds while it writes).
func (l *logBuffer) Close() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	l.done = true
	l.timer.Stop()
	b := l.buf
	l.buf, l.spare = nil, nil
	l.mu.Unlock()
	if len(b) > 0 {
		l.w.Write(b)
	}
}
