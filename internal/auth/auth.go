// Package auth turns API keys into principals. Keys look like
// fw_<prefix>_<secret>; the store keeps the public prefix and the SHA-256 of
// the secret, never the secret, and hashes are compared in constant time.
// With no active key in the store the gateway runs in single-user local
// mode, where every request is the local tenant's. Once a key exists,
// every request needs a valid one, even if all keys are later revoked.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/firstword/firstword/internal/store"
)

// Local mode's tenant and user.
const (
	LocalTenant = "local"
	LocalUser   = "local"
)

// ErrUnauthorized means the request carried no valid key.
var ErrUnauthorized = errors.New("a valid API key is required")

// Principal is who a request acts as.
type Principal struct {
	TenantID string
	UserID   string
	KeyID    string
	Local    bool
	// Admin keys reach the operators' routes (/admin/*) and see every
	// tenant's traffic in the budget views.
	Admin bool
}

const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// NewKey returns a fresh key, its public prefix and the hash to store.
func NewKey() (key, prefix string, hash []byte) {
	prefix = random(8)
	secret := random(32)
	h := sha256.Sum256([]byte(secret))
	return "fw_" + prefix + "_" + secret, prefix, h[:]
}

// Imported returns the prefix and hash to store for a key made elsewhere
// (in the form NewKey makes), or ok false for anything else.
func Imported(key string) (prefix string, hash []byte, ok bool) {
	prefix, secret, ok := parse(key)
	if !ok {
		return "", nil, false
	}
	h := sha256.Sum256([]byte(secret))
	return prefix, h[:], true
}

// parse splits a key into prefix and secret.
func parse(key string) (prefix, secret string, ok bool) {
	rest, ok := strings.CutPrefix(key, "fw_")
	if !ok {
		return "", "", false
	}
	prefix, secret, ok = strings.Cut(rest, "_")
	return prefix, secret, ok && len(prefix) == 8 && len(secret) >= 16
}

// Authenticator checks keys against the store, caching the answers. An
// answer is served for at most ttl from when the store was asked; once it
// is half that old, the request that finds it also asks the store again in
// the background, so under steady traffic no request waits for the store.
// Concurrent requests that do wait (a new key, or after a quiet spell)
// share one query.
//
// While the store is failing, a key answered within staleIfError keeps
// its answer (the store cannot hold a newer one for anybody to have
// written), and the local-mode decision, once made, is never waited for
// again: it is only refreshed in the background.
type Authenticator struct {
	st     store.Store
	ttl    time.Duration
	flight singleflight.Group
	bg     sync.WaitGroup // background refreshes
	now    func() time.Time

	mu        sync.Mutex
	cache     map[string]cached // by hash and prefix; localKey is local mode
	closed    bool
	downUntil time.Time     // the store failed: serve stale answers until then
	refusals  int           // cached ErrUnauthorized answers
	watching  bool          // the local-mode watcher runs
	stop      chan struct{} // closed by Close
}

type cached struct {
	p          Principal
	err        error // ErrUnauthorized, or nil
	at         time.Time
	refreshing bool
}

// localKey caches whether the gateway is in local mode; keys' entries are
// 32 bytes of hash and a prefix, never empty.
const localKey = ""

// storeTimeout bounds one query of the store, which requests share.
const storeTimeout = 5 * time.Second

// staleIfError is how old a cached answer may be and still be served
// while the store is failing.
const staleIfError = 5 * time.Minute

// maxRefusals bounds the cached refusals of keys the store does not hold.
const maxRefusals = 10000

// New returns an Authenticator. ttl bounds how long a key check (and the
// local-mode decision) is cached: a revoked key stops working within ttl
// on every replica (default 1s).
func New(st store.Store, ttl time.Duration) *Authenticator {
	if ttl <= 0 {
		ttl = time.Second
	}
	return &Authenticator{st: st, ttl: ttl, cache: map[string]cached{}, now: time.Now, stop: make(chan struct{})}
}

// Close waits for background refreshes and starts no more.
func (a *Authenticator) Close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.stop)
	}
	a.mu.Unlock()
	a.bg.Wait()
}

// watchLocal asks the store every ttl/2 whether a key exists yet, while
// the gateway is in local mode, so that requests never wait on the store
// for it and the first key takes effect within ttl.
func (a *Authenticator) watchLocal() {
	defer a.bg.Done()
	t := time.NewTicker(a.ttl / 2)
	defer t.Stop()
	load := func(ctx context.Context) (Principal, error) {
		n, err := a.st.CountAPIKeys(ctx)
		return Principal{TenantID: LocalTenant, UserID: LocalUser, Local: n == 0}, err
	}
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		if p, err := a.fill(context.Background(), localKey, load); err == nil && !p.Local {
			a.mu.Lock()
			a.watching = false
			a.mu.Unlock()
			return // keys never go away: the decision is final
		}
	}
}

// Local reports whether the gateway is in local mode: the store has never
// had a key. Revoking every key locks everyone out; it does not reopen the
// gateway.
func (a *Authenticator) Local(ctx context.Context) (bool, error) {
	if p, ok := a.settled(localKey); ok {
		return p.Local, nil // every request asks: no closure for it
	}
	p, err := a.lookup(ctx, localKey, func(ctx context.Context) (Principal, error) {
		n, err := a.st.CountAPIKeys(ctx)
		return Principal{TenantID: LocalTenant, UserID: LocalUser, Local: n == 0}, err
	})
	if err == nil && p.Local {
		a.mu.Lock()
		if !a.watching && !a.closed {
			a.watching = true
			a.bg.Add(1)
			go a.watchLocal()
		}
		a.mu.Unlock()
	}
	return p.Local, err
}

// Authenticate resolves an Authorization header (or an x-api-key value)
// to a principal.
func (a *Authenticator) Authenticate(ctx context.Context, authorization, apiKey string) (Principal, error) {
	local, err := a.Local(ctx)
	if err != nil {
		return Principal{}, err
	}
	if local {
		return Principal{TenantID: LocalTenant, UserID: LocalUser, Local: true}, nil
	}
	key := apiKey
	if v, ok := strings.CutPrefix(authorization, "Bearer "); ok {
		key = strings.TrimSpace(v)
	}
	prefix, secret, ok := parse(key)
	if !ok {
		return Principal{}, ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(secret))
	return a.lookup(ctx, string(sum[:])+prefix, func(ctx context.Context) (Principal, error) {
		keys, err := a.st.APIKeysByPrefix(ctx, prefix)
		if err != nil {
			return Principal{}, err
		}
		for _, k := range keys {
			if subtle.ConstantTimeCompare(k.Hash, sum[:]) == 1 && (k.RevokedAt == nil || k.RevokedAt.After(a.now())) {
				return Principal{TenantID: k.TenantID, UserID: k.UserID, KeyID: k.ID, Admin: k.Admin}, nil
			}
		}
		return Principal{}, ErrUnauthorized
	})
}

// Forget drops the cached answers of the keys whose public prefix is
// prefix, and the local-mode decision, so that a key created, revoked or
// rotated through this replica takes effect here at once (other replicas
// see it within ttl).
func (a *Authenticator) Forget(prefix string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for ck, c := range a.cache {
		if ck == localKey && c.p.Local || len(ck) == sha256.Size+len(prefix) && ck[sha256.Size:] == prefix {
			if c.err != nil {
				a.refusals--
			}
			delete(a.cache, ck)
		}
	}
}

// settled returns ck's cached principal if it needs no refresh yet.
func (a *Authenticator) settled(ck string) (Principal, bool) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.cache[ck]
	return c.p, ok && c.err == nil && now.Sub(c.at) < a.ttl/2
}

// lookup answers from the cache, or from load, which returns the principal,
// ErrUnauthorized, or a store failure (never cached).
func (a *Authenticator) lookup(ctx context.Context, ck string, load func(context.Context) (Principal, error)) (Principal, error) {
	now := a.now()
	a.mu.Lock()
	c, ok := a.cache[ck]
	age := now.Sub(c.at)
	fresh := ok && age < a.ttl
	// Past ttl, an answer is still served while the store is known to be
	// failing (a request would only wait to be told so), and local mode
	// is always served from its last answer.
	stale := ok && !fresh && (ck == localKey || now.Before(a.downUntil) && age < staleIfError)
	refresh := (fresh || stale) && !a.closed && !c.refreshing && age >= a.ttl/2
	if refresh {
		c.refreshing = true
		a.cache[ck] = c
		a.bg.Add(1)
	}
	a.mu.Unlock()
	if refresh {
		go func() {
			defer a.bg.Done()
			a.fill(context.WithoutCancel(ctx), ck, load)
		}()
	}
	if fresh || stale {
		return c.p, c.err
	}
	p, err := a.fill(ctx, ck, load)
	if err != nil && !errors.Is(err, ErrUnauthorized) && ok && age < staleIfError {
		return c.p, c.err // the store failed just now: the last answer stands
	}
	return p, err
}

// fill asks the store once for everyone who needs ck now and caches the
// answer. The query outlives a caller that leaves: others may share it.
func (a *Authenticator) fill(ctx context.Context, ck string, load func(context.Context) (Principal, error)) (Principal, error) {
	v, err, _ := a.flight.Do(ck, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		defer cancel()
		asked := a.now()
		p, err := load(ctx)
		a.mu.Lock()
		defer a.mu.Unlock()
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			if c, ok := a.cache[ck]; ok {
				c.refreshing = false // the next request past half-life tries again
				a.cache[ck] = c
			}
			// Until a query succeeds again (a refresh in the background
			// of a stale answer clears it), nobody waits to be told.
			a.downUntil = a.now().Add(staleIfError)
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.downUntil = time.Time{}
		c := cached{p: p, err: err, at: asked}
		if err != nil {
			// Refusals are bounded on their own: anybody can make them,
			// and clearing them must not take the answers that keep real
			// keys (and local mode) working through a store outage.
			if a.refusals >= maxRefusals {
				for k, e := range a.cache {
					if e.err != nil {
						delete(a.cache, k)
					}
				}
				a.refusals = 0
			}
			if old, ok := a.cache[ck]; !ok || old.err == nil {
				a.refusals++
			}
		}
		a.cache[ck] = c
		return c, nil
	})
	if err != nil {
		return Principal{}, err
	}
	c := v.(cached)
	return c.p, c.err
}

// EnsureTenant creates a tenant if it does not exist.
func EnsureTenant(ctx context.Context, st store.Store, id, name string) error {
	if _, err := st.GetTenant(ctx, id); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	err := st.CreateTenant(ctx, &store.Tenant{ID: id, Name: name, CreatedAt: time.Now().UTC()})
	if err != nil {
		// Another replica may have created it meanwhile.
		if _, gerr := st.GetTenant(ctx, id); gerr == nil {
			return nil
		}
	}
	return err
}
