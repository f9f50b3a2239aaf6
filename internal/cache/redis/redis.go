// Package redis is the response cache shared by replicas, on Redis.
package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/redisconn"
)

// Cache is a cache.Cache on Redis: each entry is one JSON value with the
// entry's expiry as its TTL.
type Cache struct {
	c      goredis.UniversalClient
	prefix string
}

// Open connects to s and checks the connection. Every later operation
// honours its context's deadline. Each entry is one key: the cache runs
// on a Redis Cluster as it does on one server.
func Open(ctx context.Context, s redisconn.Server, prefix string) (*Cache, error) {
	c, err := redisconn.Open(s, 0)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, redisconn.PingTimeout)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
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
