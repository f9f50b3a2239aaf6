package auth

import (
	"context"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// KeyView is a key as the admin API and "firstword keys" show it: never
// its secret or hash.
type KeyView struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	Prefix    string     `json:"prefix"`
	Tenant    string     `json:"tenant"`
	User      string     `json:"user"`
	Name      string     `json:"name"`
	Admin     bool       `json:"admin"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// Key is the whole key, only in the answer that created it.
	Key string `json:"key,omitempty"`
}

// ShowKey is k's view.
func ShowKey(k *store.APIKey) KeyView {
	return KeyView{ID: k.ID, Object: "api_key", Prefix: k.Prefix, Tenant: k.TenantID, User: k.UserID, Name: k.Name,
		Admin: k.Admin, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// StoreKey stores k, whose ID, prefix and hash are set, in its tenant
// (created if new). A user of "" makes the key its own user (its
// conversations are its own); a zero creation time is now.
func StoreKey(ctx context.Context, st store.Store, k *store.APIKey) error {
	if err := EnsureTenant(ctx, st, k.TenantID, k.TenantID); err != nil {
		return err
	}
	if k.UserID == "" {
		k.UserID = k.ID
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now().UTC()
	}
	return st.CreateAPIKey(ctx, k)
}

// CreateKey stores k, whose ID is set, with a fresh secret (as StoreKey)
// and returns the whole key, to be shown once.
func CreateKey(ctx context.Context, st store.Store, k *store.APIKey) (string, error) {
	key, prefix, hash := NewKey()
	k.Prefix, k.Hash = prefix, hash
	return key, StoreKey(ctx, st, k)
}
