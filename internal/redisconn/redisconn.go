// Package redisconn holds what firstword's Redis clients (the response
// cache, the resume journal) agree on: how a URL becomes client options
// that never let a frozen server hold a caller for long.
package redisconn

import (
	"cmp"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Client timeouts, for what the URL does not set. Callers bound their
// operations with their contexts; these only bound a call without one, so
// that a frozen server holds nothing for long.
const (
	DialTimeout = time.Second
	IOTimeout   = time.Second
	PoolTimeout = time.Second
	// PingTimeout is the first contact's: a server that is starting may
	// be slow to answer, and nothing waits on it but startup.
	PingTimeout = 5 * time.Second
)

// Options parses url (redis://host:port/db) into client options with
// firstword's defaults: context deadlines honoured, the timeouts above
// where the URL sets none, no retries (each caller retries, or not, on
// its own terms: a cache miss is cheap, the journal's writer backs off),
// and a refused connection failing at once.
func Options(url string) (*goredis.Options, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	// Without it, go-redis sets socket deadlines from ReadTimeout and
	// WriteTimeout alone, and a frozen server stalls a call for them
	// whatever its context says.
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout = cmp.Or(opt.DialTimeout, DialTimeout)
	opt.ReadTimeout = cmp.Or(opt.ReadTimeout, IOTimeout)
	opt.WriteTimeout = cmp.Or(opt.WriteTimeout, IOTimeout)
	// A frozen server keeps its connections busy: callers must not queue
	// for one past this (nor past their context).
	opt.PoolTimeout = cmp.Or(opt.PoolTimeout, PoolTimeout)
	opt.MaxRetries = cmp.Or(opt.MaxRetries, -1) // none
	opt.DialerRetries = 1
	return opt, nil
}
