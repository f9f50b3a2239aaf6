// Package redisconn holds what firstword's Redis clients (the response
// cache, the resume journal, the shared limits) agree on: how a server,
// a Sentinel-watched master or a Redis Cluster becomes a client that
// never lets a frozen server hold a caller for long.
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
	// ClusterReload is how often a cluster client reloads its slot map.
	ClusterReload = 2 * time.Second
)

// Server names a Redis deployment.
type Server struct {
	// URL is the server (redis://host:port/db), or with SentinelMaster
	// a sentinel, or with Cluster a node; go-redis's URL options apply
	// (for a cluster, addr=; for Sentinel, master_name=).
	URL string
	// Addrs are more sentinels or cluster nodes (host:port); with them,
	// URL may be empty.
	Addrs []string
	// SentinelMaster is the name of the master Sentinel watches.
	SentinelMaster string
	// Cluster: the servers are nodes of a Redis Cluster.
	Cluster bool
}

// Mode names s's kind: "server", "sentinel" or "cluster".
func (s Server) Mode() string {
	switch {
	case s.Cluster:
		return "cluster"
	case s.SentinelMaster != "":
		return "sentinel"
	}
	return "server"
}

// Open returns a client for s with firstword's defaults: context
// deadlines honoured, the timeouts above where the URL sets none, no
// retries (each caller retries, or not, on its own terms: a cache miss is
// cheap, the journal's writer backs off), and a refused connection
// failing at once. poolSize, when positive, sizes each server's pool.
// A cluster client follows MOVED and ASK redirections (a resharding or a
// failover) on its own.
func Open(s Server, poolSize int) (goredis.UniversalClient, error) {
	url := s.URL
	if url == "" && len(s.Addrs) > 0 {
		url = "redis://" + s.Addrs[0]
		s.Addrs = s.Addrs[1:]
	}
	switch s.Mode() {
	case "cluster":
		o, err := goredis.ParseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		o.Addrs = append(o.Addrs, s.Addrs...)
		o.ContextTimeoutEnabled = true
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeouts(o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout)
		o.MaxRetries = cmp.Or(o.MaxRetries, -1)
		o.DialerRetries = 1
		o.PoolSize = cmp.Or(poolSize, o.PoolSize)
		// go-redis reloads its slot map on a MOVED reply, but not when a
		// failed master refuses connections: poll it, so that a shard's
		// failover is found within seconds, not the default minute.
		o.ClusterStateReloadInterval = cmp.Or(o.ClusterStateReloadInterval, ClusterReload)
		return goredis.NewClusterClient(o), nil
	case "sentinel":
		o, err := goredis.ParseFailoverURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		o.MasterName = s.SentinelMaster
		o.SentinelAddrs = append(o.SentinelAddrs, s.Addrs...)
		// The URL's user and password are the sentinels'; a deployment
		// that protects the master usually protects it alike.
		o.Username = cmp.Or(o.Username, o.SentinelUsername)
		o.Password = cmp.Or(o.Password, o.SentinelPassword)
		o.ContextTimeoutEnabled = true
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeouts(o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout)
		o.MaxRetries = cmp.Or(o.MaxRetries, -1)
		o.DialerRetries = 1
		o.PoolSize = cmp.Or(poolSize, o.PoolSize)
		return goredis.NewFailoverClient(o), nil
	}
	o, err := Options(url)
	if err != nil {
		return nil, err
	}
	o.PoolSize = cmp.Or(poolSize, o.PoolSize)
	return goredis.NewClient(o), nil
}

// Options parses url (redis://host:port/db) into one server's client
// options with firstword's defaults (see Open).
func Options(url string) (*goredis.Options, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	// Without it, go-redis sets socket deadlines from ReadTimeout and
	// WriteTimeout alone, and a frozen server stalls a call for them
	// whatever its context says.
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeouts(opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout)
	opt.MaxRetries = cmp.Or(opt.MaxRetries, -1) // none
	opt.DialerRetries = 1
	return opt, nil
}

// timeouts fills in the defaults. A frozen server keeps its connections
// busy: callers must not queue for one past PoolTimeout (nor past their
// context).
func timeouts(dial, read, write, pool time.Duration) (time.Duration, time.Duration, time.Duration, time.Duration) {
	return cmp.Or(dial, DialTimeout), cmp.Or(read, IOTimeout), cmp.Or(write, IOTimeout), cmp.Or(pool, PoolTimeout)
}
