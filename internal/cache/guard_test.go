package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fake is an inner cache that does what its behave function says, for Get
// and Set alike, and counts the calls.
type fake struct {
	calls atomic.Int32

	mu     sync.Mutex
	behave func(ctx context.Context) (*Entry, error)
}

func (f *fake) set(b func(ctx context.Context) (*Entry, error)) {
	f.mu.Lock()
	f.behave = b
	f.mu.Unlock()
}

func (f *fake) op(ctx context.Context) (*Entry, error) {
	f.calls.Add(1)
	f.mu.Lock()
	b := f.behave
	f.mu.Unlock()
	return b(ctx)
}

func (f *fake) Get(ctx context.Context, _ string) (*Entry, error) { return f.op(ctx) }

func (f *fake) Set(ctx context.Context, _ string, _ *Entry) error {
	_, err := f.op(ctx)
	return err
}

var hit = &Entry{Model: "m"}

func answer(ctx context.Context) (*Entry, error) { return hit, nil }

// untilDone is a frozen store behind a client that honours its context.
func untilDone(ctx context.Context) (*Entry, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func failing(ctx context.Context) (*Entry, error) { return nil, errors.New("connection refused") }

// TestGuardedGet: a Get costs at most the timeout, whatever the inner
// cache does, and anything but an answer in time is a miss.
func TestGuardedGet(t *testing.T) {
	for _, tc := range []struct {
		name     string
		behave   func(release <-chan struct{}) func(context.Context) (*Entry, error)
		want     *Entry
		took     time.Duration
		stats    GuardStats
		released GuardStats // after the inner call was let go
	}{
		{
			name:   "answers in time",
			behave: func(<-chan struct{}) func(context.Context) (*Entry, error) { return answer },
			want:   hit,
		},
		{
			name: "answers slowly but in time",
			behave: func(<-chan struct{}) func(context.Context) (*Entry, error) {
				return func(ctx context.Context) (*Entry, error) { time.Sleep(40 * time.Millisecond); return hit, nil }
			},
			want: hit,
			took: 40 * time.Millisecond,
		},
		{
			name:     "frozen, honours its context",
			behave:   func(<-chan struct{}) func(context.Context) (*Entry, error) { return untilDone },
			took:     50 * time.Millisecond,
			stats:    GuardStats{Timeouts: 1},
			released: GuardStats{Timeouts: 1},
		},
		{
			name: "frozen, ignores its context",
			behave: func(release <-chan struct{}) func(context.Context) (*Entry, error) {
				return func(context.Context) (*Entry, error) { <-release; return hit, nil }
			},
			took:     50 * time.Millisecond,
			stats:    GuardStats{Timeouts: 1, Abandoned: 1},
			released: GuardStats{Timeouts: 1},
		},
		{
			// A client with socket deadlines from ctx: its own timeout
			// error may come a moment before ctx is done.
			name: "frozen, times out by itself at the deadline",
			behave: func(<-chan struct{}) func(context.Context) (*Entry, error) {
				return func(ctx context.Context) (*Entry, error) {
					d, _ := ctx.Deadline()
					time.Sleep(time.Until(d))
					return nil, errors.New("read tcp: i/o timeout")
				}
			},
			took:     50 * time.Millisecond,
			stats:    GuardStats{Timeouts: 1},
			released: GuardStats{Timeouts: 1},
		},
		{
			name:     "fails",
			behave:   func(<-chan struct{}) func(context.Context) (*Entry, error) { return failing },
			stats:    GuardStats{Errors: 1},
			released: GuardStats{Errors: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				f := &fake{}
				f.set(tc.behave(release))
				g := Guard(f, GuardOptions{})
				start := time.Now()
				got, err := g.Get(t.Context(), "k")
				took := time.Since(start)
				if got != tc.want || err != nil || took != tc.took {
					t.Errorf("Get = %v, %v after %v, want %v, nil after %v", got, err, took, tc.want, tc.took)
				}
				synctest.Wait()
				if diff := cmp.Diff(tc.stats, g.Stats()); diff != "" {
					t.Errorf("Stats (-want +got):\n%s", diff)
				}
				close(release)
				synctest.Wait()
				if diff := cmp.Diff(tc.released, g.Stats()); diff != "" {
					t.Errorf("Stats after the inner call ended (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestGuardedSkipsAfterFailures: after Failures timeouts in a row the
// inner cache is not called for Cooldown; then one probe tries it, and its
// success brings it back.
func TestGuardedSkipsAfterFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		f.set(untilDone)
		g := Guard(f, GuardOptions{Timeout: 50 * time.Millisecond, Failures: 3, Cooldown: 10 * time.Second})
		ctx := t.Context()
		for range 3 {
			g.Get(ctx, "k")
		}
		synctest.Wait()
		if diff := cmp.Diff(GuardStats{Timeouts: 3, Opens: 1, Open: true}, g.Stats()); diff != "" {
			t.Fatalf("after 3 timeouts (-want +got):\n%s", diff)
		}

		// Skipped: no call, no wait.
		start := time.Now()
		for range 5 {
			if e, err := g.Get(ctx, "k"); e != nil || err != nil {
				t.Errorf("skipped Get = %v, %v, want a miss", e, err)
			}
			if err := g.Set(ctx, "k", hit); err != nil {
				t.Errorf("skipped Set = %v", err)
			}
		}
		time.Sleep(10*time.Second - 200*time.Millisecond)
		g.Get(ctx, "k")
		if took := time.Since(start); took != 10*time.Second-200*time.Millisecond {
			t.Errorf("skipped operations took %v, want none of the time", took-(10*time.Second-200*time.Millisecond))
		}
		if n := f.calls.Load(); n != 3 {
			t.Errorf("inner called %d times, want only the first 3", n)
		}
		if diff := cmp.Diff(GuardStats{Timeouts: 3, Skipped: 11, Opens: 1, Open: true}, g.Stats()); diff != "" {
			t.Errorf("during the cooldown (-want +got):\n%s", diff)
		}

		// The store recovered; after the cooldown one probe finds out.
		f.set(answer)
		time.Sleep(200 * time.Millisecond)
		if e, _ := g.Get(ctx, "k"); e != hit {
			t.Errorf("the probe Get = %v, want the hit", e)
		}
		if e, _ := g.Get(ctx, "k"); e != hit {
			t.Errorf("Get after the probe = %v, want the hit", e)
		}
		if n := f.calls.Load(); n != 5 {
			t.Errorf("inner called %d times, want 3 + the probe + 1", n)
		}
		if diff := cmp.Diff(GuardStats{Timeouts: 3, Skipped: 11, Opens: 1}, g.Stats()); diff != "" {
			t.Errorf("after the probe (-want +got):\n%s", diff)
		}
	})
}

// TestGuardedFailedProbe: while the probe is out, everything else is
// skipped; a failed probe skips the cache for another cooldown.
func TestGuardedFailedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		f.set(untilDone)
		g := Guard(f, GuardOptions{Failures: 1, Cooldown: time.Second})
		ctx := t.Context()
		g.Get(ctx, "k") // opens
		time.Sleep(time.Second)

		probed := make(chan struct{})
		go func() { g.Get(ctx, "probe"); close(probed) }()
		synctest.Wait() // the probe waits on the frozen store
		start := time.Now()
		if e, _ := g.Get(ctx, "k"); e != nil || time.Since(start) != 0 {
			t.Errorf("Get during the probe = %v after %v, want an instant miss", e, time.Since(start))
		}
		<-probed
		synctest.Wait()
		if n := f.calls.Load(); n != 2 {
			t.Errorf("inner called %d times, want the first and the probe", n)
		}
		if diff := cmp.Diff(GuardStats{Timeouts: 2, Skipped: 1, Opens: 1, Open: true}, g.Stats()); diff != "" {
			t.Errorf("after the failed probe (-want +got):\n%s", diff)
		}

		f.set(answer)
		time.Sleep(time.Second - time.Nanosecond) // the probe failed 50ms into it
		if e, _ := g.Get(ctx, "k"); e != nil {
			t.Errorf("Get before the second cooldown ended = %v, want a skip", e)
		}
		time.Sleep(time.Nanosecond)
		if e, _ := g.Get(ctx, "k"); e != hit {
			t.Errorf("Get after the second cooldown = %v, want the probe's hit", e)
		}
	})
}

// TestGuardedCountsFailuresInARow: only failures in a row open the guard,
// and a caller that leaves says nothing about the store.
func TestGuardedCountsFailuresInARow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		g := Guard(f, GuardOptions{Failures: 3})
		ctx := t.Context()
		gone, cancel := context.WithCancel(ctx)
		cancel()
		for i, b := range []func(context.Context) (*Entry, error){failing, failing, answer, failing, failing} {
			f.set(b)
			g.Get(ctx, "k")
			if g.Stats().Open {
				t.Fatalf("open after operation %d", i)
			}
		}
		f.set(untilDone)
		for range 5 {
			if e, err := g.Get(gone, "k"); e != nil || err != nil {
				t.Errorf("Get for a caller that left = %v, %v, want a miss", e, err)
			}
		}
		if g.Stats().Open {
			t.Fatal("callers leaving opened the guard")
		}
		f.set(failing)
		g.Get(ctx, "k")
		synctest.Wait()
		if diff := cmp.Diff(GuardStats{Errors: 5, Opens: 1, Open: true}, g.Stats()); diff != "" {
			t.Errorf("after the third failure in a row (-want +got):\n%s", diff)
		}
	})
}

// TestGuardedBadEntry: an undecodable entry is a miss, but the store
// answered, so it does not count towards skipping it.
func TestGuardedBadEntry(t *testing.T) {
	f := &fake{}
	f.set(func(context.Context) (*Entry, error) { return nil, fmt.Errorf("decoding: %w", ErrBadEntry) })
	g := Guard(f, GuardOptions{Failures: 1})
	for range 3 {
		if e, err := g.Get(t.Context(), "k"); e != nil || err != nil {
			t.Errorf("Get = %v, %v, want a miss", e, err)
		}
	}
	if diff := cmp.Diff(GuardStats{Errors: 3}, g.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

// TestGuardedSetOutlivesTheCaller: a write goes on when its caller's
// context ends, bounded by the timeout alone.
func TestGuardedSetOutlivesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type view struct {
			err  error
			left time.Duration
		}
		saw := make(chan view, 1)
		f := &fake{}
		f.set(func(ctx context.Context) (*Entry, error) {
			d, _ := ctx.Deadline()
			saw <- view{ctx.Err(), time.Until(d)}
			return untilDone(ctx)
		})
		g := Guard(f, GuardOptions{Timeout: 30 * time.Millisecond})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		start := time.Now()
		if err := g.Set(ctx, "k", hit); err != nil {
			t.Errorf("Set = %v, want nil", err)
		}
		if took := time.Since(start); took != 30*time.Millisecond {
			t.Errorf("Set took %v, want 30ms", took)
		}
		if v := <-saw; v.err != nil || v.left != 30*time.Millisecond {
			t.Errorf("inner Set saw ctx error %v and %v left, want nil and 30ms", v.err, v.left)
		}
	})
}

// TestGuardedLogsRarely: a failing store gives one warning every 10s, not
// one per operation, and one line when it is skipped and when it is back.
func TestGuardedLogsRarely(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		f := &fake{}
		f.set(failing)
		g := Guard(f, GuardOptions{Failures: 150, Cooldown: time.Second, Log: slog.New(slog.NewTextHandler(&buf, nil))})
		for range 100 {
			g.Get(t.Context(), "k")
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(10 * time.Second)
		for range 50 {
			g.Get(t.Context(), "k")
		}
		time.Sleep(time.Second)
		f.set(answer)
		g.Get(t.Context(), "k")
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			_, msg, _ := strings.Cut(l, "msg=")
			got = append(got, msg)
		}
		want := []string{
			`"cache failing: reads are misses" op=get err="connection refused" failures=1`,
			`"cache failing: reads are misses" op=get err="connection refused" failures=100`,
			`"cache skipped: every read is a miss and every write is dropped until it answers again" failures=150 retry_in=1s`,
			`"cache back in use"`,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}
	})
}

// BenchmarkGuardedGet is the guard's cost on a hit: a goroutine, a timer
// and a channel per operation, small next to a network round trip.
func BenchmarkGuardedGet(b *testing.B) {
	m, err := NewMemory(0)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	m.Set(b.Context(), "k", &Entry{Expires: time.Now().Add(time.Hour)})
	g := Guard(m, GuardOptions{Timeout: time.Minute}) // a loaded machine is not a slow cache
	b.ReportAllocs()
	for b.Loop() {
		if e, _ := g.Get(b.Context(), "k"); e == nil {
			b.Fatal("miss")
		}
	}
}
