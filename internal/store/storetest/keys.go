package storetest

import (
	"testing"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// testRevokeLater: a revocation scheduled for later (a rotation's grace)
// can be brought forward and never pushed back.
func testRevokeLater(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.CreateTenant(ctx, &store.Tenant{ID: "acme", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	k := store.APIKey{ID: "k1", TenantID: "acme", UserID: "u", Prefix: "pppppppp", Hash: []byte("h"), CreatedAt: t0}
	if err := s.CreateAPIKey(ctx, &k); err != nil {
		t.Fatal(err)
	}
	revokedAt := func() time.Time {
		t.Helper()
		keys, err := s.APIKeysByPrefix(ctx, "pppppppp")
		if err != nil || len(keys) != 1 || keys[0].RevokedAt == nil {
			t.Fatalf("APIKeysByPrefix = %+v, %v; want one revoked key", keys, err)
		}
		return *keys[0].RevokedAt
	}
	for _, step := range []struct {
		revoke, want time.Time
	}{
		{at(time.Hour), at(time.Hour)},          // scheduled
		{at(2 * time.Hour), at(time.Hour)},      // not pushed back
		{at(time.Minute), at(time.Minute)},      // brought forward
		{at(30 * time.Minute), at(time.Minute)}, // the earlier stays
	} {
		if err := s.RevokeAPIKey(ctx, "k1", step.revoke); err != nil {
			t.Fatal(err)
		}
		if got := revokedAt(); !got.Equal(step.want) {
			t.Errorf("RevokeAPIKey(%v): revoked at %v, want %v", step.revoke, got, step.want)
		}
	}
}
