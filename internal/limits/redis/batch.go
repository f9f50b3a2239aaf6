package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/limits"
)

// The calls that reach Redis go through one sender, which puts all that
// is waiting into one script call: the admissions of concurrent requests,
// refills, and the settlements and releases of finished ones. Redis runs
// scripts one at a time, so one script for many calls saves its fixed
// cost and the round trips. An admission on an idle replica is sent by
// its caller, with no hand-over; settlements and releases wait up to
// linger to ride with one. Calls reach Redis in the order they were made.

const (
	// linger is how long a settlement or release waits for an admission
	// to ride with before it is sent alone; refundLinger how long refunds
	// gather (each key's summed into one call): a refund only makes room,
	// so sending it late errs on refusing.
	linger       = 5 * time.Millisecond
	refundLinger = 50 * time.Millisecond
	// maxBatch bounds the calls in one script.
	maxBatch = 256
	// maxQueue bounds the calls waiting while Redis is slow or away:
	// past it, settlements and releases are dropped (counted; leases
	// lapse on their own) and admissions fail, so they count locally.
	maxQueue = 16384
)

// op is one queued call: 'a' admit (checks all or none; extra units ahead
// per check), 'g' refill (checks[0], its Cost the units), 'j' adjust
// (checks[0] by delta), 'r' release (lease's slot of checks[0].Key).
type op struct {
	kind   byte
	ctx    context.Context
	checks []limits.Check
	extra  []int
	lease  string
	delta  int
	reply  chan admitted // admit only
	gone   *bool         // admit only, under mu: its caller gave up
}

type admitted struct {
	res []granted
	err error
}

// granted is a check's result and the units taken ahead with it.
type granted struct {
	limits.Result
	Granted int
}

func (r *Counts) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// enqueueLocked queues o. An admission or a refill wakes the sender at
// once, anything else within linger. With nothing being sent, an
// admission is not left to the sender: inline is set, and the caller
// sends it with what is queued (see sendInline). It reports false when
// the queue is full or closed. Call with mu held.
func (r *Counts) enqueueLocked(o op) (ok, inline bool) {
	if r.closed || len(r.queue) >= maxQueue {
		return false, false
	}
	r.queue = append(r.queue, o)
	switch {
	case o.kind == 'a' && !r.sending && len(r.queue) <= maxBatch:
		r.sending = true
		return true, true
	case o.kind == 'a' || o.kind == 'g':
		r.signal()
	case !r.lingers:
		r.lingers = true
		r.timer.Reset(r.linger)
	}
	return true, false
}

// background queues a call nobody waits for, counting it lost when it
// cannot be queued. Call with mu held.
func (r *Counts) background(o op) {
	if ok, _ := r.enqueueLocked(o); !ok {
		r.lateErrors.Add(1)
		if o.kind == 'g' {
			if g := r.grants[o.checks[0].Key]; g != nil {
				g.refilling = false
			}
		}
	}
}

// take removes up to maxBatch queued calls. Call with mu held.
// Refunds summed since the last batch go first: each key's in one call.
func (r *Counts) take() []op {
	n := min(len(r.queue), maxBatch)
	batch := make([]op, 0, len(r.refunds)+n)
	for _, o := range r.refunds {
		batch = append(batch, *o)
	}
	clear(r.refunds)
	r.refundTimer.Stop()
	r.refundArmed = false
	batch = append(batch, r.queue[:n]...)
	r.queue = slices.Delete(r.queue, 0, n)
	if len(r.queue) == 0 {
		r.lingers = false
		r.timer.Stop()
	}
	return batch
}

// refund adds a settlement's refund to what goes to Redis with the next
// batch, or within refundLinger. Call with mu held.
func (r *Counts) refund(c limits.Check, delta int) {
	if r.closed {
		r.lateErrors.Add(1)
		return
	}
	if o := r.refunds[c.Key]; o != nil {
		o.checks[0], o.delta = c, o.delta+delta
	} else {
		r.refunds[c.Key] = &op{kind: 'j', checks: []limits.Check{c}, delta: delta}
	}
	if !r.refundArmed {
		r.refundArmed = true
		r.refundTimer.Reset(refundLinger)
	}
}

// sendInline sends the first batch (which holds the caller's admission
// unless more than maxBatch calls were queued) on the caller's
// goroutine, and leaves the rest to the sender.
func (r *Counts) sendInline() {
	r.mu.Lock()
	batch := r.take()
	r.mu.Unlock()
	r.run(batch)
	r.mu.Lock()
	r.sending = false
	if len(r.queue) > 0 || len(r.refunds) > 0 || r.closed {
		r.signal()
	}
	r.mu.Unlock()
}

// send is the sender: it takes what is queued, up to maxBatch calls at a
// time, and runs them in one script each, until Close. While a caller
// sends inline it waits: that caller wakes it when done.
func (r *Counts) send() {
	defer close(r.done)
	for {
		<-r.wake
		for {
			r.mu.Lock()
			if r.sending {
				r.mu.Unlock()
				break
			}
			batch := r.take()
			closed := r.closed
			r.sending = len(batch) > 0
			r.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			r.run(batch)
			r.mu.Lock()
			r.sending = false
			r.mu.Unlock()
		}
	}
}

// run sends batch in one script call (on a cluster, one per tenant, in
// one pipeline: a script touches one slot) and hands out the answers.
// Admissions whose caller gave up are left out: they would take counts
// nobody holds.
func (r *Counts) run(batch []op) {
	var calls []*call
	byTag := map[string]*call{}
	callFor := func(tag string) *call {
		if !r.cluster {
			tag = ""
		}
		c := byTag[tag]
		if c == nil {
			c = &call{args: []any{r.lease.Milliseconds()}}
			byTag[tag] = c
			calls = append(calls, c)
		}
		return c
	}
	for _, o := range batch {
		if o.kind == 'a' && o.ctx.Err() != nil {
			continue
		}
		cl := callFor(r.tag(o.checks[0]))
		switch o.kind {
		case 'a':
			cl.answered = append(cl.answered, o)
			cl.args = append(cl.args, "a", o.lease, len(o.checks))
			for i, c := range o.checks {
				cl.keys = append(cl.keys, r.rkey(c))
				cl.args = append(cl.args, c.Period.Seconds(), c.Limit, c.Cost, o.extra[i])
			}
		case 'g':
			c := o.checks[0]
			cl.answered = append(cl.answered, o)
			cl.keys = append(cl.keys, r.rkey(c))
			cl.args = append(cl.args, "g", c.Period.Seconds(), c.Limit, c.Cost)
		case 'j':
			c := o.checks[0]
			cl.keys = append(cl.keys, r.rkey(c))
			cl.args = append(cl.args, "j", c.Period.Seconds(), c.Limit, o.delta)
			cl.background++
		case 'r':
			cl.keys = append(cl.keys, r.rkey(o.checks[0]))
			cl.args = append(cl.args, "r", o.lease)
			cl.background++
		}
	}
	var answered []op
	for _, cl := range calls {
		answered = append(answered, cl.answered...)
	}
	if len(calls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout(answered))
	cmds := r.evalEach(ctx, batchScript, calls)
	for i, cl := range calls {
		cl.v, cl.err = cmds[i].Slice()
	}
	cancel()
	now := r.now()
	for _, cl := range calls {
		err := cl.err
		if err == nil && len(cl.v) != len(cl.answered) {
			err = fmt.Errorf("%d answers for %d calls", len(cl.v), len(cl.answered))
		}
		if err != nil {
			err = fmt.Errorf("redis: admit: %w", err)
			r.lateErrors.Add(uint64(cl.background))
		}
		r.answer(now, cl.answered, cl.v, err)
	}
}

// call is one script call of a batch: its keys and arguments, the
// admissions and refills it answers, how many calls nobody waits for it
// carries, and its answer.
type call struct {
	keys       []string
	args       []any
	answered   []op
	background int
	v          []any
	err        error
}

// evalEach runs s once for each call: one alone as EVALSHA (falling
// back to EVAL), more in one pipeline as EVAL (in a pipeline, a NOSCRIPT
// cannot fall back).
func (r *Counts) evalEach(ctx context.Context, s *goredis.Script, calls []*call) []*goredis.Cmd {
	if len(calls) == 1 {
		return []*goredis.Cmd{s.Run(ctx, r.c, calls[0].keys, calls[0].args...)}
	}
	pipe := r.c.Pipeline()
	cmds := make([]*goredis.Cmd, len(calls))
	for i, cl := range calls {
		cmds[i] = s.Eval(ctx, pipe, cl.keys, cl.args...)
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}

// answer hands out one script call's answers (or its error).
func (r *Counts) answer(now time.Time, answered []op, v []any, err error) {
	for i, o := range answered {
		var res []granted
		e := err
		if e == nil {
			res, e = results(v[i], o)
		}
		if o.kind == 'a' {
			r.mu.Lock()
			switch {
			case e != nil:
				// The script may have run: a slot it added is nobody's.
				for _, c := range o.checks {
					if c.Period == 0 {
						r.background(op{kind: 'r', checks: []limits.Check{{Key: c.Key, Tag: c.Tag}}, lease: o.lease})
					}
				}
			case *o.gone:
				r.adopt(now, o, res)
			}
			if !*o.gone {
				o.reply <- admitted{res, e}
			}
			r.mu.Unlock()
			continue
		}
		var a granted
		if e == nil {
			a = res[0]
		}
		r.mu.Lock()
		r.refilled(now, o.checks[0], a, e)
		r.mu.Unlock()
	}
}

// timeout is how long a batch may take: as long as its most patient
// admission waits, and a few seconds for one of background calls alone.
func timeout(answered []op) time.Duration {
	const background = 2 * time.Second
	d, any := time.Duration(0), false
	for _, o := range answered {
		if o.kind != 'a' {
			continue
		}
		dl, ok := o.ctx.Deadline()
		if !ok {
			return background
		}
		d, any = max(d, time.Until(dl)), true
	}
	if !any {
		return background
	}
	return max(d, time.Millisecond)
}

// results reads one admission's or refill's answer.
func results(x any, o op) ([]granted, error) {
	n := len(o.checks)
	if o.kind == 'g' {
		x = []any{x}
	}
	v, ok := x.([]any)
	if !ok || len(v) != n {
		return nil, fmt.Errorf("redis: admit: %T for %d checks", x, n)
	}
	res := make([]granted, n)
	for i, x := range v {
		f, ok := x.([]any)
		if !ok || len(f) != 5 {
			return nil, fmt.Errorf("redis: admit: result %d is %T", i, x)
		}
		allowed, _ := f[0].(int64)
		remaining, _ := f[1].(int64)
		extra, _ := f[4].(int64)
		res[i] = granted{limits.Result{Allowed: allowed == 1, Remaining: int(remaining), RetryAfter: seconds(f[2]), ResetAfter: seconds(f[3])}, int(extra)}
	}
	return res, nil
}

func seconds(v any) time.Duration {
	s, _ := v.(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// batchScript runs a batch of calls in order. ARGV[1] is the lease
// length in ms; then each call:
//
//	"a", lease, n, then n times period (s), limit, cost, extra: an
//	  admission, taking n KEYS: all its checks or none; a rate takes
//	  cost + extra units when they fit, else cost; a concurrency check
//	  adds lease to the key's open streams
//	"g", period, limit, cost: a refill of one KEY's rate, cost units
//	"j", period, limit, delta: a settlement of one KEY's rate
//	"r", lease: one KEY's open stream lease ends
//
// It returns each admission's results, and each refill's one, in order:
// {allowed, remaining, retry after (s, -1 when allowed), reset after (s),
// units taken beyond the cost}. Rates are GCRA as redis_rate counts them
// (a theoretical arrival time per key); open streams are sorted sets of
// leases scored by when they lapse.
var batchScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = (tonumber(t[1]) - ` + epoch + `) + tonumber(t[2]) / 1000000
local nowms = math.floor(now * 1000)
local leasems = tonumber(ARGV[1])
local a, k, out = 2, 1, {}
local function gcra(key, period, limit, cost)
  if limit <= 0 or period <= 0 then
    return false, {0, 0, '-1', '0', 0}
  end
  local interval = period / limit
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local nt = tat + interval * cost
  local diff = now - (nt - period)
  if diff < 0 then
    return false, {0, 0, tostring(-diff), tostring(tat - now), 0}
  end
  return nt, {1, math.floor(diff / interval), '-1', tostring(nt - now), 0}
end
local function set(key, nt)
  redis.call('SET', key, tostring(nt), 'PX', math.ceil((nt - now) * 1000) + 1)
end
while a <= #ARGV do
  local kind = ARGV[a]
  if kind == 'a' then
    local lease, n = ARGV[a + 1], tonumber(ARGV[a + 2])
    a = a + 3
    local res, newtat, ok = {}, {}, true
    for i = 1, n do
      local key = KEYS[k + i - 1]
      local period, limit, cost, extra = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
      a = a + 4
      if period == 0 then
        redis.call('ZREMRANGEBYSCORE', key, '-inf', nowms)
        local open = redis.call('ZCARD', key)
        if open < limit then
          res[i] = {1, limit - open - 1, '-1', '0', 0}
        else
          res[i] = {0, 0, '-1', '0', 0}
          ok = false
        end
      else
        local nt, r = false, nil
        if extra > 0 then
          nt, r = gcra(key, period, limit, cost + extra)
          if nt then r[5] = extra end
        end
        if not nt then nt, r = gcra(key, period, limit, cost) end
        res[i] = r
        if nt then newtat[i] = nt else ok = false end
      end
    end
    if ok then
      for i = 1, n do
        local key = KEYS[k + i - 1]
        if newtat[i] then
          set(key, newtat[i])
        else
          redis.call('ZADD', key, nowms + leasems, lease)
          redis.call('PEXPIRE', key, leasems * 2)
        end
      end
    end
    k = k + n
    out[#out + 1] = res
  elseif kind == 'g' then
    local key = KEYS[k]
    local period, limit, cost = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    a, k = a + 4, k + 1
    local nt, r = gcra(key, period, limit, cost)
    if nt then
      set(key, nt)
      r[5] = cost
    end
    out[#out + 1] = r
  elseif kind == 'j' then
    local key = KEYS[k]
    local period, limit, delta = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    a, k = a + 4, k + 1
    local tat = tonumber(redis.call('GET', key) or '0')
    if tat < now then tat = now end
    tat = tat + period / limit * delta
    if tat > now then
      set(key, tat)
    else
      redis.call('DEL', key)
    end
  elseif kind == 'r' then
    redis.call('ZREM', KEYS[k], ARGV[a + 1])
    a, k = a + 2, k + 1
  else
    return redis.error_reply('unknown call ' .. tostring(kind))
  end
end
return out
`)
