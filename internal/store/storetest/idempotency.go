package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/store"
)

func idemKey(tenant, scope, key, hash string, created time.Time) *store.IdempotencyKey {
	return &store.IdempotencyKey{TenantID: tenant, Scope: scope, Key: key, RequestHash: []byte(hash),
		CreatedAt: created, ExpiresAt: created.Add(time.Hour)}
}

func testIdempotencyKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := idemKey("acme", "alice", "k1", "h1", t0)
	if got, err := s.ClaimIdempotencyKey(ctx, first, t0); err != nil || got != nil {
		t.Fatalf("first ClaimIdempotencyKey = %+v, %v; want inserted", got, err)
	}
	// A retry finds the claim, unbound.
	got, err := s.ClaimIdempotencyKey(ctx, idemKey("acme", "alice", "k1", "h2", at(time.Minute)), at(time.Minute))
	if err != nil || got == nil {
		t.Fatalf("second ClaimIdempotencyKey = %+v, %v; want the first record", got, err)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("existing record (-want +got):\n%s", diff)
	}
	// Other scopes and tenants have keys of their own.
	for _, k := range []*store.IdempotencyKey{idemKey("acme", "bob", "k1", "h3", t0), idemKey("globex", "alice", "k1", "h4", t0)} {
		if got, err := s.ClaimIdempotencyKey(ctx, k, t0); err != nil || got != nil {
			t.Errorf("ClaimIdempotencyKey(%s/%s) = %+v, %v; want inserted", k.TenantID, k.Scope, got, err)
		}
	}
	if err := s.BindIdempotencyKey(ctx, "acme", "alice", "k1", "c1", "m1"); err != nil {
		t.Fatal(err)
	}
	// A bound record is not released.
	if err := s.ReleaseIdempotencyKey(ctx, "acme", "alice", "k1"); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetIdempotencyKey(ctx, "acme", "alice", "k1")
	if err != nil || got.ConversationID != "c1" || got.MessageID != "m1" {
		t.Fatalf("GetIdempotencyKey after bind = %+v, %v; want c1/m1", got, err)
	}
	if err := s.BindIdempotencyKey(ctx, "acme", "alice", "nope", "c", "m"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("BindIdempotencyKey(unknown) = %v, want ErrNotFound", err)
	}
	// An unbound claim is released and can be claimed again.
	if err := s.ReleaseIdempotencyKey(ctx, "acme", "bob", "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetIdempotencyKey(ctx, "acme", "bob", "k1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetIdempotencyKey after release = %v, want ErrNotFound", err)
	}
	// Past its window, a key is claimed anew.
	later := at(2 * time.Hour)
	fresh := idemKey("acme", "alice", "k1", "h5", later)
	if got, err := s.ClaimIdempotencyKey(ctx, fresh, later); err != nil || got != nil {
		t.Fatalf("ClaimIdempotencyKey after expiry = %+v, %v; want inserted", got, err)
	}
	got, err = s.GetIdempotencyKey(ctx, "acme", "alice", "k1")
	if err != nil || string(got.RequestHash) != "h5" || got.MessageID != "" {
		t.Fatalf("record after expiry = %+v, %v; want the new unbound claim", got, err)
	}
	// The purge deletes what expired (globex's), not what lives.
	n, err := s.PurgeIdempotencyKeys(ctx, at(90*time.Minute))
	if err != nil || n != 1 {
		t.Errorf("PurgeIdempotencyKeys = %d, %v; want 1", n, err)
	}
	if _, err := s.GetIdempotencyKey(ctx, "globex", "alice", "k1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("purged record: %v, want ErrNotFound", err)
	}
	if _, err := s.GetIdempotencyKey(ctx, "acme", "alice", "k1"); err != nil {
		t.Errorf("live record purged: %v", err)
	}
}

func testConcurrentIdempotencyClaims(t *testing.T, s store.Store) {
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted, found := 0, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.ClaimIdempotencyKey(t.Context(), idemKey("acme", "alice", "race", string(rune('a'+i)), t0), t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("ClaimIdempotencyKey: %v", err)
			case got == nil:
				inserted++
			default:
				found++
			}
		}()
	}
	wg.Wait()
	if inserted != 1 || found != n-1 {
		t.Errorf("%d concurrent claims: %d inserted, %d found; want 1 and %d", n, inserted, found, n-1)
	}
}
