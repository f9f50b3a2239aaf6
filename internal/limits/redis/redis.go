// Package redis keeps admission's counts in Redis, shared by every
// replica: GCRA rates as redis_rate counts them (a theoretical arrival
// time per key) and open streams as sorted sets of leases that lapse
// unless renewed, so that a crashed replica's slots free themselves. One
// script checks all of a request's counts and takes them all or none, in
// one round trip.
package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/redisconn"
)

// Counts is a limits.Shared on Redis.
type Counts struct {
	c      *goredis.Client
	prefix string
	lease  time.Duration
}

// Open returns Counts on the server at url, its keys under prefix
// (default "firstword:limits:"), with concurrency leases of lease. It
// does not wait for the server: admission falls back to local counts
// while it is away.
func Open(url, prefix string, lease time.Duration) (*Counts, error) {
	opt, err := redisconn.Options(url)
	if err != nil {
		return nil, err
	}
	if prefix == "" {
		prefix = "firstword:limits:"
	}
	// Every request is admitted through here: enough connections that
	// 50 at once do not queue for one.
	opt.PoolSize = max(opt.PoolSize, 64)
	return &Counts{c: goredis.NewClient(opt), prefix: prefix, lease: lease}, nil
}

// Close closes the client.
func (r *Counts) Close() error { return r.c.Close() }

// epoch shortens the times the scripts compute with (seconds since it,
// not since 1970) so that float64s keep microseconds, as redis_rate does.
const epoch = "1483228800"

var admitScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = (tonumber(t[1]) - ` + epoch + `) + tonumber(t[2]) / 1000000
local nowms = math.floor(now * 1000)
local lease = ARGV[1]
local leasems = tonumber(ARGV[2])
local res, newtat, ok = {}, {}, true
for i = 1, #KEYS do
  local period = tonumber(ARGV[3 * i])
  local limit = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  if period == 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', nowms)
    local open = redis.call('ZCARD', KEYS[i])
    if open < limit then
      res[i] = {1, limit - open - 1, '-1', '0'}
    else
      res[i] = {0, 0, '-1', '0'}
      ok = false
    end
  else
    local interval = period / limit
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
    if tat < now then tat = now end
    local nt = tat + interval * cost
    local diff = now - (nt - period)
    if diff < 0 then
      res[i] = {0, 0, tostring(-diff), tostring(tat - now)}
      ok = false
    else
      res[i] = {1, math.floor(diff / interval), '-1', tostring(nt - now)}
      newtat[i] = nt
    end
  end
end
if ok then
  for i = 1, #KEYS do
    if newtat[i] then
      redis.call('SET', KEYS[i], tostring(newtat[i]), 'PX', math.ceil((newtat[i] - now) * 1000) + 1)
    else
      redis.call('ZADD', KEYS[i], nowms + leasems, lease)
      redis.call('PEXPIRE', KEYS[i], leasems * 2)
    end
  end
end
return res
`)

var adjustScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = (tonumber(t[1]) - ` + epoch + `) + tonumber(t[2]) / 1000000
local period, limit, delta = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
tat = tat + period / limit * delta
if tat > now then
  redis.call('SET', KEYS[1], tostring(tat), 'PX', math.ceil((tat - now) * 1000) + 1)
else
  redis.call('DEL', KEYS[1])
end
return 1
`)

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

// Admit implements limits.Shared.
func (r *Counts) Admit(ctx context.Context, checks []limits.Check, lease string) ([]limits.Result, error) {
	keys := make([]string, len(checks))
	args := make([]any, 2, 2+3*len(checks))
	args[0], args[1] = lease, r.lease.Milliseconds()
	for i, c := range checks {
		keys[i] = r.prefix + c.Key
		args = append(args, c.Period.Seconds(), c.Limit, c.Cost)
	}
	v, err := admitScript.Run(ctx, r.c, keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis: admit: %w", err)
	}
	if len(v) != len(checks) {
		return nil, fmt.Errorf("redis: admit: %d results for %d checks", len(v), len(checks))
	}
	res := make([]limits.Result, len(checks))
	for i, x := range v {
		f, ok := x.([]any)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("redis: admit: result %d is %T", i, x)
		}
		allowed, _ := f[0].(int64)
		remaining, _ := f[1].(int64)
		res[i] = limits.Result{Allowed: allowed == 1, Remaining: int(remaining), RetryAfter: seconds(f[2]), ResetAfter: seconds(f[3])}
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

// Adjust implements limits.Shared.
func (r *Counts) Adjust(ctx context.Context, c limits.Check, delta int) error {
	if err := adjustScript.Run(ctx, r.c, []string{r.prefix + c.Key}, c.Period.Seconds(), c.Limit, delta).Err(); err != nil {
		return fmt.Errorf("redis: adjust: %w", err)
	}
	return nil
}

// Release implements limits.Shared.
func (r *Counts) Release(ctx context.Context, keys []string, lease string) error {
	_, err := r.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, k := range keys {
			p.ZRem(ctx, r.prefix+k, lease)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis: release: %w", err)
	}
	return nil
}

// Renew implements limits.Shared.
func (r *Counts) Renew(ctx context.Context, leases map[string][]string) error {
	var keys []string
	args := []any{r.lease.Milliseconds()}
	for k, ids := range leases {
		for _, id := range ids {
			keys = append(keys, r.prefix+k)
			args = append(args, id)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := renewScript.Run(ctx, r.c, keys, args...).Err(); err != nil {
		return fmt.Errorf("redis: renew: %w", err)
	}
	return nil
}
