package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// CreateTenant inserts t. A zero CreatedAt is set to now; t.CreatedAt is
// updated to the stored value.
func (s *Store) CreateTenant(ctx context.Context, t *store.Tenant) error {
	created := store.Stamp(t.CreatedAt)
	if _, err := s.w.ExecContext(ctx, `INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)`,
		t.ID, t.Name, created.UnixMicro()); err != nil {
		return fmt.Errorf("sqlite: create tenant %s: %w", t.ID, err)
	}
	t.CreatedAt = created
	return nil
}

// GetTenant returns a tenant, or ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, id string) (*store.Tenant, error) {
	t := &store.Tenant{}
	var created int64
	err := s.r.QueryRowContext(ctx, `SELECT id, name, created_at FROM tenants WHERE id = ?`, id).
		Scan(&t.ID, &t.Name, &created)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get tenant %s: %w", id, store.NotFound(err))
	}
	t.CreatedAt = fromMicros(created)
	return t, nil
}

// CreateAPIKey inserts k; its tenant must exist. A zero CreatedAt is set to
// now; k's times are updated to the stored values.
func (s *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	created := store.Stamp(k.CreatedAt)
	var revoked any
	if k.RevokedAt != nil {
		r := store.Stamp(*k.RevokedAt)
		k.RevokedAt, revoked = &r, r.UnixMicro()
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO api_keys (id, tenant_id, user_id, name, prefix, hash,
		created_at, revoked_at, admin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.TenantID, k.UserID, k.Name, k.Prefix, k.Hash, created.UnixMicro(), revoked, k.Admin); err != nil {
		return fmt.Errorf("sqlite: create api key %s: %w", k.ID, err)
	}
	k.CreatedAt = created
	return nil
}

// APIKeysByPrefix returns the keys with prefix, revoked ones included.
func (s *Store) APIKeysByPrefix(ctx context.Context, prefix string) ([]store.APIKey, error) {
	keys, err := s.queryKeys(ctx, `SELECT `+store.APIKeyColumns+` FROM api_keys WHERE prefix = ? ORDER BY id`, prefix)
	if err != nil {
		return nil, fmt.Errorf("sqlite: api keys by prefix: %w", err)
	}
	return keys, nil
}

// ListAPIKeys returns the keys of tenantID ("" for all), newest first.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]store.APIKey, error) {
	q, args := `SELECT `+store.APIKeyColumns+` FROM api_keys ORDER BY created_at DESC, id DESC`, []any(nil)
	if tenantID != "" {
		q = `SELECT ` + store.APIKeyColumns + ` FROM api_keys WHERE tenant_id = ? ORDER BY created_at DESC, id DESC`
		args = []any{tenantID}
	}
	keys, err := s.queryKeys(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list api keys: %w", err)
	}
	return keys, nil
}

func (s *Store) queryKeys(ctx context.Context, q string, args ...any) ([]store.APIKey, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	return collect(rows, err, func(sc store.Scanner) (store.APIKey, error) {
		var k store.APIKey
		var created int64
		var revoked sql.NullInt64
		err := sc.Scan(&k.ID, &k.TenantID, &k.UserID, &k.Name, &k.Prefix, &k.Hash, &created, &revoked, &k.Admin)
		k.CreatedAt = fromMicros(created)
		if revoked.Valid {
			t := fromMicros(revoked.Int64)
			k.RevokedAt = &t
		}
		return k, err
	})
}

// RevokeAPIKey revokes the key whose ID is idOrPrefix, or every key whose
// prefix it is. A key keeps the earlier of its RevokedAt and at: a
// revocation scheduled for later (a rotation's grace) can be brought
// forward, never pushed back.
func (s *Store) RevokeAPIKey(ctx context.Context, idOrPrefix string, at time.Time) error {
	us := store.Stamp(at).UnixMicro()
	if err := affected(s.w.ExecContext(ctx, `UPDATE api_keys SET revoked_at = min(coalesce(revoked_at, ?), ?)
		WHERE id = ? OR prefix = ?`, us, us, idOrPrefix, idOrPrefix)); err != nil {
		return fmt.Errorf("sqlite: revoke api key %s: %w", idOrPrefix, err)
	}
	return nil
}

// CountAPIKeys counts every key, revoked ones included.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM api_keys`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count api keys: %w", err)
	}
	return n, nil
}
