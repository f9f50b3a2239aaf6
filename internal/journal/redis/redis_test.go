package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/journal/journaltest"
	"github.com/firstword/firstword/internal/redisconn"
)

// redisURL returns FIRSTWORD_TEST_REDIS_URL or skips the test.
func redisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if u == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL not set (e.g. redis://127.0.0.1:6379/0): skipping the tests on a real Redis")
	}
	return u
}

// prefix is a key prefix of the test's own.
func prefix(t testing.TB) string {
	return fmt.Sprintf("firstword:test:journal:%s:%d:", t.Name(), time.Now().UnixNano())
}

// open opens a journal on url, closed when the test ends.
func open(t testing.TB, url string, o journal.Options) *Journal {
	t.Helper()
	j, err := Open(context.Background(), redisconn.Server{URL: url}, o, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func TestConformance(t *testing.T) {
	url := redisURL(t)
	journaltest.Run(t, journaltest.Harness{
		Open: func(t *testing.T, o journal.Options) (journal.Journal, journal.Journal) {
			o.KeyPrefix = prefix(t)
			return open(t, url, o), open(t, url, o)
		},
		Crash: func(w journal.Writer) { w.(*writer).crash() },
	})
}

// TestCloseReleasesLeases: closing a journal with answers still being
// written loses them at once, not a lease later.
func TestCloseReleasesLeases(t *testing.T) {
	url := redisURL(t)
	o := journal.Options{KeyPrefix: prefix(t), Lease: time.Hour}
	a, b := open(t, url, o), open(t, url, o)
	w := a.Begin("m")
	w.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{}`)})
	eventually(t, "the first event written", func() bool {
		s, err := b.Snapshot(t.Context(), "m")
		return err == nil && len(s.Events) == 1
	})
	a.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n := 0
	if err := b.Follow(ctx, "m", -1, func(journal.Event) bool { n++; return true }); !errors.Is(err, journal.ErrLost) || n != 1 {
		t.Fatalf("Follow after the producer closed = %v after %d events, want ErrLost after 1", err, n)
	}
}

// TestStreamsExpire: every stream the journal creates has a TTL from its
// first write, even if its producer dies before renewing its lease.
func TestStreamsExpire(t *testing.T) {
	url := redisURL(t)
	o := journal.Options{KeyPrefix: prefix(t), Lease: time.Hour}
	j := open(t, url, o)
	w := j.Begin("m")
	eventually(t, "the lease taken", func() bool { return j.c.Exists(t.Context(), j.keys("m").lease).Val() == 1 })
	w.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{}`)})
	eventually(t, "the first event written", func() bool { return j.c.Exists(t.Context(), j.keys("m").stream).Val() == 1 })
	w.(*writer).crash()
	if ttl := j.c.PTTL(t.Context(), j.keys("m").stream).Val(); ttl <= 0 {
		t.Fatalf("PTTL of the stream = %v, want a TTL", ttl)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 15s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// server is a redis-server of the test's own, on a free port.
type server struct {
	t    *testing.T
	port int
	cmd  *exec.Cmd
}

func startServer(t *testing.T, port int) *server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed: skipping the test that stops a Redis")
	}
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	s := &server{t: t, port: port, cmd: cmd}
	t.Cleanup(s.kill)
	eventually(t, "redis-server listening", func() bool {
		c, err := net.Dial("tcp", s.addr())
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return s
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }
func (s *server) url() string  { return "redis://" + s.addr() + "/0" }

func (s *server) kill() {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// TestRedisDown: with Redis gone, Append neither blocks nor holds more
// than MaxTotalBytes; what could not be kept cuts its answer, and when
// Redis is back (restarted empty), the journal says so instead of
// replaying a gap.
func TestRedisDown(t *testing.T) {
	srv := startServer(t, 0)
	const budget = 64 << 10
	o := journal.Options{KeyPrefix: "t:", Lease: 300 * time.Millisecond, MaxMessageBytes: budget, MaxTotalBytes: budget}
	j := open(t, srv.url(), o)
	// Two answers: together, not alone, they pass MaxTotalBytes.
	w, other := j.Begin("m"), j.Begin("other")
	w.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{}`)})
	eventually(t, "the first event written", func() bool {
		s, err := j.Snapshot(t.Context(), "m")
		return err == nil && len(s.Events) == 1
	})
	srv.kill()

	data := []byte(`{"text":" a word of an answer"}`)
	const n = 20000
	start := time.Now()
	var maxPending int64
	for i := 1; i <= n; i++ {
		w.Append(journal.Event{Seq: int64(i), Kind: journal.KindDelta, Data: data})
		other.Append(journal.Event{Seq: int64(i), Kind: journal.KindDelta, Data: data})
		maxPending = max(maxPending, j.Stats().Pending)
	}
	// Blocking on Redis would cost a dial timeout (a second) per append
	// or per flush; 20000 appends in memory take milliseconds.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("%d appends with Redis down took %v", n, d)
	}
	if maxPending > budget {
		t.Errorf("pending reached %d bytes, over MaxTotalBytes %d", maxPending, budget)
	}
	if st := j.Stats(); st.Dropped != 2 {
		t.Errorf("Stats = %+v, want the two cuts counted as drops", st)
	}
	eventually(t, "a failed write counted", func() bool { return j.Stats().Failed > 0 })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := j.Follow(ctx, "m", -1, func(journal.Event) bool { return true }); !errors.Is(err, journal.ErrUnavailable) {
		t.Errorf("Follow with Redis down = %v, want ErrUnavailable", err)
	}

	// Back, empty: the answer's start is gone, and the journal says so.
	startServer(t, srv.port)
	w.End(journal.Event{Seq: n + 1, Kind: journal.KindDone})
	other.End(journal.Event{Seq: n + 1, Kind: journal.KindDone})
	eventually(t, "the end written after the restart", func() bool {
		s, err := j.Snapshot(t.Context(), "m")
		return err == nil && s.Ended
	})
	// What Redis lost is not replayed as a gap: either the events
	// written again from the start (if the first write's reply was lost
	// with the server, it is still queued), or none; then the cut.
	s, _ := j.Snapshot(t.Context(), "m")
	if !s.Truncated || len(s.Events) == 0 || !s.Events[len(s.Events)-1].Terminal() {
		t.Fatalf("Snapshot after the restart = truncated %v, %d events; want truncated, ending", s.Truncated, len(s.Events))
	}
	for i, ev := range s.Events[:len(s.Events)-1] {
		if ev.Seq != int64(i) {
			t.Fatalf("Snapshot after the restart: event %d has Seq %d, a gap", i, ev.Seq)
		}
	}
	for _, after := range []int64{-1, 5, 100} {
		next := after + 1
		err := j.Follow(ctx, "m", after, func(ev journal.Event) bool {
			if ev.Seq != next {
				t.Errorf("Follow(after %d) yielded Seq %d, want %d", after, ev.Seq, next)
			}
			next++
			return true
		})
		if !errors.Is(err, journal.ErrTruncated) {
			t.Errorf("Follow(after %d) after the restart = %v, want ErrTruncated", after, err)
		}
	}
	if p := j.Stats().Pending; p != 0 {
		t.Errorf("Pending = %d once everything is written, want 0", p)
	}
	// A new answer journals as before.
	w2 := j.Begin("m2")
	w2.End(journal.Event{Seq: 0, Kind: journal.KindDone})
	if err := func() error {
		var err error
		eventually(t, "a new answer after the restart", func() bool {
			err = j.Follow(ctx, "m2", -1, func(journal.Event) bool { return true })
			return err == nil
		})
		return err
	}(); err != nil {
		t.Error(err)
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"0-1", "12-2", "0-0", "-1-1", "01-1", "9223372036854775807-1", "9223372036854775808-1", "1-3", "1", "a-b", "1-1-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		seq, part, ok := parseID(id)
		if !ok {
			return
		}
		if got := eventID(seq, part); got != id {
			t.Fatalf("parseID(%q) = %d, %d; eventID of that = %q", id, seq, part, got)
		}
	})
}

func TestParseID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		seq  int64
		part int
		ok   bool
	}{
		{"0-1", 0, 1, true},
		{"41-2", 41, 2, true},
		{"0-0", 0, 0, false},
		{"-1-1", 0, 0, false},
		{"01-1", 0, 0, false},
		{"7-3", 7, 3, true},
		{"7-4", 7, 4, true},
		{"1-5", 0, 0, false},
		{"1700000000000-0", 0, 0, false},
		{"x", 0, 0, false},
	} {
		seq, part, ok := parseID(tc.id)
		if seq != tc.seq || part != tc.part || ok != tc.ok {
			t.Errorf("parseID(%q) = %d, %d, %v; want %d, %d, %v", tc.id, seq, part, ok, tc.seq, tc.part, tc.ok)
		}
	}
}

// BenchmarkAppend: what an answer's producer pays per event with the
// Redis journal on (the writes are off its path).
func BenchmarkAppend(b *testing.B) {
	url := redisURL(b)
	j := open(b, url, journal.Options{KeyPrefix: prefix(b), Retention: time.Minute})
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
			w, seq = j.Begin(strconv.Itoa(n)), 0
		}
		w.Append(journal.Event{Seq: seq, Kind: journal.KindDelta, Data: data})
		seq++
	}
	b.StopTimer()
	w.End(journal.Event{Seq: seq, Kind: journal.KindDone})
}

// BenchmarkAppendCaller is Append's cost on the producer's path alone:
// the writing goroutine is not running, and the queue is taken every 64
// events as it would be (about one network round trip's worth of a fast
// stream).
func BenchmarkAppendCaller(b *testing.B) {
	o := journal.Options{MaxTotalBytes: DefaultMaxPendingBytes}.WithDefaults()
	j := &Journal{o: o, writers: map[string]*writer{}, wake: make(chan struct{}, 1)}
	data := []byte(`{"text":" word"}`)
	var w *writer
	var seq int64
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		if seq%1000 == 0 {
			n++
			w, seq = j.Begin(strconv.Itoa(n)).(*writer), 0
		}
		w.Append(journal.Event{Seq: seq, Kind: journal.KindDelta, Data: data})
		seq++
		if seq%64 == 0 {
			j.dirty = j.dirty[:0]
			if bt, _ := w.take(time.Now().Add(time.Hour)); bt != nil {
				j.pending.Add(-bt.bytes)
				w.done(bt)
			}
		}
	}
}

// TestFollowBeforeTheFirstWrite: a follower that finds a producer's lease
// but no event yet (it reached Redis between the two) waits for the
// events instead of failing, and gets them.
func TestFollowBeforeTheFirstWrite(t *testing.T) {
	url := redisURL(t)
	o := journal.Options{KeyPrefix: prefix(t), Lease: 3 * time.Second}
	a, b := open(t, url, o), open(t, url, o)
	const id = "msg_early"
	if err := a.c.Set(t.Context(), a.keys(id).lease, "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	got := make(chan []journal.Event, 1)
	errc := make(chan error, 1)
	go func() {
		var evs []journal.Event
		errc <- b.Follow(t.Context(), id, -1, func(ev journal.Event) bool {
			evs = append(evs, ev)
			return true
		})
		got <- evs
	}()
	time.Sleep(100 * time.Millisecond) // the follower found the lease and no stream
	w := a.Begin(id)
	w.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{}`)})
	w.End(journal.Event{Seq: 1, Kind: journal.KindDone, Data: []byte(`{}`)})
	if err := <-errc; err != nil {
		t.Fatalf("Follow = %v, want nil after the terminal event", err)
	}
	if evs := <-got; len(evs) != 2 || evs[1].Kind != journal.KindDone {
		t.Errorf("followed %+v, want meta and done", evs)
	}
}

// TestManyFollowers: more followers than a connection pool holds (10 per
// CPU) wait on one answer; the producer's writes and renewals have a pool
// of their own, so the answer goes on and every follower gets all of it.
func TestManyFollowers(t *testing.T) {
	url := redisURL(t)
	o := journal.Options{KeyPrefix: prefix(t), Lease: 3 * time.Second}
	a, b := open(t, url, o), open(t, url, o)
	const id, followers = "msg_crowd", 300
	w := a.Begin(id)
	w.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{}`)})
	eventually(t, "the first write", func() bool { _, err := b.Snapshot(t.Context(), id); return err == nil })
	errs := make(chan error, followers)
	counts := make(chan int, followers)
	for range followers {
		go func() {
			n := 0
			errs <- b.Follow(t.Context(), id, -1, func(journal.Event) bool { n++; return true })
			counts <- n
		}()
	}
	time.Sleep(1500 * time.Millisecond) // every follower is waiting on a read, longer than a pool wait
	for i := int64(1); i <= 20; i++ {
		w.Append(journal.Event{Seq: i, Kind: journal.KindDelta, Data: []byte(`{"text":"x"}`)})
	}
	w.End(journal.Event{Seq: 21, Kind: journal.KindDone, Data: []byte(`{}`)})
	for range followers {
		if err := <-errs; err != nil {
			t.Fatalf("a follower: %v", err)
		}
		if n := <-counts; n != 22 {
			t.Fatalf("a follower got %d events, want 22", n)
		}
	}
	if s := a.Stats(); s.Failed != 0 {
		t.Errorf("the writer failed %d times", s.Failed)
	}
}

// TestTakenOverProducerStops: a producer whose lease lapsed and was taken
// over by another replica learns it at its next renewal: it no longer
// holds the answer, its Stopped closes, it writes nothing more, and its
// renewal does not take the lease back. One whose lapsed lease nobody
// took takes it again and goes on.
func TestTakenOverProducerStops(t *testing.T) {
	url := redisURL(t)
	o := journal.Options{KeyPrefix: prefix(t), Lease: 300 * time.Millisecond}
	a, b := open(t, url, o), open(t, url, o)
	ev := func(seq int64) journal.Event {
		return journal.Event{Seq: seq, Kind: journal.KindDelta, Data: fmt.Appendf(nil, `{"text":"%d"}`, seq)}
	}
	// Nobody takes it: the lapsed lease is taken again.
	w := a.Begin("kept")
	w.Append(ev(0))
	eventually(t, "the first event written", func() bool {
		s, err := b.Snapshot(t.Context(), "kept")
		return err == nil && len(s.Events) == 1
	})
	a.c.Del(t.Context(), a.keys("kept").lease)
	eventually(t, "the lease taken again", func() bool { return a.c.Exists(t.Context(), a.keys("kept").lease).Val() == 1 })
	w.Append(ev(1))
	eventually(t, "the next event written", func() bool {
		s, err := b.Snapshot(t.Context(), "kept")
		return err == nil && len(s.Events) == 2
	})
	if !w.Held() {
		t.Fatal("a producer whose lease nobody took no longer holds it")
	}

	// A write of its own that reached Redis after the producer gave up
	// on it (sent into a stall) is no take-over either.
	w = a.Begin("late")
	w.Append(ev(0))
	eventually(t, "the first event written", func() bool {
		s, err := b.Snapshot(t.Context(), "late")
		return err == nil && len(s.Events) == 1
	})
	kl := a.keys("late")
	a.c.Del(t.Context(), kl.lease)
	a.c.XAdd(t.Context(), &goredis.XAddArgs{Stream: kl.stream, ID: eventID(3, partBatch), Values: []any{fBatch, pack([]journal.Event{ev(1), ev(2), ev(3)}, nil)}})
	eventually(t, "the lease taken again", func() bool { return a.c.Exists(t.Context(), kl.lease).Val() == 1 })
	if !w.Held() {
		t.Fatal("a producer whose own late write was found thought it was taken over")
	}

	// Taken over: the old producer stops.
	w = a.Begin("taken")
	w.Append(ev(0))
	eventually(t, "the first event written", func() bool {
		s, err := b.Snapshot(t.Context(), "taken")
		return err == nil && len(s.Events) == 1
	})
	k := a.keys("taken")
	a.c.Del(t.Context(), k.lease)
	nw, snap, err := b.Take(t.Context(), "taken")
	if err != nil || snap.Next < 1 {
		t.Fatalf("Take = %v, next %d", err, snap.Next)
	}
	select {
	case <-w.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("the producer taken over was not stopped")
	}
	if w.Held() {
		t.Fatal("the producer taken over still holds the answer")
	}
	w.Append(ev(1))
	// A late write of the old producer, as a pipeline still on its way
	// when the answer was taken over: the fence refuses it.
	a.c.XAdd(t.Context(), &goredis.XAddArgs{Stream: k.stream, ID: eventID(1, 1), Values: []any{fKind, journal.KindDelta, fData, `{"text":"late"}`}})
	nw.Append(journal.Event{Seq: snap.Next, Kind: journal.KindRewind, Data: []byte(`{"offset":1}`)})
	nw.End(journal.Event{Seq: snap.Next + 1, Kind: journal.KindDone, Data: []byte(`{}`)})
	var s journal.Snapshot
	eventually(t, "the new producer's end written", func() bool {
		s, err = b.Snapshot(t.Context(), "taken")
		return err == nil && s.Ended
	})
	if len(s.Events) != 3 || s.Events[1].Kind != journal.KindRewind {
		t.Fatalf("journal after the take-over: %+v", s.Events)
	}
	if got := a.c.Get(t.Context(), k.lease).Val(); got != "" {
		t.Fatalf("lease %q after the new producer's end: the old one took it back", got)
	}
}
