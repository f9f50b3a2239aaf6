package metering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

// mode is how fakeStore answers.
type mode int

const (
	up      mode = iota // writes
	down                // fails at once, as a refused connection does
	stalled             // answers nothing until the attempt's context ends
)

// fakeStore is a UsageStore whose mode the test switches.
type fakeStore struct {
	mu      sync.Mutex
	mode    mode
	rows    []store.Usage
	batches []int       // the size of each written batch
	calls   []time.Time // when each attempt began
}

func (f *fakeStore) set(m mode) {
	f.mu.Lock()
	f.mode = m
	f.mu.Unlock()
}

func (f *fakeStore) RecordUsage(ctx context.Context, us ...*store.Usage) error {
	f.mu.Lock()
	f.calls = append(f.calls, time.Now())
	m := f.mode
	f.mu.Unlock()
	switch m {
	case down:
		return errors.New("connection refused")
	case stalled:
		<-ctx.Done()
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range us {
		f.rows = append(f.rows, *u)
	}
	f.batches = append(f.batches, len(us))
	return nil
}

// ids returns the written rows' request IDs, in the order written.
func (f *fakeStore) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, u := range f.rows {
		ids = append(ids, u.RequestID)
	}
	return ids
}

func (f *fakeStore) written() ([]store.Usage, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.Usage(nil), f.rows...), append([]int(nil), f.batches...)
}

func (f *fakeStore) attempts() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

func newWriter(t *testing.T, st UsageStore, opt UsageOptions) *UsageWriter {
	t.Helper()
	w, err := NewUsageWriter(st, opt)
	if err != nil {
		t.Fatalf("NewUsageWriter: %v", err)
	}
	return w
}

// record records requests from..to-1, named r0000, r0001...
func record(w *UsageWriter, from, to int) {
	for i := from; i < to; i++ {
		w.Record(context.Background(), &Record{RequestID: id(i), Time: time.Now(), Surface: "openai", Alias: "chat",
			Status: StatusComplete, Usage: chat.Usage{InputTokens: 1, OutputTokens: 2}})
	}
}

func id(i int) string { return fmt.Sprintf("r%04d", i) }

func ids(from, to int) []string {
	var s []string
	for i := from; i < to; i++ {
		s = append(s, id(i))
	}
	return s
}

// spilled returns the request IDs in the spill file, in order, and
// whether the file exists.
func spilled(t *testing.T, path string) ([]string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		_, rest, _ := strings.Cut(line, `"request_id":"`)
		id, _, _ := strings.Cut(rest, `"`)
		out = append(out, id)
	}
	return out, true
}

// TestUsageWriterRow: a record becomes the row the old writer made, with
// the local tenant when it has none, and reaches the store within the
// linger, in one batch.
func TestUsageWriterRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		w := newWriter(t, st, UsageOptions{})
		at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.FixedZone("CET", 3600))
		w.Record(context.Background(), &Record{RequestID: "a", Time: at, Surface: "openai", Alias: "chat", Deployment: "sim/small",
			Status: StatusComplete, Usage: chat.Usage{InputTokens: 10, OutputTokens: 20, CachedInputTokens: 4, Estimated: true},
			Cost: 0.5, TTFT: 1500 * time.Microsecond, Total: 2 * time.Second})
		w.Record(context.Background(), &Record{RequestID: "b", Time: at, Tenant: "acme", Surface: "chat", Alias: "chat", Status: StatusCancelled})
		time.Sleep(usageLinger)
		synctest.Wait()
		want := []store.Usage{
			{RequestID: "a", TenantID: "local", Time: at.UTC(), Surface: "openai", Model: "chat", Deployment: "sim/small", Status: "complete",
				InputTokens: 10, OutputTokens: 20, CachedTokens: 4, Estimated: true, Cost: 0.5, TTFTMs: 1.5, TotalMs: 2000},
			{RequestID: "b", TenantID: "acme", Time: at.UTC(), Surface: "chat", Model: "chat", Status: "cancelled"},
		}
		rows, batches := st.written()
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{2}, batches); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if err := w.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
}

// TestUsageWriterBatches: rows are written usageBatch at a time, at once
// when a batch is full, after the linger when it is not.
func TestUsageWriterBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		w := newWriter(t, st, UsageOptions{})
		defer w.Close()
		record(w, 0, 2*usageBatch+10)
		synctest.Wait()
		_, got := st.written()
		if diff := cmp.Diff([]int{usageBatch, usageBatch}, got); diff != "" {
			t.Errorf("before the linger (-want +got):\n%s", diff)
		}
		time.Sleep(usageLinger)
		synctest.Wait()
		_, got = st.written()
		if diff := cmp.Diff([]int{usageBatch, usageBatch, 10}, got); diff != "" {
			t.Errorf("after the linger (-want +got):\n%s", diff)
		}
	})
}

// TestUsageWriterRetries: rows recorded while the store fails or stalls
// (far longer than the old writer's 5 s give-up) stay queued and are all
// written, once each and in order, when it is back.
func TestUsageWriterRetries(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode mode
	}{
		{"store failing", down},
		{"store stalled", stalled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &fakeStore{mode: tc.mode}
				w := newWriter(t, st, UsageOptions{Timeout: 2 * time.Second, RetryMax: 5 * time.Second})
				record(w, 0, 600)
				time.Sleep(time.Minute)
				record(w, 600, 1000)
				time.Sleep(time.Minute)
				synctest.Wait()
				if got := w.Stats(); got.Queued != 1000 || got.Written != 0 || got.WriteErrors < 10 || got.Dropped != 0 {
					t.Errorf("during the outage: %+v, want 1000 queued, 0 written, failures counted", got)
				}
				st.set(up)
				time.Sleep(5*time.Second + 2*time.Second) // a backoff and an attempt at most
				synctest.Wait()
				if diff := cmp.Diff(ids(0, 1000), st.ids()); diff != "" {
					t.Errorf("written (-want +got):\n%s", diff)
				}
				// The retried batch took what queued meanwhile: full batches.
				if _, got := st.written(); !cmp.Equal(got, []int{usageBatch, usageBatch, usageBatch, 1000 - 3*usageBatch}) {
					t.Errorf("batches written %v, want full ones", got)
				}
				if got := w.Stats(); got.Queued != 0 || got.Written != 1000 {
					t.Errorf("after: %+v, want 0 queued, 1000 written", got)
				}
				if err := w.Close(); err != nil {
					t.Errorf("Close() = %v", err)
				}
			})
		})
	}
}

// TestUsageWriterBackoff: the waits between attempts double from
// RetryMin up to RetryMax, each with up to half taken off as jitter; a
// stalled attempt lasts Timeout.
func TestUsageWriterBackoff(t *testing.T) {
	for _, tc := range []struct {
		name               string
		mode               mode
		retryMin, retryMax time.Duration
		timeout            time.Duration
	}{
		{"failing, defaults", down, 0, 0, 0},
		{"failing, capped at 1s", down, 50 * time.Millisecond, time.Second, 0},
		{"stalled", stalled, 100 * time.Millisecond, 3 * time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &fakeStore{mode: tc.mode}
				opt := UsageOptions{RetryMin: tc.retryMin, RetryMax: tc.retryMax, Timeout: tc.timeout, SpillPath: filepath.Join(t.TempDir(), "spill")}
				w := newWriter(t, st, opt)
				record(w, 0, 1)
				time.Sleep(5 * time.Minute)
				calls := st.attempts()
				w.Close()
				minB, maxB, timeout := w.opt.RetryMin, w.opt.RetryMax, w.opt.Timeout
				if tc.mode != stalled {
					timeout = 0
				}
				if len(calls) < 5 {
					t.Fatalf("%d attempts in 5 minutes", len(calls))
				}
				d := minB
				for i := 1; i < len(calls); i++ {
					if i > 1 {
						d = min(2*d, maxB)
					}
					gap := calls[i].Sub(calls[i-1]) - timeout
					if gap < d/2 || gap > d {
						t.Errorf("wait before attempt %d = %v, want %v..%v", i+1, gap, d/2, d)
					}
				}
			})
		})
	}
}

// TestUsageWriterRecordDoesNotWait: with the store stalled and the queue
// full, Record still returns at once; the rows past the queue go to the
// spill file, or without one are dropped, and counted either way.
func TestUsageWriterRecordDoesNotWait(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spill bool
		want  UsageStats
	}{
		{"spill file", true, UsageStats{Queued: 10, InSpill: 90, Spilled: 90}},
		{"no spill file", false, UsageStats{Queued: 10, Dropped: 90}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &fakeStore{mode: stalled}
				opt := UsageOptions{Queue: 10}
				if tc.spill {
					opt.SpillPath = filepath.Join(t.TempDir(), "spill")
				}
				w := newWriter(t, st, opt)
				defer w.Close()
				start := time.Now()
				record(w, 0, 100)
				if d := time.Since(start); d != 0 {
					t.Errorf("100 Records took %v with the store stalled, want no wait", d)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				got := w.Stats()
				got.WriteErrors = 0
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("stats (-want +got):\n%s", diff)
				}
				if tc.spill {
					if got, _ := spilled(t, opt.SpillPath); !cmp.Equal(got, ids(10, 100)) {
						t.Errorf("spill file holds %v, want r0010..r0099", got)
					}
				}
			})
		})
	}
}

// TestUsageWriterReplaysSpill: after an outage longer than the queue, the
// queue and then the spill file are written, in order, rows recorded
// meanwhile after them, and the file is removed.
func TestUsageWriterReplaysSpill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{mode: down}
		path := filepath.Join(t.TempDir(), "spill")
		w := newWriter(t, st, UsageOptions{Queue: 100, SpillPath: path, RetryMax: time.Second})
		record(w, 0, 1000)
		time.Sleep(time.Minute)
		if got, _ := spilled(t, path); len(got) != 900 {
			t.Fatalf("spill file holds %d rows, want 900", len(got))
		}
		st.set(up)
		record(w, 1000, 1010) // while the store is back but the file not replayed
		time.Sleep(time.Second)
		record(w, 1010, 1020)
		time.Sleep(time.Second)
		synctest.Wait()
		if diff := cmp.Diff(ids(0, 1020), st.ids()); diff != "" {
			t.Errorf("written (-want +got):\n%s", diff)
		}
		if _, ok := spilled(t, path); ok {
			t.Errorf("spill file %s still exists after its rows were written", path)
		}
		if got, want := w.Stats(), (UsageStats{Spilled: 910, Written: 1020}); got.Queued != 0 || got.InSpill != 0 || got.Spilled < want.Spilled || got.Written != want.Written {
			t.Errorf("stats %+v, want %+v", got, want)
		}
		if err := w.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
}

// TestUsageWriterCloseSpills: Close gives the stalled store the shutdown
// budget, no more, then puts every row left in the spill file in order
// (the queue ahead of what was spilled before); the next writer replays
// it, skipping a row torn by a crash.
func TestUsageWriterCloseSpills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{mode: stalled}
		path := filepath.Join(t.TempDir(), "spill")
		w := newWriter(t, st, UsageOptions{Queue: 5, SpillPath: path, ShutdownBudget: time.Second})
		record(w, 0, 20)
		time.Sleep(10 * time.Second)
		start := time.Now()
		if err := w.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Close took %v, want at most the 1s budget", d)
		}
		if err := w.Close(); err != nil {
			t.Errorf("second Close() = %v", err)
		}
		if got, _ := spilled(t, path); !cmp.Equal(got, ids(0, 20)) {
			t.Errorf("spill file after Close holds %v, want r0000..r0019", got)
		}
		if got := w.Stats(); got.Queued != 0 || got.InSpill != 20 || got.Dropped != 0 {
			t.Errorf("stats after Close %+v, want 20 in the spill file, none queued or dropped", got)
		}
		// Recorded after Close: appended to the file too.
		record(w, 20, 21)
		// A crash in the middle of an append.
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(`{"request_id":"torn","tena`)
		f.Close()

		st.set(up)
		w2 := newWriter(t, st, UsageOptions{SpillPath: path})
		if got := w2.Stats(); got.InSpill != 21 || got.Dropped != 1 {
			t.Errorf("stats at start %+v, want 21 in the spill file and the torn row dropped", got)
		}
		record(w2, 21, 25)
		time.Sleep(time.Second)
		synctest.Wait()
		if diff := cmp.Diff(ids(0, 25), st.ids()); diff != "" {
			t.Errorf("written (-want +got):\n%s", diff)
		}
		if _, ok := spilled(t, path); ok {
			t.Errorf("spill file %s still exists after its rows were written", path)
		}
		if err := w2.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
}

// TestUsageWriterCloseKeepsReplayProgress: a spill file partly replayed
// when Close gives up keeps only the rows not written, so the next start
// does not write the others twice.
func TestUsageWriterCloseKeepsReplayProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "spill")
		var rows bytes.Buffer
		for i := range 3 * usageBatch {
			fmt.Fprintf(&rows, `{"request_id":%q,"tenant_id":"local","created_at":"2026-11-30T12:00:00Z"}`+"\n", id(i))
		}
		if err := os.WriteFile(path, rows.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		st := &onlyFirst{}
		w := newWriter(t, st, UsageOptions{SpillPath: path, ShutdownBudget: time.Second})
		time.Sleep(time.Minute)
		if err := w.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if got, _ := spilled(t, path); !cmp.Equal(got, ids(usageBatch, 3*usageBatch)) {
			t.Errorf("spill file after Close holds %d rows, want r%04d..r%04d", len(got), usageBatch, 3*usageBatch-1)
		}
	})
}

// onlyFirst writes its first batch and stalls every later one.
type onlyFirst struct {
	mu   sync.Mutex
	done bool
}

func (o *onlyFirst) RecordUsage(ctx context.Context, us ...*store.Usage) error {
	o.mu.Lock()
	first := !o.done
	o.done = true
	o.mu.Unlock()
	if first {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestUsageWriterDropsWithoutSpillFile: with no spill file, rows past the
// queue and those Close cannot write are dropped, counted, and Close says
// so.
func TestUsageWriterDropsWithoutSpillFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{mode: down}
		w := newWriter(t, st, UsageOptions{Queue: 5, ShutdownBudget: time.Second})
		record(w, 0, 8)
		if got := w.Stats(); got.Queued != 5 || got.Dropped != 3 {
			t.Errorf("stats %+v, want 5 queued and 3 dropped", got)
		}
		if err := w.Close(); err == nil || !strings.Contains(err.Error(), "5 rows") {
			t.Errorf("Close() = %v, want an error counting 5 rows dropped", err)
		}
		record(w, 8, 9)
		if got := w.Stats(); got.Queued != 0 || got.Dropped != 9 {
			t.Errorf("stats after Close %+v, want 9 dropped", got)
		}
	})
}

// TestUsageWriterCloseWrites: Close writes what is queued at once, without
// the linger, and leaves no spill file.
func TestUsageWriterCloseWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		path := filepath.Join(t.TempDir(), "spill")
		w := newWriter(t, st, UsageOptions{SpillPath: path})
		record(w, 0, 300)
		start := time.Now()
		if err := w.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v, want no wait", d)
		}
		if diff := cmp.Diff(ids(0, 300), st.ids()); diff != "" {
			t.Errorf("written (-want +got):\n%s", diff)
		}
		if _, ok := spilled(t, path); ok {
			t.Errorf("spill file %s exists", path)
		}
	})
}

// TestUsageWriterBadSpillPath: a spill path that cannot hold a file fails
// at start, not in an outage.
func TestUsageWriterBadSpillPath(t *testing.T) {
	_, err := NewUsageWriter(&fakeStore{}, UsageOptions{SpillPath: filepath.Join(t.TempDir(), "missing", "spill")})
	if err == nil {
		t.Error("NewUsageWriter with a spill file in a missing directory: no error")
	}
}

// TestUsageWriterRefusesAnUnwritableSpillPath: a spill file that could
// not be made fails the start, not the outage that needs it.
func TestUsageWriterRefusesAnUnwritableSpillPath(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		filepath.Join(dir, "missing", "usage.spill"),
		"/proc/firstword-usage.spill",
	} {
		if w, err := NewUsageWriter(nil, UsageOptions{SpillPath: path}); err == nil {
			w.Close()
			t.Errorf("spill path %s: the writer started", path)
		}
	}
	path := filepath.Join(dir, "usage.spill")
	w, err := NewUsageWriter(nil, UsageOptions{SpillPath: path})
	if err != nil {
		t.Fatalf("a writable spill path: %v", err)
	}
	w.Close()
	if _, err := os.Stat(path); err == nil {
		t.Errorf("the start-up probe left %s behind", path)
	}
}
