package journal

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Memory is the in-process Journal: the embedded default, for one
// replica. Every method takes one mutex for a moment; followers wait on a
// channel the next append closes, never polling.
type Memory struct {
	opts Options
	now  func() time.Time

	mu     sync.Mutex
	msgs   map[string]*memMsg
	total  int64     // bytes counted against MaxTotalBytes
	done   []*memMsg // ended or lost journals, oldest first
	closed bool
}

type memMsg struct {
	id     string
	events []Event
	data   Copier
	size   int64
	last   int64 // the last Seq appended
	cut    int   // index in events of the cut, or -1

	ended   bool
	lost    bool
	dropped bool // evicted, expired or replaced: gone from msgs
	doneAt  time.Time

	wake      chan struct{} // closed by the next change; nil while nobody waits
	stop      chan struct{}
	stopped   bool
	followers int
}

// NewMemory returns an empty in-process journal (o's zero fields take
// their defaults; Lease and KeyPrefix are not used).
func NewMemory(o Options) *Memory {
	return &Memory{opts: o.WithDefaults(), now: time.Now, msgs: map[string]*memMsg{}}
}

// Begin implements Journal.
func (m *Memory) Begin(id string) Writer {
	msg := &memMsg{id: id, last: -1, cut: -1, stop: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		msg.lost, msg.dropped = true, true
		return &memWriter{m: m, msg: msg}
	}
	m.expire()
	if old := m.msgs[id]; old != nil {
		m.drop(old)
	}
	m.msgs[id] = msg
	return &memWriter{m: m, msg: msg}
}

// expire drops the journals whose retention is over. m.mu is held.
func (m *Memory) expire() {
	now := m.now()
	for len(m.done) > 0 {
		d := m.done[0]
		if !d.dropped && now.Sub(d.doneAt) < m.opts.Retention {
			return
		}
		m.done[0] = nil
		m.done = m.done[1:]
		m.drop(d)
	}
}

// drop forgets msg; its followers return. m.mu is held.
func (m *Memory) drop(msg *memMsg) {
	if msg.dropped {
		return
	}
	msg.dropped = true
	if !msg.ended {
		msg.lost = true
	}
	m.total -= msg.size
	if m.msgs[msg.id] == msg {
		delete(m.msgs, msg.id)
	}
	msg.broadcast()
}

// finish marks msg ended or lost and starts its retention. m.mu is held.
func (m *Memory) finish(msg *memMsg, ended bool) {
	msg.ended, msg.lost = ended, !ended
	msg.doneAt = m.now()
	m.done = append(m.done, msg)
	msg.broadcast()
}

func (msg *memMsg) broadcast() {
	if msg.wake != nil {
		close(msg.wake)
		msg.wake = nil
	}
}

func (msg *memMsg) live() bool { return !msg.ended && !msg.lost && !msg.dropped }

// append journals ev for msg; terminal for End. m.mu is held.
func (m *Memory) append(msg *memMsg, ev Event, terminal bool) {
	if !msg.live() || ev.Seq <= msg.last {
		if terminal && msg.live() {
			m.finish(msg, true)
		}
		return
	}
	msg.last = ev.Seq
	size := ev.Size()
	// The terminal event is always kept, so that a cut answer still ends.
	if !terminal && (msg.cut >= 0 || !m.fits(msg, size)) {
		if msg.cut < 0 {
			msg.cut = len(msg.events)
			msg.broadcast()
		}
		return
	}
	ev.Data = msg.data.Copy(ev.Data)
	msg.events = append(msg.events, ev)
	msg.size += size
	m.total += size
	if terminal {
		m.finish(msg, true)
		return
	}
	msg.broadcast()
}

// fits reports whether size more bytes may be journaled for msg, dropping
// ended journals, oldest first, to make room. m.mu is held.
func (m *Memory) fits(msg *memMsg, size int64) bool {
	if msg.size+size > m.opts.MaxMessageBytes {
		return false
	}
	if m.total+size <= m.opts.MaxTotalBytes {
		return true
	}
	m.expire()
	for len(m.done) > 0 && m.total+size > m.opts.MaxTotalBytes {
		d := m.done[0]
		m.done[0] = nil
		m.done = m.done[1:]
		m.drop(d)
	}
	return m.total+size <= m.opts.MaxTotalBytes
}

// lookup returns id's journal. m.mu is held.
func (m *Memory) lookup(id string) (*memMsg, error) {
	if m.closed {
		return nil, ErrClosed
	}
	m.expire()
	msg := m.msgs[id]
	if msg == nil {
		return nil, ErrNotFound
	}
	return msg, nil
}

// Follow implements Journal.
func (m *Memory) Follow(ctx context.Context, id string, after int64, yield func(Event) bool) error {
	m.mu.Lock()
	msg, err := m.lookup(id)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	msg.followers++
	i := sort.Search(len(msg.events), func(i int) bool { return msg.events[i].Seq > after })
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		msg.followers--
		m.mu.Unlock()
	}()
	for {
		m.mu.Lock()
		end := len(msg.events)
		if msg.cut >= 0 {
			end = msg.cut
		}
		var evs []Event
		if i < end {
			evs = msg.events[i:end]
			i = end
		}
		cut := msg.cut >= 0 && i >= msg.cut && !(msg.ended && i >= len(msg.events))
		ended, lost, closed := msg.ended, msg.lost, m.closed
		var wait chan struct{}
		if len(evs) == 0 && msg.live() && !cut && !closed {
			if msg.wake == nil {
				msg.wake = make(chan struct{})
			}
			wait = msg.wake
		}
		m.mu.Unlock()
		// Appended events are never modified, so they are read unlocked.
		for _, ev := range evs {
			if !yield(ev) {
				return nil
			}
		}
		switch {
		case len(evs) > 0:
			continue // there may be more, or an end, since
		case cut:
			return ErrTruncated
		case ended:
			return nil
		case closed:
			return ErrClosed
		case lost:
			return ErrLost
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
	}
}

// Take implements Journal. In process an answer is lost only by Crash
// (tests): its journal is moved to the new producer.
func (m *Memory) Take(ctx context.Context, id string) (Writer, Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, err := m.lookup(id)
	if err != nil {
		return nil, Snapshot{}, err
	}
	if !old.lost || old.dropped {
		return nil, Snapshot{}, ErrHeld
	}
	s := Snapshot{Truncated: old.cut >= 0, Next: old.last + 1}
	msg := &memMsg{id: id, events: old.events, size: old.size, last: old.last, cut: old.cut, stop: make(chan struct{})}
	if msg.cut >= 0 {
		msg.events = msg.events[:msg.cut]
	}
	s.Events = append([]Event(nil), msg.events...)
	// The old journal stays in done, to be dropped without counting its
	// bytes again; it is no longer id's.
	old.events, old.size = nil, 0
	m.msgs[id] = msg
	return &memWriter{m: m, msg: msg}, s, nil
}

// Stop implements Journal.
func (m *Memory) Stop(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg, err := m.lookup(id)
	if err != nil {
		return err
	}
	if !msg.live() {
		return ErrNotFound
	}
	if !msg.stopped {
		msg.stopped = true
		close(msg.stop)
	}
	return nil
}

// Snapshot implements Journal.
func (m *Memory) Snapshot(ctx context.Context, id string) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg, err := m.lookup(id)
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{Ended: msg.ended, Lost: msg.lost, Truncated: msg.cut >= 0, Next: msg.last + 1}
	evs := msg.events
	if msg.cut >= 0 {
		evs = evs[:msg.cut]
		if msg.ended && len(msg.events) > msg.cut {
			evs = append(evs[:len(evs):len(evs)], msg.events[len(msg.events)-1])
		}
	}
	s.Events = append([]Event(nil), evs...)
	return s, nil
}

// Close implements Journal: the answers still being written are lost,
// and every follower returns ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	for _, msg := range m.msgs {
		m.drop(msg)
	}
	m.done = nil
	return nil
}

// Stats is what an in-process journal holds now.
type Stats struct {
	Messages int   // journals held, live and ended
	Bytes    int64 // counted against MaxTotalBytes
}

// Stats returns what m holds now.
func (m *Memory) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{Messages: len(m.msgs), Bytes: m.total}
}

type memWriter struct {
	m   *Memory
	msg *memMsg
}

func (w *memWriter) Append(ev Event) {
	w.m.mu.Lock()
	w.m.append(w.msg, ev, false)
	w.m.mu.Unlock()
}

func (w *memWriter) End(ev Event) {
	w.m.mu.Lock()
	w.m.append(w.msg, ev, true)
	w.m.mu.Unlock()
}

func (w *memWriter) Stopped() <-chan struct{} { return w.msg.stop }

// Held implements Writer: in process, nobody takes a live answer over.
func (w *memWriter) Held() bool { return true }

// Durable implements Durability: never. The journal dies with its
// process, and a restart continues an answer from its stored
// checkpoint.
func (w *memWriter) Durable() bool { return false }

func (w *memWriter) Attached() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.msg.followers > 0
}
