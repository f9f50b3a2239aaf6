package redis

import (
	"context"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/redisconn"
)

// entry is a stream entry, decoded.
type entry struct {
	evs    []journal.Event // in Seq order
	seq    int64           // the Seq in its ID
	ok     bool            // an entry this package wrote
	marker string
	end    bool // the last entry of the answer (event or marker)
	cut    bool // the answer was cut before this entry
}

func decode(m goredis.XMessage) entry {
	seq, part, ok := parseID(m.ID)
	if !ok {
		return entry{}
	}
	e := entry{ok: true, seq: seq}
	e.marker, _ = m.Values[fMarker].(string)
	switch e.marker {
	case "cut":
		e.cut = true
		return e
	case "end":
		e.end = true
		return e
	case "":
	default:
		return entry{}
	}
	e.end = m.Values[fEnd] != nil
	e.cut = m.Values[fCut] != nil
	if part == partBatch {
		b, _ := m.Values[fBatch].(string)
		if e.evs, ok = unpack(b); !ok || e.evs[len(e.evs)-1].Seq != seq {
			return entry{}
		}
		return e
	}
	ev := journal.Event{Seq: seq}
	ev.Kind, _ = m.Values[fKind].(string)
	if d, _ := m.Values[fData].(string); d != "" {
		ev.Data = []byte(d)
	}
	e.evs = []journal.Event{ev}
	return e
}

// Follow implements journal.Journal. It reads the stream from the cursor
// with XREAD, blocking for at most min(Lease/3, 500ms) at a time;
// between reads, at that interval, it checks the producer's lease and
// renews its attachment (a member of the message's attachment set, with
// a TTL of one lease) in one round trip.
func (j *Journal) Follow(ctx context.Context, id string, after int64, yield func(journal.Event) bool) error {
	if j.isClosed() {
		return journal.ErrClosed
	}
	k := j.keys(id)
	member := j.token + ":" + strconv.FormatInt(j.follows.Add(1), 10)
	cursor := "0-0"
	if after >= 0 {
		cursor = eventID(after, 1)
	}
	attached := false
	defer func() {
		if attached {
			j.detach(ctx, k, id, member)
		}
	}()
	check := true
	var checked time.Time
	for {
		var msgs []goredis.XMessage
		leaseLive := true
		if check {
			pipe := j.f.Pipeline()
			// The lease first: if it is gone, the read after it sees the
			// end, if there was one (the producer writes the end, then
			// releases the lease).
			lease := pipe.Exists(ctx, k.lease)
			read := pipe.XRead(ctx, &goredis.XReadArgs{Streams: []string{k.stream, cursor}, Count: readCount, Block: -1})
			last := pipe.XRevRangeN(ctx, k.stream, "+", "-", 1)
			attachScript.Eval(ctx, pipe, []string{k.att}, member, j.o.Lease.Milliseconds())
			if !attached {
				j.publish(ctx, pipe, 'a', id)
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
				return unavailable(ctx, "follow", err)
			}
			leaseLive = lease.Val() == 1
			if !leaseLive && len(last.Val()) == 0 {
				if !attached {
					return journal.ErrNotFound
				}
				return journal.ErrLost // dropped after its retention, under us
			}
			attached = true
			if rs := read.Val(); len(rs) > 0 {
				msgs = rs[0].Messages
			}
			if len(msgs) == 0 && len(last.Val()) > 0 {
				// The cursor is past every entry: past the end, or past a
				// cut the producer's live stream went beyond. (With no
				// entry yet, a live producer has not written its first.)
				switch e := decode(last.Val()[0]); {
				case e.end:
					return nil
				case e.cut:
					return journal.ErrTruncated
				}
			}
			checked, check = time.Now(), false
		} else {
			rs, err := j.f.XRead(ctx, &goredis.XReadArgs{Streams: []string{k.stream, cursor}, Count: readCount, Block: j.block}).Result()
			if err != nil && !errors.Is(err, goredis.Nil) {
				return unavailable(ctx, "follow", err)
			}
			if len(rs) > 0 {
				msgs = rs[0].Messages
			}
		}
		for _, m := range msgs {
			cursor = m.ID
			e := decode(m)
			switch {
			case !e.ok:
				continue
			case e.marker == "cut":
				return journal.ErrTruncated
			case e.marker != "":
				return nil // the end marker
			case e.seq <= after:
				// Read already (a retried write's entry, or the one the
				// cursor is in).
				if e.end {
					return nil
				}
				continue
			case e.cut:
				return journal.ErrTruncated
			}
			// An entry holds the events of one write: those up to the
			// cursor (or a retried write's, already read) are skipped.
			for _, ev := range e.evs {
				if ev.Seq <= after {
					continue
				}
				after = ev.Seq
				if !yield(ev) {
					return nil
				}
			}
			if e.end {
				return nil
			}
		}
		if !leaseLive {
			if len(msgs) == readCount {
				check = true // read the rest before concluding
				continue
			}
			return journal.ErrLost
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Since(checked) >= j.block {
			check = true
		}
	}
}

// attachScript: KEYS att; ARGV member, TTL ms. The member's score is its
// expiry, in Redis's clock.
var attachScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`)

// detach removes a follower's attachment and tells the producer to
// recount, even if ctx has ended.
func (j *Journal) detach(ctx context.Context, k keys, id, member string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisconn.IOTimeout)
	defer cancel()
	pipe := j.f.Pipeline()
	pipe.ZRem(ctx, k.att, member)
	j.publish(ctx, pipe, 'd', id)
	_, _ = pipe.Exec(ctx)
}

// Snapshot implements journal.Journal.
func (j *Journal) Snapshot(ctx context.Context, id string) (journal.Snapshot, error) {
	if j.isClosed() {
		return journal.Snapshot{}, journal.ErrClosed
	}
	k := j.keys(id)
	pipe := j.f.Pipeline()
	lease := pipe.Exists(ctx, k.lease)
	rng := pipe.XRange(ctx, k.stream, "-", "+")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return journal.Snapshot{}, unavailable(ctx, "snapshot", err)
	}
	if lease.Val() == 0 && len(rng.Val()) == 0 {
		return journal.Snapshot{}, journal.ErrNotFound
	}
	var s journal.Snapshot
	for _, m := range rng.Val() {
		e := decode(m)
		if !e.ok {
			continue
		}
		s.Truncated = s.Truncated || e.cut
		s.Ended = s.Ended || e.end
		s.Next = max(s.Next, e.seq+1)
		for _, ev := range e.evs {
			if n := len(s.Events); n == 0 || ev.Seq > s.Events[n-1].Seq {
				s.Events = append(s.Events, ev)
			}
		}
	}
	s.Lost = !s.Ended && lease.Val() == 0
	return s, nil
}
