// Package redis is the response cache shared by replicas, on Redis. It is
// the only package that imports the Redis client.
package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/cache"
)

// Cache is a cache.Cache on Redis: each entry is one JSON value with the
// entry's expiry as its TTL.
type Cache struct {
	c      *goredis.Client
	prefix string
}

// Client timeouts, for what the URL does not set. Each Get and Set ends at
// its context's deadline (cache.Guard gives it one); these only bound a
// call without one, so that a frozen server holds nothing for long.
const (
	dialTimeout = time.Second
	ioTimeout   = time.Second
	poolTimeout = time.Second
	// pingTimeout is the first contact's: a server that is starting may
	// be slow to answer, and nothing waits on it but startup.
	pingTimeout = 5 * time.Second
)

// Open connects to url (redis://host:port/db) and checks the connection.
// Every later operation honours its context's deadline.
func Open(ctx context.Context, url, prefix string) (*Cache, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	// Without it, go-redis sets socket deadlines from ReadTimeout and
	// WriteTimeout alone, and a frozen server stalls a call for them
	// whatever its context says.
	opt.ContextTimeoutEnabled = true
	if opt.DialTimeout == 0 {
		opt.DialTimeout = dialTimeout
	}
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = ioTimeout
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = ioTimeout
	}
	// A frozen server keeps its connections busy: callers must not queue
	// for one past this (nor past their context).
	if opt.PoolTimeout == 0 {
		opt.PoolTimeout = poolTimeout
	}
	// A miss is cheap: a retry would only spend the caller's budget, and
	// a refused connection must fail at once, not after a backoff.
	if opt.MaxRetries == 0 {
		opt.MaxRetries = -1 // none
	}
	opt.DialerRetries = 1
	c := goredis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.WithTimeout(pingTimeout).Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	if prefix == "" {
		prefix = "firstword:cache:"
	}
	return &Cache{c: c, prefix: prefix}, nil
}

// Get implements cache.Cache.
func (r *Cache) Get(ctx context.Context, key string) (*cache.Entry, error) {
	b, err := r.c.Get(ctx, r.prefix+key).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redis: get: %w", err)
	}
	var e cache.Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("redis: decoding entry: %w: %w", cache.ErrBadEntry, err)
	}
	return &e, nil
}

// Set implements cache.Cache.
func (r *Cache) Set(ctx context.Context, key string, e *cache.Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("redis: encoding entry: %w: %w", cache.ErrBadEntry, err)
	}
	ttl := time.Until(e.Expires)
	if ttl <= 0 {
		return nil
	}
	if err := r.c.Set(ctx, r.prefix+key, b, ttl).Err(); err != nil {
		return fmt.Errorf("redis: set: %w", err)
	}
	return nil
}

// Close closes the connection pool.
func (r *Cache) Close() error { return r.c.Close() }
