// Package journaltest is the conformance suite every journal.Journal
// runs: replay from any cursor, live following, ends, lost producers,
// stop and attachment across replicas, retention and the message cap.
package journaltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/firstword/firstword/internal/journal"
)

// Harness opens the journal under test.
type Harness struct {
	// Open returns two journals on one store, as two replicas see it,
	// both with o (o.Lease is short, so that a crash shows quickly). An
	// in-process journal returns the same one twice. They are closed by
	// the time the test ends.
	Open func(t *testing.T, o journal.Options) (a, b journal.Journal)
	// Crash makes w's producer go away without an end and without
	// releasing its lease, as a killed replica does.
	Crash func(w journal.Writer)
}

// Lease is the lease the suite opens journals with.
const Lease = 300 * time.Millisecond

// patience bounds every wait: far beyond what anything should take, so
// that only a hang fails, on a busy machine too.
const patience = 15 * time.Second

var ids atomic.Int64

// newID returns a message id no other test uses.
func newID() string { return fmt.Sprintf("msg-%d-%d", time.Now().UnixNano(), ids.Add(1)) }

// Answer returns a whole answer of n deltas: meta, the deltas, done.
func Answer(n int) []journal.Event {
	evs := []journal.Event{{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{"message_id":"m"}`)}}
	for i := 1; i <= n; i++ {
		evs = append(evs, journal.Event{Seq: int64(i), Kind: journal.KindDelta, Data: fmt.Appendf(nil, `{"text":"w%d "}`, i)})
	}
	return append(evs, journal.Event{Seq: int64(n + 1), Kind: journal.KindDone, Data: []byte(`{"finish_reason":"stop"}`)})
}

// produce writes evs to w, the last with End if end.
func produce(w journal.Writer, evs []journal.Event, end bool) {
	for i, ev := range evs {
		if end && i == len(evs)-1 {
			w.End(ev)
		} else {
			w.Append(ev)
		}
	}
}

// begin opens the journals with o, begins a new answer on a, appends evs
// (at least one) and waits until b can follow it.
func begin(t *testing.T, h Harness, o journal.Options, evs []journal.Event) (a, b journal.Journal, id string, w journal.Writer) {
	t.Helper()
	a, b = h.Open(t, o)
	id = newID()
	w = a.Begin(id)
	produce(w, evs, false)
	live(t, b, id)
	return a, b, id, w
}

// collect follows id from after and returns what was yielded and the
// error, bounded by patience.
func collect(t *testing.T, j journal.Journal, id string, after int64) ([]journal.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	var got []journal.Event
	err := j.Follow(ctx, id, after, func(ev journal.Event) bool {
		got = append(got, cloneEvent(ev))
		return true
	})
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Follow(%s, %d) still waiting after %v, having yielded %d events", id, after, patience, len(got))
	}
	return got, err
}

// collectLater runs collect on a goroutine of its own; wait returns its
// results once it has returned. The test does not end before it does.
func collectLater(t *testing.T, j journal.Journal, id string, after int64) (wait func() ([]journal.Event, error)) {
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	var got []journal.Event
	var err error
	go func() {
		defer close(done)
		got, err = collect(t, j, id, after)
	}()
	return func() ([]journal.Event, error) {
		<-done
		return got, err
	}
}

func cloneEvent(ev journal.Event) journal.Event {
	ev.Data = append([]byte(nil), ev.Data...)
	return ev
}

// eventually waits for cond, failing the test after patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ended waits until j shows id's end (writes may reach it after End
// returns).
func ended(t *testing.T, j journal.Journal, id string) journal.Snapshot {
	t.Helper()
	var s journal.Snapshot
	eventually(t, "the end of "+id+" journaled", func() bool {
		var err error
		s, err = j.Snapshot(t.Context(), id)
		return err == nil && s.Ended
	})
	return s
}

// live waits until j can follow id: its first event is journaled.
func live(t *testing.T, j journal.Journal, id string) {
	t.Helper()
	eventually(t, id+" followable", func() bool {
		s, err := j.Snapshot(t.Context(), id)
		return err == nil && len(s.Events) > 0
	})
}

// eventOpts compare events by their data's bytes, an empty list as none.
var eventOpts = cmp.Options{
	cmp.Transformer("text", func(e journal.Event) textEvent { return textEvent{e.Seq, e.Kind, string(e.Data)} }),
	cmpopts.EquateEmpty(),
}

type textEvent struct {
	Seq        int64
	Kind, Data string
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	opts := journal.Options{Lease: Lease, Retention: time.Minute}
	t.Run("ReplayFromEveryCursor", func(t *testing.T) {
		a, b := h.Open(t, opts)
		id := newID()
		want := Answer(20)
		produce(a.Begin(id), want, true)
		ended(t, b, id)
		for after := int64(-1); after <= int64(len(want))+2; after++ {
			for name, j := range map[string]journal.Journal{"producer": a, "other": b} {
				got, err := collect(t, j, id, after)
				if err != nil {
					t.Fatalf("%s: Follow(after %d) = %v", name, after, err)
				}
				tail := want[min(int(after+1), len(want)):]
				if diff := cmp.Diff(tail, got, eventOpts); diff != "" {
					t.Fatalf("%s: Follow(after %d) (-want +got):\n%s", name, after, diff)
				}
			}
		}
	})
	t.Run("ReplayThenFollowLive", func(t *testing.T) {
		want := Answer(30)
		a, b, id, w := begin(t, h, opts, want[:10])
		var followers []func() ([]journal.Event, error)
		for k := range 12 {
			followers = append(followers, collectLater(t, []journal.Journal{a, b}[k%2], id, int64(k-1)))
		}
		produce(w, want[10:], true)
		for k, wait := range followers {
			got, err := wait()
			if err != nil {
				t.Fatalf("follower from %d: %v", k-1, err)
			}
			if diff := cmp.Diff(want[k:], got, eventOpts); diff != "" {
				t.Fatalf("follower from %d (-want +got):\n%s", k-1, diff)
			}
		}
	})
	t.Run("ConcurrentProducerExactlyOnceInOrder", func(t *testing.T) {
		want := Answer(500)
		a, b, id, w := begin(t, h, opts, want[:1])
		var followers []func() ([]journal.Event, error)
		for k := range 6 {
			followers = append(followers, collectLater(t, []journal.Journal{a, b}[k%2], id, -1))
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for i, ev := range want[1:] {
				if i%50 == 0 {
					time.Sleep(time.Millisecond)
				}
				if ev.Terminal() {
					w.End(ev)
				} else {
					w.Append(ev)
				}
			}
		})
		wg.Wait()
		for k, wait := range followers {
			got, err := wait()
			if err != nil {
				t.Fatalf("follower %d: %v", k, err)
			}
			if diff := cmp.Diff(want, got, eventOpts); diff != "" {
				t.Fatalf("follower %d (-want +got):\n%s", k, diff)
			}
		}
	})
	t.Run("TerminalEndsFollow", func(t *testing.T) {
		for _, kind := range []string{journal.KindDone, journal.KindError} {
			t.Run(kind, func(t *testing.T) {
				want := Answer(2)
				want[len(want)-1].Kind = kind
				_, b, id, w := begin(t, h, opts, want[:3])
				wait := collectLater(t, b, id, -1)
				w.End(want[3])
				got, err := wait()
				if err != nil {
					t.Fatalf("Follow = %v, want nil", err)
				}
				if diff := cmp.Diff(want, got, eventOpts); diff != "" {
					t.Fatalf("(-want +got):\n%s", diff)
				}
				// Appends after the end are not journaled.
				w.Append(journal.Event{Seq: 9, Kind: journal.KindDelta, Data: []byte(`{}`)})
				w.End(journal.Event{Seq: 10, Kind: journal.KindDone})
				s := ended(t, b, id)
				if diff := cmp.Diff(want, s.Events, eventOpts); diff != "" || s.Lost || s.Truncated {
					t.Fatalf("Snapshot lost %v truncated %v (-want +got):\n%s", s.Lost, s.Truncated, diff)
				}
			})
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		a, b := h.Open(t, opts)
		for name, j := range map[string]journal.Journal{"producer": a, "other": b} {
			id := newID()
			if _, err := collect(t, j, id, -1); !errors.Is(err, journal.ErrNotFound) {
				t.Errorf("%s: Follow(never begun) = %v, want ErrNotFound", name, err)
			}
			if err := j.Stop(t.Context(), id); !errors.Is(err, journal.ErrNotFound) {
				t.Errorf("%s: Stop(never begun) = %v, want ErrNotFound", name, err)
			}
			if _, err := j.Snapshot(t.Context(), id); !errors.Is(err, journal.ErrNotFound) {
				t.Errorf("%s: Snapshot(never begun) = %v, want ErrNotFound", name, err)
			}
		}
	})
	t.Run("Lost", func(t *testing.T) {
		want := Answer(5)[:4]
		_, b, id, w := begin(t, h, opts, want)
		wait := collectLater(t, b, id, -1)
		eventually(t, "the follower attached", w.Attached)
		h.Crash(w)
		got, err := wait()
		if !errors.Is(err, journal.ErrLost) {
			t.Fatalf("Follow while the producer dies = %v, want ErrLost", err)
		}
		if diff := cmp.Diff(want, got, eventOpts); diff != "" {
			t.Fatalf("Follow while the producer dies (-want +got):\n%s", diff)
		}
		got, err = collect(t, b, id, 1)
		if !errors.Is(err, journal.ErrLost) {
			t.Fatalf("Follow after the producer died = %v, want ErrLost", err)
		}
		if diff := cmp.Diff(want[2:], got, eventOpts); diff != "" {
			t.Fatalf("Follow after the producer died (-want +got):\n%s", diff)
		}
		s, err := b.Snapshot(t.Context(), id)
		if err != nil || !s.Lost || s.Ended {
			t.Fatalf("Snapshot = lost %v ended %v, %v; want lost", s.Lost, s.Ended, err)
		}
		if diff := cmp.Diff(want, s.Events, eventOpts); diff != "" {
			t.Fatalf("Snapshot (-want +got):\n%s", diff)
		}
		if err := b.Stop(t.Context(), id); !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("Stop(lost) = %v, want ErrNotFound", err)
		}
	})
	t.Run("TakeOver", func(t *testing.T) {
		want := Answer(6)
		a, b, id, w := begin(t, h, opts, want[:4])
		if _, _, err := b.Take(t.Context(), id); !errors.Is(err, journal.ErrHeld) {
			t.Fatalf("Take of a live answer = %v, want ErrHeld", err)
		}
		if _, _, err := b.Take(t.Context(), newID()); !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("Take of no answer = %v, want ErrNotFound", err)
		}
		h.Crash(w)
		var nw journal.Writer
		var snap journal.Snapshot
		eventually(t, "the answer taken over", func() bool {
			var err error
			nw, snap, err = b.Take(t.Context(), id)
			if err != nil && !errors.Is(err, journal.ErrHeld) {
				t.Fatalf("Take of a lost answer = %v", err)
			}
			return err == nil
		})
		if diff := cmp.Diff(want[:4], snap.Events, eventOpts); diff != "" || snap.Next < 4 || snap.Truncated {
			t.Fatalf("Take's snapshot: next %d, truncated %v (-want +got):\n%s", snap.Next, snap.Truncated, diff)
		}
		// The new producer numbers on from Next.
		for i := 4; i < len(want); i++ {
			want[i].Seq = snap.Next + int64(i-4)
		}
		// Only one takes it over.
		for _, j := range []journal.Journal{a, b} {
			if _, _, err := j.Take(t.Context(), id); !errors.Is(err, journal.ErrHeld) {
				t.Fatalf("a second Take = %v, want ErrHeld", err)
			}
		}
		if !nw.Held() {
			t.Fatal("the new producer does not hold the answer")
		}
		wait := collectLater(t, a, id, 1)
		produce(nw, want[4:], true)
		got, err := wait()
		if err != nil {
			t.Fatalf("Follow across the take-over = %v", err)
		}
		if diff := cmp.Diff(want[2:], got, eventOpts); diff != "" {
			t.Fatalf("Follow across the take-over (-want +got):\n%s", diff)
		}
		if _, _, err := b.Take(t.Context(), id); !errors.Is(err, journal.ErrHeld) {
			t.Fatalf("Take of an ended answer = %v, want ErrHeld", err)
		}
	})
	t.Run("Stop", func(t *testing.T) {
		a, b, id, w := begin(t, h, opts, Answer(0)[:1])
		select {
		case <-w.Stopped():
			t.Fatal("Stopped closed before Stop")
		default:
		}
		if err := b.Stop(t.Context(), id); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		select {
		case <-w.Stopped():
		case <-time.After(patience):
			t.Fatalf("Stopped not closed %v after Stop", patience)
		}
		if err := a.Stop(t.Context(), id); err != nil {
			t.Fatalf("Stop again = %v", err)
		}
		w.End(journal.Event{Seq: 1, Kind: journal.KindError, Data: []byte(`{"error":"cancelled"}`)})
		ended(t, b, id)
		eventually(t, "Stop after the end is ErrNotFound", func() bool {
			return errors.Is(b.Stop(t.Context(), id), journal.ErrNotFound)
		})
	})
	t.Run("Attached", func(t *testing.T) {
		a, b, id, w := begin(t, h, opts, Answer(0)[:1])
		if w.Attached() {
			t.Fatal("Attached before any follower")
		}
		for name, j := range map[string]journal.Journal{"producer": a, "other": b} {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- j.Follow(ctx, id, -1, func(journal.Event) bool { return true }) }()
			eventually(t, name+": Attached with a follower", w.Attached)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: Follow after cancel = %v, want context.Canceled", name, err)
			}
			eventually(t, name+": not Attached once the follower left", func() bool { return !w.Attached() })
		}
		// A follower that breaks out detaches too.
		done := make(chan error, 1)
		go func() { done <- b.Follow(t.Context(), id, -1, func(journal.Event) bool { return false }) }()
		if err := <-done; err != nil {
			t.Fatalf("Follow that breaks out = %v, want nil", err)
		}
		eventually(t, "not Attached after a break", func() bool { return !w.Attached() })
		w.End(journal.Event{Seq: 1, Kind: journal.KindDone})
	})
	t.Run("CancelWhileWaiting", func(t *testing.T) {
		_, b, id, w := begin(t, h, opts, Answer(0)[:1])
		ctx, cancel := context.WithCancel(t.Context())
		n := 0
		err := b.Follow(ctx, id, -1, func(journal.Event) bool { n++; cancel(); return true })
		if !errors.Is(err, context.Canceled) || n != 1 {
			t.Fatalf("Follow = %v after %d events, want context.Canceled after 1", err, n)
		}
		w.End(journal.Event{Seq: 1, Kind: journal.KindDone})
	})
	t.Run("AppendCopiesAndOrders", func(t *testing.T) {
		a, b := h.Open(t, opts)
		id := newID()
		w := a.Begin(id)
		buf := []byte(`{"text":"a"}`)
		w.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: buf})
		copy(buf, `{"text":"X"}`)
		w.Append(journal.Event{Seq: 0, Kind: journal.KindDelta, Data: []byte(`{"dup":1}`)})
		w.Append(journal.Event{Seq: 2, Kind: journal.KindDelta, Data: buf})
		w.Append(journal.Event{Seq: 1, Kind: journal.KindDelta, Data: []byte(`{"late":1}`)})
		w.End(journal.Event{Seq: 3, Kind: journal.KindDone})
		want := []journal.Event{
			{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{"text":"a"}`)},
			{Seq: 2, Kind: journal.KindDelta, Data: []byte(`{"text":"X"}`)},
			{Seq: 3, Kind: journal.KindDone},
		}
		s := ended(t, b, id)
		if diff := cmp.Diff(want, s.Events, eventOpts); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	})
	t.Run("Retention", func(t *testing.T) {
		o := opts
		o.Retention = 200 * time.Millisecond
		a, b := h.Open(t, o)
		id := newID()
		produce(a.Begin(id), Answer(1), true)
		ended(t, b, id)
		eventually(t, "dropped after its retention", func() bool {
			_, err := collect(t, b, id, -1)
			return errors.Is(err, journal.ErrNotFound)
		})
		if _, err := a.Snapshot(t.Context(), id); !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("Snapshot after retention = %v, want ErrNotFound", err)
		}
	})
	t.Run("MessageCap", func(t *testing.T) {
		o := opts
		o.MaxMessageBytes = 1000
		a, b := h.Open(t, o)
		id := newID()
		w := a.Begin(id)
		// Each event counts 100 bytes of data and 64 of overhead: six fit.
		data := []byte(`"` + strings.Repeat("x", 98) + `"`)
		var want []journal.Event
		for i := range 10 {
			ev := journal.Event{Seq: int64(i), Kind: journal.KindDelta, Data: data}
			w.Append(ev)
			if i < 6 {
				want = append(want, ev)
			}
		}
		term := journal.Event{Seq: 10, Kind: journal.KindDone, Data: []byte(`{}`)}
		w.End(term)
		s := ended(t, b, id)
		if !s.Truncated || s.Lost {
			t.Fatalf("Snapshot truncated %v lost %v, want truncated", s.Truncated, s.Lost)
		}
		if diff := cmp.Diff(append(want[:6:6], term), s.Events, eventOpts); diff != "" {
			t.Fatalf("Snapshot (-want +got):\n%s", diff)
		}
		for _, tc := range []struct {
			after   int64
			want    []journal.Event
			wantErr error
		}{
			{-1, want, journal.ErrTruncated},
			{3, want[4:], journal.ErrTruncated},
			{5, nil, journal.ErrTruncated},
			{7, nil, journal.ErrTruncated},
			{10, nil, nil},
		} {
			got, err := collect(t, b, id, tc.after)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Follow(after %d) = %v, want %v", tc.after, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, eventOpts); diff != "" {
				t.Errorf("Follow(after %d) (-want +got):\n%s", tc.after, diff)
			}
		}
	})
}
