package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/journal/journaltest"
)

func TestMemoryConformance(t *testing.T) {
	journaltest.Run(t, journaltest.Harness{
		Open: func(t *testing.T, o journal.Options) (journal.Journal, journal.Journal) {
			m := journal.NewMemory(o)
			t.Cleanup(func() { m.Close() })
			return m, m
		},
		Crash: journal.Crash,
	})
}

// clock is a settable time for the retention and eviction tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func delta(seq int64, n int) journal.Event {
	return journal.Event{Seq: seq, Kind: journal.KindDelta, Data: make([]byte, n)}
}

// TestMemoryTotalBound: at the total bound, the ended journals go first,
// oldest end first; with only live ones left, the appending answer is cut.
func TestMemoryTotalBound(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	// Each journal below holds one 936-byte event: 1000 bytes counted, and
	// each end 64 more: the first three fill the bound.
	m := journal.NewMemory(journal.Options{MaxMessageBytes: 2000, MaxTotalBytes: 3128, Retention: time.Hour})
	m.SetClock(c.now)
	defer m.Close()
	end := journal.Event{Seq: 1, Kind: journal.KindDone}
	begin := func(id string) journal.Writer {
		w := m.Begin(id)
		w.Append(delta(0, 936))
		return w
	}
	begin("old").End(end)
	c.add(time.Second)
	begin("new").End(end)
	live := begin("live")
	if got := m.Stats(); got.Messages != 3 || got.Bytes != 3000+2*64 {
		t.Fatalf("Stats = %+v, want 3 messages, 3128 bytes", got)
	}
	// Room for "live2" is made by dropping "old", then "new".
	live2 := begin("live2")
	for _, tc := range []struct {
		id   string
		want error
	}{{"old", journal.ErrNotFound}, {"new", nil}, {"live", nil}, {"live2", nil}} {
		if _, err := m.Snapshot(t.Context(), tc.id); !errors.Is(err, tc.want) {
			t.Errorf("Snapshot(%s) = %v, want %v", tc.id, err, tc.want)
		}
	}
	live2.Append(delta(1, 936))
	if _, err := m.Snapshot(t.Context(), "new"); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("Snapshot(new) = %v, want ErrNotFound after the second eviction", err)
	}
	// Only live journals are left: the next append cuts its own answer.
	live.Append(delta(1, 936))
	s, err := m.Snapshot(t.Context(), "live")
	if err != nil || !s.Truncated || len(s.Events) != 1 {
		t.Fatalf("Snapshot(live) = %d events, truncated %v, %v; want 1 event, truncated", len(s.Events), s.Truncated, err)
	}
	if err := m.Follow(t.Context(), "live", 0, func(journal.Event) bool { return true }); !errors.Is(err, journal.ErrTruncated) {
		t.Fatalf("Follow(live) = %v, want ErrTruncated", err)
	}
	// The terminal event is kept even past the bound.
	live.End(journal.Event{Seq: 2, Kind: journal.KindDone, Data: make([]byte, 936)})
	if s, _ := m.Snapshot(t.Context(), "live"); !s.Ended || len(s.Events) != 2 {
		t.Fatalf("Snapshot(live) after End = %d events, ended %v; want 2, ended", len(s.Events), s.Ended)
	}
}

// TestMemoryRetention: an ended or lost journal is dropped once its
// retention is over, and its bytes are given back.
func TestMemoryRetention(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	m := journal.NewMemory(journal.Options{Retention: time.Minute})
	m.SetClock(c.now)
	defer m.Close()
	w := m.Begin("ended")
	w.Append(delta(0, 10))
	w.End(journal.Event{Seq: 1, Kind: journal.KindDone})
	l := m.Begin("lost")
	l.Append(delta(0, 10))
	journal.Crash(l)
	m.Begin("live").Append(delta(0, 10))
	c.add(59 * time.Second)
	for _, id := range []string{"ended", "lost", "live"} {
		if _, err := m.Snapshot(t.Context(), id); err != nil {
			t.Errorf("Snapshot(%s) within retention = %v", id, err)
		}
	}
	c.add(time.Second)
	for _, tc := range []struct {
		id   string
		want error
	}{{"ended", journal.ErrNotFound}, {"lost", journal.ErrNotFound}, {"live", nil}} {
		if _, err := m.Snapshot(t.Context(), tc.id); !errors.Is(err, tc.want) {
			t.Errorf("Snapshot(%s) after retention = %v, want %v", tc.id, err, tc.want)
		}
	}
	if got := m.Stats(); got.Messages != 1 || got.Bytes != 74 {
		t.Fatalf("Stats = %+v, want 1 message, 74 bytes", got)
	}
}

// TestMemoryClose: followers return ErrClosed, and so does every later
// call; writers do nothing.
func TestMemoryClose(t *testing.T) {
	m := journal.NewMemory(journal.Options{})
	w := m.Begin("a")
	w.Append(delta(0, 1))
	done := make(chan error, 1)
	go func() { done <- m.Follow(context.Background(), "a", -1, func(journal.Event) bool { return true }) }()
	for !w.Attached() {
		time.Sleep(time.Millisecond)
	}
	m.Close()
	if err := <-done; !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Follow across Close = %v, want ErrClosed", err)
	}
	w.Append(delta(1, 1))
	m.Begin("b").End(journal.Event{Seq: 0, Kind: journal.KindDone})
	if err := m.Follow(context.Background(), "b", -1, func(journal.Event) bool { return true }); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Follow after Close = %v, want ErrClosed", err)
	}
	if err := m.Stop(context.Background(), "a"); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Stop after Close = %v, want ErrClosed", err)
	}
}

// TestMemoryBeginAgain: a second Begin of an id replaces the journal; the
// first producer's followers learn it was lost.
func TestMemoryBeginAgain(t *testing.T) {
	m := journal.NewMemory(journal.Options{})
	defer m.Close()
	w1 := m.Begin("a")
	w1.Append(delta(0, 1))
	done := make(chan error, 1)
	go func() { done <- m.Follow(context.Background(), "a", -1, func(journal.Event) bool { return true }) }()
	for !w1.Attached() {
		time.Sleep(time.Millisecond)
	}
	w2 := m.Begin("a")
	if err := <-done; !errors.Is(err, journal.ErrLost) {
		t.Fatalf("Follow of the replaced journal = %v, want ErrLost", err)
	}
	w1.Append(delta(1, 1))
	w2.End(journal.Event{Seq: 0, Kind: journal.KindDone})
	s, err := m.Snapshot(context.Background(), "a")
	if err != nil || len(s.Events) != 1 || s.Events[0].Kind != journal.KindDone {
		t.Fatalf("Snapshot = %+v, %v; want only the second journal's end", s, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    journal.Options
		want int // problems reported
	}{
		{"zero", journal.Options{}, 0},
		{"defaults", journal.Options{}.WithDefaults(), 0},
		{"negative", journal.Options{Lease: -1, Retention: -1, MaxMessageBytes: -1, MaxTotalBytes: -1}, 4},
		{"tiny lease", journal.Options{Lease: time.Millisecond}, 1},
		{"message over total", journal.Options{MaxMessageBytes: 10, MaxTotalBytes: 5}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			n := 0
			if err != nil {
				n = len(err.(interface{ Unwrap() []error }).Unwrap())
			}
			if n != tc.want {
				t.Fatalf("Validate() = %v, want %d problems", err, tc.want)
			}
		})
	}
}

// BenchmarkMemoryAppend appends answers of 1000 deltas one after the
// other, as a replica does (ended ones dropped at the total bound).
func BenchmarkMemoryAppend(b *testing.B) {
	m := journal.NewMemory(journal.Options{MaxTotalBytes: 64 << 20})
	defer m.Close()
	data := []byte(`{"text":" word"}`)
	var w journal.Writer
	var seq int64
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		if seq%1000 == 0 {
			if w != nil {
				w.End(journal.Event{Seq: seq, Kind: journal.KindDone})
			}
			n++
			w, seq = m.Begin(fmt.Sprint("bench", n)), 0
		}
		w.Append(journal.Event{Seq: seq, Kind: journal.KindDelta, Data: data})
		seq++
	}
}

// BenchmarkMemoryAppendParallel: answers appending at once, each to its
// own journal (the one mutex is shared).
func BenchmarkMemoryAppendParallel(b *testing.B) {
	m := journal.NewMemory(journal.Options{MaxTotalBytes: 64 << 20})
	defer m.Close()
	data := []byte(`{"text":" word"}`)
	var mu sync.Mutex
	n := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var w journal.Writer
		var seq int64
		for pb.Next() {
			if seq%1000 == 0 {
				if w != nil {
					w.End(journal.Event{Seq: seq, Kind: journal.KindDone})
				}
				mu.Lock()
				n++
				id := fmt.Sprint("bench", n)
				mu.Unlock()
				w, seq = m.Begin(id), 0
			}
			w.Append(journal.Event{Seq: seq, Kind: journal.KindDelta, Data: data})
			seq++
		}
	})
}

// TestMemoryNotDurable: the in-process journal dies with its process, so
// it never says it keeps an answer for another (journal.Durability); nor
// does a Writer that cannot tell.
func TestMemoryNotDurable(t *testing.T) {
	m := journal.NewMemory(journal.Options{})
	defer m.Close()
	w := m.Begin("m")
	w.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{}`)})
	if journal.Durable(w) {
		t.Error("the memory journal's Writer is Durable")
	}
	if journal.Durable(struct{ journal.Writer }{w}) {
		t.Error("a Writer without Durable is Durable")
	}
}
