// Package redis is the answer journal shared by replicas, on Redis: one
// stream per answer, a lease per producer, stop and attachment across
// replicas. It and internal/cache/redis are the packages that import the
// Redis client.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/redisconn"
)

// DefaultMaxPendingBytes is MaxTotalBytes's default here: what may wait
// to be written while Redis is slow or unreachable.
const DefaultMaxPendingBytes = 64 << 20

// Bounds of the journal's own calls (the client's timeouts are
// redisconn's): a frozen server holds a flush or a follower for about
// this long.
const (
	flushTimeout = 2 * time.Second
	// maxBlock bounds a follower's XREAD BLOCK: go-redis does not
	// interrupt a blocked read when its context is cancelled, so it is
	// also how long a cancelled Follow may take to return.
	maxBlock = 500 * time.Millisecond
	// followerPool bounds the followers' connections: one per follower
	// waiting on a read (Redis accepts 10,000 clients by default).
	followerPool = 1024
	// readCount is how many entries one XREAD returns at most.
	readCount = 1000
)

// Journal is a journal.Journal on Redis. Open it once per process.
type Journal struct {
	// c writes, renews leases and stops; f reads for the followers. Each
	// follower holds one of f's connections for every blocking read, so
	// the two have pools of their own: a crowd of resumers cannot starve
	// the writes and renewals that keep answers alive.
	c, f    goredis.UniversalClient
	cluster bool // on a Redis Cluster: the control channels are sharded
	o       journal.Options
	block   time.Duration // a follower's XREAD BLOCK, and how often it checks the lease
	ctl     string        // the pub/sub channel of stops and attachments (on a cluster, its shards' prefix)
	token   string        // this process, in leases and attachments
	log     *slog.Logger
	subs    []*goredis.PubSub

	mu      sync.Mutex
	writers map[string]*writer // live, by message id
	dirty   []*writer          // with something to write
	closed  bool

	wake    chan struct{} // something to write
	kick    chan struct{} // renew now (a follower left)
	closing chan struct{}
	wg      sync.WaitGroup

	follows atomic.Int64 // followers' attachment members
	pending atomic.Int64 // bytes queued, not yet written
	dropped atomic.Int64
	failed  atomic.Int64
}

// Open connects to s, subscribes to the journal's control channel (on a
// cluster, its ctlShards sharded channels) and starts the writer. o's
// zero fields take their defaults (MaxTotalBytes:
// DefaultMaxPendingBytes).
func Open(ctx context.Context, s redisconn.Server, o journal.Options, log *slog.Logger) (*Journal, error) {
	if o.MaxTotalBytes == 0 {
		o.MaxTotalBytes = DefaultMaxPendingBytes
	}
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("journal/redis: %w", err)
	}
	c, err := redisconn.Open(s, 0)
	if err != nil {
		return nil, fmt.Errorf("journal/redis: %w", err)
	}
	f, err := redisconn.Open(s, followerPool)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("journal/redis: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tok [8]byte
	rand.Read(tok[:])
	j := &Journal{
		c:       c,
		f:       f,
		cluster: s.Cluster,
		o:       o,
		block:   min(o.Lease/3, maxBlock),
		ctl:     o.KeyPrefix + "ctl",
		token:   hex.EncodeToString(tok[:]),
		log:     log,
		writers: map[string]*writer{},
		wake:    make(chan struct{}, 1),
		kick:    make(chan struct{}, 1),
		closing: make(chan struct{}),
	}
	pctx, cancel := context.WithTimeout(ctx, redisconn.PingTimeout)
	defer cancel()
	if err := j.c.Ping(pctx).Err(); err != nil {
		j.c.Close()
		j.f.Close()
		return nil, fmt.Errorf("journal/redis: %w", err)
	}
	if j.cluster {
		for i := range ctlShards {
			j.subs = append(j.subs, j.c.SSubscribe(pctx, j.shard(i)))
		}
	} else {
		j.subs = append(j.subs, j.c.Subscribe(pctx, j.ctl))
	}
	// Wait for the subscriptions, so that no stop sent after Open is
	// missed.
	for _, ps := range j.subs {
		if _, err := ps.Receive(pctx); err != nil {
			for _, ps := range j.subs {
				ps.Close()
			}
			j.c.Close()
			j.f.Close()
			return nil, fmt.Errorf("journal/redis: subscribing: %w", err)
		}
	}
	j.wg.Add(2 + len(j.subs))
	for _, ps := range j.subs {
		go j.listen(ps)
	}
	go j.run()
	go j.renewing()
	return j, nil
}

// ctlShards is how many sharded channels carry a cluster's stops and
// attachments: each answer's go on one, picked by its id, so that a
// message reaches one shard, not every node of the cluster.
const ctlShards = 16

// shard is the name of control channel i on a cluster.
func (j *Journal) shard(i int) string { return j.ctl + ":{" + strconv.Itoa(i) + "}" }

// publish adds to p the control message kind+id, on id's channel.
func (j *Journal) publish(ctx context.Context, p goredis.Cmdable, kind byte, id string) {
	msg := string(kind) + id
	if !j.cluster {
		p.Publish(ctx, j.ctl, msg)
		return
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	p.SPublish(ctx, j.shard(int(h.Sum32()%ctlShards)), msg)
}

// keys are one message's Redis keys. The hash tag keeps them in one
// cluster slot, for the scripts.
type keys struct{ stream, lease, stop, att string }

func (j *Journal) keys(id string) keys {
	p := j.o.KeyPrefix + "{" + id + "}:"
	return keys{stream: p + "s", lease: p + "lease", stop: p + "stop", att: p + "att"}
}

// Stats are a Redis journal's counters.
type Stats struct {
	Pending int64 // bytes waiting to be written
	Dropped int64 // events dropped at MaxTotalBytes (their answers cut)
	Failed  int64 // writes to Redis that failed (and were retried)
}

// Stats returns j's counters.
func (j *Journal) Stats() Stats {
	return Stats{Pending: j.pending.Load(), Dropped: j.dropped.Load(), Failed: j.failed.Load()}
}

func (j *Journal) isClosed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closed
}

// unavailable wraps a Redis failure, or returns ctx's error if it ended.
func unavailable(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("journal/redis: %s: %w: %w", op, journal.ErrUnavailable, err)
}

// Stop implements journal.Journal: a stop key the producer reads at its
// next renewal, and a message on the control channel that reaches it at
// once.
func (j *Journal) Stop(ctx context.Context, id string) error {
	if j.isClosed() {
		return journal.ErrClosed
	}
	k := j.keys(id)
	ttl := (j.o.Retention + j.o.Lease).Milliseconds()
	pipe := j.c.Pipeline()
	set := stopScript.Eval(ctx, pipe, []string{k.lease, k.stop}, ttl)
	j.publish(ctx, pipe, 's', id)
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable(ctx, "stop", err)
	}
	if n, _ := set.Int(); n == 0 {
		return journal.ErrNotFound
	}
	return nil
}

// stopScript: KEYS lease, stop; ARGV the stop key's TTL (ms). The stop
// key is for a producer that missed the message (it reads it at its next
// renewal). Returns 0 when no producer holds the answer.
var stopScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
return 1`)

// listen dispatches a control channel's messages to this process's
// writers: s<id> stop, a<id> a follower attached, d<id> one left.
func (j *Journal) listen(ps *goredis.PubSub) {
	defer j.wg.Done()
	for m := range ps.Channel() {
		if len(m.Payload) < 2 {
			continue
		}
		j.mu.Lock()
		w := j.writers[m.Payload[1:]]
		j.mu.Unlock()
		if w == nil {
			continue
		}
		switch m.Payload[0] {
		case 's':
			w.stop()
		case 'a':
			w.attached.Store(true)
		case 'd':
			select {
			case j.kick <- struct{}{}:
			default:
			}
		}
	}
}

// Close implements journal.Journal. It writes what is queued (for up to
// a couple of seconds), then releases the leases of the answers still
// being written, so that their followers learn at once that they are
// lost.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	close(j.closing)
	for _, ps := range j.subs {
		ps.Close()
	}
	j.wg.Wait()
	j.f.Close()
	return j.c.Close()
}
