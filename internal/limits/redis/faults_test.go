package redis

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/redisconn"
)

// slow delays the scripts (EVALSHA/EVAL) while on: before sending, and
// after the server answered; failAfter turns an answer that came late into
// the timeout go-redis reports when the reply misses the deadline.
type slow struct {
	on            atomic.Bool
	before, after time.Duration
	failAfter     bool
}

func (s *slow) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (s *slow) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
func (s *slow) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if !s.on.Load() || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
			return next(ctx, cmd)
		}
		time.Sleep(s.before)
		err := next(ctx, cmd)
		time.Sleep(s.after)
		if s.failAfter && err == nil {
			err = context.DeadlineExceeded
		}
		return err
	}
}

// TestCloseDuringInlineAdmit: Close while an admission is sent on its
// caller's goroutine returns (the sender is woken when it ends).
func TestCloseDuringInlineAdmit(t *testing.T) {
	url := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if url == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL is not set: skipping the Redis limits tests")
	}
	c, err := Open(redisconn.Server{URL: url}, "fwtest:limits:close:"+time.Now().Format("150405.000000")+":", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := &slow{before: 300 * time.Millisecond}
	c.c.AddHook(h)
	h.on.Store(true)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c.Admit(ctx, []limits.Check{{Key: "rate", Limit: 10, Period: time.Minute, Cost: 1}}, "")
	}()
	time.Sleep(100 * time.Millisecond) // the admission is being sent inline
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not return within 3s (the sender waits for a wake-up nobody sends)")
	}
}

// TestTimedOutAdmitKeepsNoSlot: an admission whose answer came after its
// caller gave up leaves nothing in Redis that no replica holds.
func TestTimedOutAdmitKeepsNoSlot(t *testing.T) {
	cs, _ := replicas(t, 2)
	a, b := cs[0], cs[1]
	h := &slow{after: 80 * time.Millisecond, failAfter: true}
	a.c.AddHook(h)
	h.on.Store(true)
	open1 := limits.Check{Key: "open", Limit: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := a.Admit(ctx, []limits.Check{open1}, "l1")
	cancel()
	h.on.Store(false)
	if err == nil {
		t.Fatal("want the admission to fail")
	}
	a.mu.Lock()
	keys, _ := a.heldSlots()
	a.mu.Unlock()
	time.Sleep(2 * keepFor)
	res, _ := b.Admit(context.Background(), []limits.Check{open1}, "m1")
	if !res[0].Allowed {
		t.Errorf("the failed admission's slot is still taken in Redis %v later, held by no replica (a holds %d slots); it lapses only after the lease (30s in production)", 2*keepFor, len(keys))
	}
}

// TestRefundGoesToRedis: a settlement that gives tokens back, long after
// they were reserved, does not let this replica admit past the limit.
func TestRefundGoesToRedis(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	tpm := limits.Check{Key: "tpm", Limit: 100, Period: 2 * time.Second, Cost: 100}
	if res, err := c.Admit(ctx, []limits.Check{tpm}, ""); err != nil || !res[0].Allowed {
		t.Fatal(res, err)
	}
	time.Sleep(2100 * time.Millisecond) // the stream ran; Redis's count is full again
	c.Adjust(ctx, tpm, -90)             // it used 10 of its 100
	one := tpm
	one.Cost = 1
	n := 0
	start := time.Now()
	for {
		res, err := c.Admit(ctx, []limits.Check{one}, "")
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Allowed {
			break
		}
		n++
	}
	took := time.Since(start)
	want := 100 + int(took/(20*time.Millisecond)) + 1
	if n > want {
		t.Errorf("admitted %d tokens in %v against a limit of 100 per 2s (at most %d expected)", n, took, want)
	}
}

// TestHeldSlotsKeepTheLimit: slots a replica holds do not admit past a
// concurrency limit lowered since they were taken.
func TestHeldSlotsKeepTheLimit(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	open3 := limits.Check{Key: "open", Limit: 3}
	for _, l := range []string{"l1", "l2", "l3"} {
		if res, err := c.Admit(ctx, []limits.Check{open3}, l); err != nil || !res[0].Allowed {
			t.Fatal(res, err)
		}
	}
	for _, l := range []string{"l1", "l2", "l3"} {
		c.Release(ctx, []string{"open"}, l)
	}
	open1 := limits.Check{Key: "open", Limit: 1}
	n := 0
	for _, l := range []string{"m1", "m2", "m3"} {
		if res, _ := c.Admit(ctx, []limits.Check{open1}, l); res[0].Allowed {
			n++
		}
	}
	if n > 1 {
		t.Errorf("%d streams open at once under a limit of 1", n)
	}
}

// TestInlineAdmitKeepsItsDeadline: with a backlog of queued calls, an
// admission still fails within its own deadline.
func TestInlineAdmitKeepsItsDeadline(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	c.mu.Lock()
	c.linger = time.Hour // the settlements below wait for an admission (it takes them a few µs anyway)
	c.mu.Unlock()
	for range maxBatch + 40 {
		c.Adjust(ctx, limits.Check{Key: "x", Limit: 1000, Period: time.Minute}, 1)
	}
	h := &slow{before: 500 * time.Millisecond}
	c.c.AddHook(h)
	h.on.Store(true)
	actx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Admit(actx, []limits.Check{{Key: "rate", Limit: 10, Period: time.Minute, Cost: 1}}, "")
	took := time.Since(start)
	h.on.Store(false)
	if took > 100*time.Millisecond {
		t.Errorf("Admit with a 20ms deadline returned after %v (err %v)", took, err)
	}
}

// TestBadSettlementFailsAlone: a settlement of no rate does not fail the
// admission it would have travelled with.
func TestBadSettlementFailsAlone(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	c.Adjust(ctx, limits.Check{Key: "z", Limit: 0, Period: time.Minute}, 5)
	_, err := c.Admit(ctx, []limits.Check{{Key: "rate", Limit: 10, Period: time.Minute, Cost: 1}}, "")
	if err != nil {
		t.Errorf("an admission failed because a settlement in its batch had Limit 0: %v", err)
	}
}
