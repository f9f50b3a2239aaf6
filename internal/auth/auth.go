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

// parse splits a key into prefix and secret.
func parse(key string) (prefix, secret string, ok bool) {
	rest, ok := strings.CutPrefix(key, "fw_")
	if !ok {
		return "", "", false
	}
	prefix, secret, ok = strings.Cut(rest, "_")
	return prefix, secret, ok && len(prefix) == 8 && len(secret) >= 16
}

// Authenticator checks keys against the store, caching results briefly.
type Authenticator struct {
	st  store.Store
	ttl time.Duration

	mu        sync.Mutex
	cache     map[string]cached // by full key hash
	localAt   time.Time
	local     bool
	localOnce bool
}

type cached struct {
	p   Principal
	err error
	at  time.Time
}

// New returns an Authenticator. ttl bounds how long a key check (and the
// local-mode decision) is cached: a revoked key stops working within ttl.
func New(st store.Store, ttl time.Duration) *Authenticator {
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	return &Authenticator{st: st, ttl: ttl, cache: map[string]cached{}}
}

// Local reports whether the gateway is in local mode: the store has never
// had a key. Revoking every key locks everyone out; it does not reopen the
// gateway.
func (a *Authenticator) Local(ctx context.Context) (bool, error) {
	a.mu.Lock()
	if a.localOnce && time.Since(a.localAt) < a.ttl {
		l := a.local
		a.mu.Unlock()
		return l, nil
	}
	a.mu.Unlock()
	n, err := a.st.CountAPIKeys(ctx)
	if err != nil {
		return false, fmt.Errorf("auth: %w", err)
	}
	a.mu.Lock()
	a.local, a.localAt, a.localOnce = n == 0, time.Now(), true
	a.mu.Unlock()
	return n == 0, nil
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
	ck := string(sum[:]) + prefix
	a.mu.Lock()
	if c, ok := a.cache[ck]; ok && time.Since(c.at) < a.ttl {
		a.mu.Unlock()
		return c.p, c.err
	}
	a.mu.Unlock()
	keys, err := a.st.APIKeysByPrefix(ctx, prefix)
	if err != nil {
		return Principal{}, fmt.Errorf("auth: %w", err)
	}
	p, perr := Principal{}, ErrUnauthorized
	for _, k := range keys {
		if subtle.ConstantTimeCompare(k.Hash, sum[:]) == 1 && k.RevokedAt == nil {
			p, perr = Principal{TenantID: k.TenantID, UserID: k.UserID, KeyID: k.ID}, nil
		}
	}
	a.mu.Lock()
	if len(a.cache) > 10000 {
		clear(a.cache)
	}
	a.cache[ck] = cached{p: p, err: perr, at: time.Now()}
	a.mu.Unlock()
	return p, perr
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
