// Package redis keeps admission's counts in Redis, shared by every
// replica: GCRA rates as redis_rate counts them (a theoretical arrival
// time per key) and open streams as sorted sets of leases that lapse
// unless renewed, so that a crashed replica's slots free themselves.
//
// A replica does not ask Redis about every request. It takes rate units
// and stream slots from Redis ahead of its traffic and admits from what
// it holds (see held.go): a busy replica's admissions cost no round trip,
// and Redis still never grants more than the limit across replicas.
// What one replica holds unused is not the others' until it goes back,
// within keepFor; near a limit nothing is taken ahead, and every
// admission asks Redis. The calls that do reach Redis go through one
// sender (see batch.go), which puts all that is waiting into one script.
package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/redisconn"
)

// Counts is a limits.Shared on Redis.
type Counts struct {
	c       goredis.UniversalClient
	cluster bool     // c is a Redis Cluster's: a tenant's keys share a hash tag
	tags    sync.Map // check key -> its Tag, for the calls that name only the key
	prefix  string
	lease   time.Duration
	linger  time.Duration
	now     func() time.Time

	mu      sync.Mutex
	queue   []op
	closing bool // Close began
	closed  bool // nothing more is queued
	lingers bool // a timer will wake the sender for queued background calls
	sending bool // a batch is on its way (inline or by the sender)
	wake    chan struct{}
	timer   *time.Timer
	// Refunds summed by key until the next batch (see refund).
	refunds     map[string]*op
	refundTimer *time.Timer
	refundArmed bool
	done        chan struct{} // the sender ended
	stop        chan struct{} // closed by Close: tidy ends
	tidied      chan struct{}
	held

	lateErrors atomic.Uint64
}

// Open returns Counts on s, its keys under prefix (default
// "firstword:limits:"), with concurrency leases of lease. It does not
// wait for the server: admission falls back to local counts while it is
// away.
func Open(s redisconn.Server, prefix string, lease time.Duration) (*Counts, error) {
	c, err := redisconn.Open(s, 0)
	if err != nil {
		return nil, err
	}
	if prefix == "" {
		prefix = "firstword:limits:"
	}
	r := &Counts{c: c, cluster: s.Cluster, prefix: prefix, lease: lease, linger: linger, now: time.Now,
		wake: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{}), tidied: make(chan struct{}),
		held: newHeld(), refunds: map[string]*op{}}
	r.timer = time.AfterFunc(time.Hour, r.signal)
	r.timer.Stop()
	r.refundTimer = time.AfterFunc(time.Hour, r.signal)
	r.refundTimer.Stop()
	go r.send()
	go r.tidy()
	return r, nil
}

// Close gives back what this replica holds, sends what is queued
// (bounded by the client's timeouts), then closes the client.
func (r *Counts) Close() error {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		<-r.done
		return nil
	}
	r.closing = true
	close(r.stop)
	r.mu.Unlock()
	<-r.tidied
	r.mu.Lock()
	r.giveBack(time.Time{})
	r.closed = true
	r.timer.Stop()
	r.refundTimer.Stop()
	r.signal()
	r.mu.Unlock()
	<-r.done
	return r.c.Close()
}

// LateErrors counts settlements and releases that failed or were dropped
// after their call returned.
func (r *Counts) LateErrors() uint64 { return r.lateErrors.Load() }

// Admit implements limits.Shared. What this replica holds answers when
// it covers every check; otherwise the checks it does not cover go to
// Redis (taking more ahead where the traffic calls for it), and the
// caller waits for that answer, or for ctx.
func (r *Counts) Admit(ctx context.Context, checks []limits.Check, lease string) ([]limits.Result, error) {
	now := r.now()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errClosed
	}
	res := make([]limits.Result, len(checks))
	t := r.takeLocal(now, checks, lease, res)
	if len(t.remote) == 0 {
		r.refill(now, checks)
		r.mu.Unlock()
		return res, nil
	}
	o := op{kind: 'a', ctx: ctx, lease: r.newMember(), reply: make(chan admitted, 1), gone: new(bool)}
	for _, i := range t.remote {
		c := checks[i]
		o.checks = append(o.checks, c)
		o.extra = append(o.extra, r.ahead(c))
	}
	ok, inline := r.enqueueLocked(o)
	r.mu.Unlock()
	if !ok {
		r.undo(t)
		return nil, errQueueFull
	}
	if inline {
		r.sendInline()
	}
	var a admitted
	select {
	case a = <-o.reply:
	case <-ctx.Done():
		r.mu.Lock()
		select {
		case late := <-o.reply:
			if late.err == nil {
				r.adopt(r.now(), o, late.res)
			}
		default:
			*o.gone = true
		}
		r.mu.Unlock()
		a.err = fmt.Errorf("redis: admit: %w", context.Cause(ctx))
	}
	if a.err != nil {
		r.undo(t)
		return nil, a.err
	}
	all := true
	for k, i := range t.remote {
		res[i] = a.res[k].Result
		all = all && res[i].Allowed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !all {
		r.undoLocked(t)
		return res, nil
	}
	r.tookRemote(r.now(), o, a.res, t, lease)
	return res, nil
}

var (
	errQueueFull = errors.New("redis: admit: too many calls waiting for Redis")
	errClosed    = errors.New("redis: admit: closed")
)

// Adjust implements limits.Shared: a settlement moves what this replica
// holds of the key, and reaches Redis only for what that does not cover
// (queued, see batch.go).
func (r *Counts) Adjust(_ context.Context, c limits.Check, delta int) error {
	if c.Period <= 0 || c.Limit <= 0 {
		return nil // not a rate: nothing to settle (and no script to fail)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch delta = r.settle(c, delta); {
	case delta < 0:
		r.refund(c, delta)
	case delta > 0:
		r.background(op{kind: 'j', checks: []limits.Check{c}, delta: delta})
	}
	return nil
}

// Release implements limits.Shared: lease's slots stay with this replica
// for its next requests, and go back to Redis after keepFor unused.
func (r *Counts) Release(_ context.Context, keys []string, lease string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.release(r.now(), lease)
	return nil
}

// Renew implements limits.Shared. It renews every slot this replica
// holds, in use or kept for its next requests (leases names the limiter's
// requests, whose slots are among them).
func (r *Counts) Renew(ctx context.Context, _ map[string][]string) error {
	r.mu.Lock()
	keys, members := r.heldSlots()
	r.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	// One script call per tenant on a cluster (a script touches one
	// slot), all in one pipeline; one call on a server.
	var calls []*call
	byTag := map[string]*call{}
	for i, k := range keys {
		c := limits.Check{Key: k}
		tag := ""
		if r.cluster {
			tag = r.tag(c)
		}
		cl := byTag[tag]
		if cl == nil {
			cl = &call{args: []any{r.lease.Milliseconds()}}
			byTag[tag] = cl
			calls = append(calls, cl)
		}
		cl.keys = append(cl.keys, r.rkey(c))
		cl.args = append(cl.args, members[i])
	}
	renewed := r.now()
	for _, c := range r.evalEach(ctx, renewScript, calls) {
		if err := c.Err(); err != nil {
			return fmt.Errorf("redis: renew: %w", err)
		}
	}
	r.mu.Lock()
	r.renewed(members, renewed.Add(r.lease))
	r.mu.Unlock()
	return nil
}

// tag is c's Tag, or the one it had when its key was last seen with one
// (a release or a renewal names only the key).
func (r *Counts) tag(c limits.Check) string {
	if c.Tag != "" {
		if v, ok := r.tags.Load(c.Key); !ok || v.(string) != c.Tag {
			r.tags.Store(c.Key, c.Tag)
		}
		return c.Tag
	}
	if v, ok := r.tags.Load(c.Key); ok {
		return v.(string)
	}
	return ""
}

// rkey is c's Redis key. On a cluster a tenant's keys share a hash tag,
// so that one admission's script touches one slot; on one server the
// names stay as they were, so that an upgrade moves no count.
func (r *Counts) rkey(c limits.Check) string {
	if !r.cluster {
		return r.prefix + c.Key
	}
	return r.prefix + "{" + r.tag(c) + "}:" + c.Key
}

// newMember returns a lease ID unique across replicas: an open stream's
// member of its key's sorted set.
func (r *Counts) newMember() string {
	r.seq++
	return r.id + "." + strconv.FormatUint(r.seq, 36)
}

func newReplicaID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// epoch shortens the times the scripts compute with (seconds since it,
// not since 1970) so that float64s keep microseconds, as redis_rate does.
const epoch = "1483228800"

var renewScript = goredis.NewScript(`
local t = redis.call('TIME')
local nowms = math.floor(((tonumber(t[1]) - ` + epoch + `) + tonumber(t[2]) / 1000000) * 1000)
local leasems = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', nowms + leasems, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], leasems * 2)
end
return 1
`)
