package metering

import (
	"context"
	"sync"
	"testing"
	"time"
)

// recording is a Meter that notes the goroutine-visible order of records.
type recording struct {
	mu  sync.Mutex
	ids []string
	got chan string
}

func (m *recording) Record(_ context.Context, r *Record) {
	m.mu.Lock()
	m.ids = append(m.ids, r.RequestID)
	m.mu.Unlock()
	if m.got != nil {
		m.got <- r.RequestID
	}
}

func (m *recording) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.ids...)
}

func TestDeferredMetersOnlyCancelledLater(t *testing.T) {
	next := &recording{got: make(chan string, 16)}
	d := NewDeferred(next)
	defer d.Close()
	ctx := context.Background()

	d.Record(ctx, &Record{RequestID: "done", Status: StatusComplete})
	if got := next.seen(); len(got) != 1 || got[0] != "done" {
		t.Fatalf("a complete request was not metered inline: %v", got)
	}
	<-next.got

	start := time.Now()
	for _, id := range []string{"c1", "c2", "c3"} {
		d.Record(ctx, &Record{RequestID: id, Status: StatusCancelled})
	}
	if got := next.seen(); len(got) != 1 {
		t.Fatalf("cancelled requests were metered inline: %v", got)
	}
	for _, want := range []string{"c1", "c2", "c3"} {
		select {
		case id := <-next.got:
			if id != want {
				t.Fatalf("metered %s, want %s (arrival order)", id, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s was never metered", want)
		}
	}
	if waited := time.Since(start); waited < deferQuiet {
		t.Errorf("the queue was metered %v after the last close, before a quiet %v", waited, deferQuiet)
	}
}

// A steady run of closes, never quiet for deferQuiet, is still metered
// within deferMax of its first.
func TestDeferredMetersWithinMax(t *testing.T) {
	next := &recording{got: make(chan string, deferQueue)}
	d := NewDeferred(next)
	defer d.Close()
	start := time.Now()
	for n := 0; n < deferQueue/2; n++ {
		d.Record(context.Background(), &Record{RequestID: "c", Status: StatusCancelled})
		select {
		case <-next.got:
			t.Logf("first of %d closes metered after %v", n+1, time.Since(start))
			return
		default:
		}
		for spin := time.Now(); time.Since(spin) < deferQuiet/10; {
		}
	}
	t.Fatalf("nothing metered in %v of closes %v apart", time.Since(start), deferQuiet/10)
}

func TestDeferredCloseDrains(t *testing.T) {
	next := &recording{}
	d := NewDeferred(next)
	for range 100 {
		d.Record(context.Background(), &Record{RequestID: "c", Status: StatusCancelled})
	}
	d.Close()
	if n := len(next.seen()); n != 100 {
		t.Fatalf("Close left %d of 100 queued records unmetered", 100-n)
	}
	d.Record(context.Background(), &Record{RequestID: "late", Status: StatusCancelled})
	if got := next.seen(); got[len(got)-1] != "late" {
		t.Fatalf("a record after Close was not metered inline")
	}
	d.Close() // twice is harmless
}

func TestDeferredFullQueueMetersInline(t *testing.T) {
	block := make(chan struct{})
	next := &blocking{release: block}
	d := NewDeferred(next)
	// The first record blocks the goroutine in next; the queue fills
	// behind it, and what does not fit is metered on the caller.
	d.Record(context.Background(), &Record{Status: StatusCancelled})
	for next.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	for range deferQueue + 10 {
		d.Record(context.Background(), &Record{Status: StatusCancelled})
	}
	d.mu.Lock()
	queued := len(d.queue)
	d.mu.Unlock()
	if queued != deferQueue || next.count() != 11 {
		t.Fatalf("queued %d (bound %d), metered inline %d (want 10)", queued, deferQueue, next.count()-1)
	}
	close(block)
	d.Close()
	if n := next.count(); n != deferQueue+11 {
		t.Fatalf("metered %d of %d records", n, deferQueue+11)
	}
}

// blocking blocks its first record until release closes; records after a
// full queue are metered inline, on the caller, and do not block.
type blocking struct {
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (b *blocking) Record(context.Context, *Record) {
	b.mu.Lock()
	b.n++
	first := b.n == 1
	b.mu.Unlock()
	if first {
		<-b.release
	}
}

func (b *blocking) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}
