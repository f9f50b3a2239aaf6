package auth

import (
	"context"
	"testing"

	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/store/sqlite"
)

// TestCreateKey: a created key is stored in its new tenant, is its own
// user unless given one, authenticates, and shows without its secret.
func TestCreateKey(t *testing.T) {
	st, err := sqlite.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	k := &store.APIKey{ID: "key_1", TenantID: "acme", Name: "app", Admin: true}
	key, err := CreateKey(ctx, st, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetTenant(ctx, "acme"); err != nil {
		t.Errorf("the tenant was not created: %v", err)
	}
	if k.UserID != "key_1" || k.CreatedAt.IsZero() || k.Prefix == "" {
		t.Errorf("stored %+v, want its own user, a creation time and a prefix", k)
	}
	a := New(st, ttl)
	defer a.Close()
	if p, err := a.Authenticate(ctx, "Bearer "+key, ""); err != nil || p.TenantID != "acme" || !p.Admin {
		t.Errorf("Authenticate(the created key) = %+v, %v", p, err)
	}
	v := ShowKey(k)
	if v.Key != "" || v.Tenant != "acme" || v.User != "key_1" || v.Object != "api_key" {
		t.Errorf("ShowKey = %+v", v)
	}
	u := &store.APIKey{ID: "key_2", TenantID: "acme", UserID: "ann"}
	if _, err := CreateKey(ctx, st, u); err != nil || u.UserID != "ann" {
		t.Errorf("a key with a user: %+v, %v", u, err)
	}
}
