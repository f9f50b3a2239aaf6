package httpapi

import (
	"errors"
	"net/http"
	"sync"
	"time"
)

// errStreamClosed is returned by writes after the stream was closed.
var errStreamClosed = errors.New("stream closed")

// eventStream is one SSE response. It owns the commit point: until the
// first write (or the first heartbeat) nothing has been sent, so the
// handler may still answer with a real status; after it, failures must be
// written as events.
//
// Every write is flushed at once. A heartbeat comment is written whenever
// nothing else was for the heartbeat interval, including before the first
// event, so that idle-timeout proxies keep the stream open through a long
// TTFT; a heartbeat commits the response. Each write pushes the connection's
// write deadline forward, so a client that stops reading is detected and
// the upstream is cancelled instead of blocking forever.
//
// The heartbeat runs on a timer goroutine; every use of the ResponseWriter
// is serialised by mu.
type eventStream struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	fl           errFlusher // nil: flush through rc
	writeTimeout time.Duration
	ping         []byte // the heartbeat event
	heartbeat    time.Duration
	// prelude is written right after the headers when the response
	// commits (e.g. a retry: hint).
	prelude []byte

	mu        sync.Mutex
	committed bool
	closed    bool
	err       error
	lastWrite time.Time
	deadline  time.Time
	timer     *time.Timer
	firstByte time.Time
	beats     int
}

func newEventStream(w http.ResponseWriter, ping []byte, heartbeat, writeTimeout time.Duration) *eventStream {
	s := &eventStream{w: w, rc: http.NewResponseController(w), fl: flusherOf(w), ping: ping, heartbeat: heartbeat, writeTimeout: writeTimeout}
	s.lastWrite = time.Now()
	if heartbeat > 0 {
		s.mu.Lock()
		s.timer = time.AfterFunc(heartbeat, s.beat)
		s.mu.Unlock()
	}
	return s
}

// Header edits the response headers if the response is not committed yet,
// reporting whether it could.
func (s *eventStream) Header(edit func(http.Header)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed || s.closed {
		return false
	}
	edit(s.w.Header())
	return true
}

// Trailer edits the response's header after it was sent, for trailers
// (keys prefixed http.TrailerPrefix), sent when the handler returns; it
// reports whether edit ran.
func (s *eventStream) Trailer(edit func(http.Header)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.committed || s.closed {
		return false
	}
	edit(s.w.Header())
	return true
}

// Committed reports whether headers were sent.
func (s *eventStream) Committed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

// Uncommitted runs f with exclusive use of the ResponseWriter if the
// response is not committed, and closes the stream; it reports whether f
// ran. Handlers use it to answer a failure before the first byte with a
// proper status.
func (s *eventStream) Uncommitted(f func(w http.ResponseWriter)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed || s.closed {
		return false
	}
	s.closed = true
	s.stopTimer()
	f(s.w)
	return true
}

// Write sends b (one or more complete events) and flushes it.
func (s *eventStream) Write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return errStreamClosed
	}
	now := time.Now()
	if s.writeTimeout > 0 && now.Add(s.writeTimeout/2).After(s.deadline) {
		s.deadline = now.Add(s.writeTimeout)
		_ = s.rc.SetWriteDeadline(s.deadline)
	}
	if !s.committed {
		s.commitLocked()
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	// Flushing calls the connection's FlushError itself when it can:
	// the first flush writes the headers, net/http's deepest call, made
	// under every frame of the stream.
	var err error
	if s.fl != nil {
		err = s.fl.FlushError()
	} else {
		err = s.rc.Flush()
	}
	if err != nil {
		s.err = err
		return err
	}
	if s.firstByte.IsZero() {
		s.firstByte = time.Now()
	}
	s.lastWrite = now
	return nil
}

// errFlusher is net/http's response writer's flush.
type errFlusher interface{ FlushError() error }

// flusherOf finds w's FlushError, unwrapping as http.ResponseController
// does, or returns nil.
func flusherOf(w http.ResponseWriter) errFlusher {
	for {
		if f, ok := w.(errFlusher); ok {
			return f
		}
		if _, ok := w.(http.Flusher); ok {
			// A wrapper with a flush of its own (a buffering
			// middleware): flush through it, as rc does.
			return nil
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

func (s *eventStream) commitLocked() {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	s.w.WriteHeader(http.StatusOK)
	s.committed = true
	if len(s.prelude) > 0 {
		s.w.Write(s.prelude)
	}
}

// beat writes a heartbeat comment if the stream was quiet for a whole
// interval, and re-arms itself.
func (s *eventStream) beat() {
	s.mu.Lock()
	if s.closed || s.err != nil {
		s.mu.Unlock()
		return
	}
	idle := time.Since(s.lastWrite)
	s.mu.Unlock()
	beat := idle >= s.heartbeat
	if beat {
		// An event written since is followed by a needless comment:
		// harmless.
		if s.Write(s.ping) != nil {
			return
		}
		idle = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if beat {
		s.beats++
	}
	if !s.closed {
		s.timer.Reset(s.heartbeat - idle)
	}
}

// commentHeartbeat is an SSE comment: every client ignores it.
var commentHeartbeat = []byte(": ping\n\n")

// Failed reports whether a write to the client failed.
func (s *eventStream) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// FirstByte is when the first byte after the headers was flushed.
func (s *eventStream) FirstByte() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstByte
}

// Close stops the heartbeat and clears the write deadline so the
// connection can serve its next request. Writes after Close fail.
func (s *eventStream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.stopTimer()
	if !s.deadline.IsZero() {
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}

func (s *eventStream) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
	}
}
