package auth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/store/sqlite"
)

// countingStore counts the key queries, and can hold them or fail them.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	queries int
	gate    chan struct{} // when set, queries wait for it to close
	fail    error
}

func (s *countingStore) query(ctx context.Context) error {
	s.mu.Lock()
	s.queries++
	gate, fail := s.gate, s.fail
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return fail
}

func (s *countingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

func (s *countingStore) CountAPIKeys(ctx context.Context) (int, error) {
	if err := s.query(ctx); err != nil {
		return 0, err
	}
	return s.Store.CountAPIKeys(ctx)
}

func (s *countingStore) APIKeysByPrefix(ctx context.Context, prefix string) ([]store.APIKey, error) {
	if err := s.query(ctx); err != nil {
		return nil, err
	}
	return s.Store.APIKeysByPrefix(ctx, prefix)
}

// clock is a settable now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const ttl = 10 * time.Second

// setup returns an Authenticator on a store holding one key, and the key.
func setup(t *testing.T) (*Authenticator, *countingStore, *clock, string) {
	t.Helper()
	st, err := sqlite.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if err := EnsureTenant(ctx, st, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	key, prefix, hash := NewKey()
	if err := st.CreateAPIKey(ctx, &store.APIKey{ID: "key_1", TenantID: "acme", UserID: "ann", Prefix: prefix, Hash: hash, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st}
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	a := New(cs, ttl)
	a.now = clk.now
	t.Cleanup(a.Close)
	return a, cs, clk, key
}

// checkedThenRevoked is setup with the key checked once (and cached), then
// revoked in the store.
func checkedThenRevoked(t *testing.T) (*Authenticator, *countingStore, *clock, string) {
	t.Helper()
	a, cs, clk, key := setup(t)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil {
		t.Fatal(err)
	}
	if err := cs.RevokeAPIKey(ctx, "key_1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return a, cs, clk, key
}

func TestAuthenticate(t *testing.T) {
	a, _, _, key := setup(t)
	ctx := context.Background()
	// The key with its last character changed (to x, or to y when it is x).
	wrong := key[:len(key)-1] + "x"
	if wrong == key {
		wrong = key[:len(key)-1] + "y"
	}
	for _, tc := range []struct {
		name, authorization, apiKey string
		want                        error
	}{
		{"bearer", "Bearer " + key, "", nil},
		{"x-api-key", "", key, nil},
		{"no key", "", "", ErrUnauthorized},
		{"malformed", "Bearer nope", "", ErrUnauthorized},
		{"wrong secret", "Bearer " + wrong, "", ErrUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(ctx, tc.authorization, tc.apiKey)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil && (p.TenantID != "acme" || p.UserID != "ann" || p.KeyID != "key_1" || p.Local) {
				t.Errorf("principal = %+v", p)
			}
		})
	}
}

func TestCachedAnswerNeedsNoQuery(t *testing.T) {
	a, cs, clk, key := setup(t)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil {
		t.Fatal(err)
	}
	n := cs.count() // local mode and the key
	clk.add(ttl / 4)
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil {
		t.Fatal(err)
	}
	a.bg.Wait()
	if got := cs.count(); got != n {
		t.Errorf("a fresh answer asked the store again: %d queries, want %d", got, n)
	}
}

// Past half its life, an answer is still served at once while the store
// is asked in the background; so a revocation is seen within ttl without
// any request waiting for the store.
func TestRefreshAheadSeesRevocation(t *testing.T) {
	a, cs, clk, key := checkedThenRevoked(t)
	ctx := context.Background()
	clk.add(ttl * 6 / 10)
	cs.mu.Lock()
	cs.gate = make(chan struct{})
	cs.mu.Unlock()
	before := cs.count()
	// Served from the cache though the store is now held: nobody waits.
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil {
		t.Fatalf("within ttl of the last check: %v", err)
	}
	close(cs.gate)
	a.bg.Wait()
	if got := cs.count() - before; got != 2 {
		t.Errorf("background refreshes: %d queries, want 2 (local mode and the key)", got)
	}
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("after the refresh, a revoked key: err = %v, want ErrUnauthorized", err)
	}
}

func TestExpiredAnswerIsNotServed(t *testing.T) {
	a, _, clk, key := checkedThenRevoked(t)
	ctx := context.Background()
	clk.add(ttl)
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("ttl after the last check, a revoked key: err = %v, want ErrUnauthorized", err)
	}
}

func TestConcurrentMissesShareOneQuery(t *testing.T) {
	a, cs, _, key := setup(t)
	ctx := context.Background()
	if _, err := a.Local(ctx); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	cs.gate = make(chan struct{})
	cs.mu.Unlock()
	before := cs.count()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := a.Authenticate(ctx, "Bearer "+key, "")
			errs <- err
		})
	}
	for cs.count() == before {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the others reach the query
	close(cs.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := cs.count() - before; got != 1 {
		t.Errorf("20 concurrent misses made %d queries, want 1", got)
	}
}

func TestStoreFailureIsNotCached(t *testing.T) {
	a, cs, _, key := setup(t)
	ctx := context.Background()
	cs.fail = errors.New("disk on fire")
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err == nil || errors.Is(err, ErrUnauthorized) {
		t.Fatalf("with the store failing: err = %v, want the store's error", err)
	}
	cs.mu.Lock()
	cs.fail = nil
	cs.mu.Unlock()
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil {
		t.Errorf("with the store back: %v", err)
	}
}

func TestLeavingCallerDoesNotFailOthers(t *testing.T) {
	a, cs, _, key := setup(t)
	cs.mu.Lock()
	cs.gate = make(chan struct{})
	cs.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := a.Authenticate(ctx, "Bearer "+key, ""); first <- err }()
	for cs.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel() // the first caller's client leaves while the query runs
	second := make(chan error, 1)
	go func() { _, err := a.Authenticate(context.Background(), "Bearer "+key, ""); second <- err }()
	time.Sleep(10 * time.Millisecond)
	close(cs.gate)
	if err := <-second; err != nil {
		t.Errorf("a caller sharing the query of one that left: %v", err)
	}
	<-first
}

func TestLocalModeUntilAKeyExists(t *testing.T) {
	st, err := sqlite.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := New(st, ttl)
	defer a.Close()
	p, err := a.Authenticate(context.Background(), "", "")
	if err != nil || !p.Local || p.TenantID != LocalTenant {
		t.Fatalf("empty store: %+v, %v; want the local principal", p, err)
	}
}

// TestLocalModeNeverWaitsForTheStore: once local mode is decided, a
// request never waits on the store again, however old the answer and
// however stalled the store; the store is asked in the background.
func TestLocalModeNeverWaitsForTheStore(t *testing.T) {
	st, err := sqlite.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs := &countingStore{Store: st}
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	a := New(cs, ttl)
	a.now = clk.now
	ctx := context.Background()
	if local, err := a.Local(ctx); err != nil || !local {
		t.Fatalf("empty store: local = %v, %v", local, err)
	}
	gate := make(chan struct{})
	cs.mu.Lock()
	cs.gate = gate // the database stalls
	cs.mu.Unlock()
	clk.add(ttl * 10)
	done := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(ctx, "", "")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("local mode with the store stalled: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a local-mode request waited on the stalled store")
	}
	close(gate)
	a.Close() // waits for the background refresh
}

// TestKnownKeyServedWhileStoreFails: a key answered before the store
// failed keeps working through the outage, and a request after the first
// failure does not wait for the store to be asked again.
func TestKnownKeyServedWhileStoreFails(t *testing.T) {
	a, cs, clk, key := setup(t)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	cs.fail = errors.New("connection refused")
	cs.mu.Unlock()
	clk.add(2 * ttl)
	p, err := a.Authenticate(ctx, "Bearer "+key, "")
	if err != nil || p.TenantID != "acme" {
		t.Fatalf("a known key with the store failing: %+v, %v", p, err)
	}
	// Now the store stalls as well: a request in the outage is not held.
	gate := make(chan struct{})
	cs.mu.Lock()
	cs.gate = gate
	cs.mu.Unlock()
	clk.add(ttl / 10)
	done := make(chan error, 1)
	go func() { _, err := a.Authenticate(ctx, "Bearer "+key, ""); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second request in the outage: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a request in the outage waited on the store")
	}
	close(gate)
	cs.mu.Lock()
	cs.gate = nil
	cs.mu.Unlock()
	// An unknown key still needs the store.
	other, _, _ := NewKey()
	if _, err := a.Authenticate(ctx, "Bearer "+other, ""); err == nil {
		t.Errorf("an unknown key in the outage was accepted")
	}
	// Past staleIfError the answer is not served.
	clk.add(staleIfError)
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err == nil {
		t.Errorf("an answer older than staleIfError was served in the outage")
	}
}

// TestBogusKeysDoNotEvictKnownOnes: a flood of made-up keys, each cached
// as refused, does not push out the answer that keeps a real key working
// while the store is down.
func TestBogusKeysDoNotEvictKnownOnes(t *testing.T) {
	a, cs, clk, key := setup(t)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil {
		t.Fatal(err)
	}
	for range maxRefusals + 10 {
		bogus, _, _ := NewKey()
		if _, err := a.Authenticate(ctx, "Bearer "+bogus, ""); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("a made-up key: %v", err)
		}
	}
	cs.mu.Lock()
	cs.fail = errors.New("connection refused")
	cs.mu.Unlock()
	clk.add(2 * ttl)
	if _, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil {
		t.Errorf("the real key after a flood of made-up ones, store down: %v", err)
	}
	a.mu.Lock()
	n := len(a.cache)
	a.mu.Unlock()
	if n > maxRefusals+2 {
		t.Errorf("%d cached answers: refusals are not bounded", n)
	}
}
