package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/store"
)

// CreateTenant inserts t. A zero CreatedAt is set to now; t.CreatedAt is
// updated to the stored value.
func (s *Store) CreateTenant(ctx context.Context, t *store.Tenant) error {
	created := store.Stamp(t.CreatedAt)
	if _, err := s.pool.Exec(ctx, `INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3)`,
		t.ID, t.Name, created); err != nil {
		return fmt.Errorf("postgres: create tenant %s: %w", t.ID, err)
	}
	t.CreatedAt = created
	return nil
}

// GetTenant returns a tenant, or ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, id string) (*store.Tenant, error) {
	t := &store.Tenant{}
	err := s.pool.QueryRow(ctx, `SELECT id, name, created_at FROM tenants WHERE id = $1`, id).
		Scan(&t.ID, &t.Name, &t.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("postgres: get tenant %s: %w", id, store.NotFound(err))
	}
	return t, nil
}

// CreateAPIKey inserts k; its tenant must exist. A zero CreatedAt is set to
// now; k's times are updated to the stored values.
func (s *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	created := store.Stamp(k.CreatedAt)
	revoked := k.RevokedAt
	if revoked != nil {
		r := store.Stamp(*revoked)
		revoked = &r
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO api_keys (id, tenant_id, user_id, name, prefix, hash,
		created_at, revoked_at, admin) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		k.ID, k.TenantID, k.UserID, k.Name, k.Prefix, k.Hash, created, revoked, k.Admin); err != nil {
		return fmt.Errorf("postgres: create api key %s: %w", k.ID, err)
	}
	k.CreatedAt, k.RevokedAt = created, revoked
	return nil
}

// APIKeysByPrefix returns the keys with prefix, revoked ones included.
func (s *Store) APIKeysByPrefix(ctx context.Context, prefix string) ([]store.APIKey, error) {
	keys, err := s.queryKeys(ctx, `SELECT `+store.APIKeyColumns+` FROM api_keys WHERE prefix = $1 ORDER BY id`, prefix)
	if err != nil {
		return nil, fmt.Errorf("postgres: api keys by prefix: %w", err)
	}
	return keys, nil
}

// ListAPIKeys returns the keys of tenantID ("" for all), newest first.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]store.APIKey, error) {
	q, args := `SELECT `+store.APIKeyColumns+` FROM api_keys ORDER BY created_at DESC, id DESC`, []any(nil)
	if tenantID != "" {
		q = `SELECT ` + store.APIKeyColumns + ` FROM api_keys WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC`
		args = []any{tenantID}
	}
	keys, err := s.queryKeys(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list api keys: %w", err)
	}
	return keys, nil
}

func (s *Store) queryKeys(ctx context.Context, q string, args ...any) ([]store.APIKey, error) {
	rows, _ := s.pool.Query(ctx, q, args...) // CollectRows reports the error
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.APIKey, error) {
		var k store.APIKey
		err := row.Scan(&k.ID, &k.TenantID, &k.UserID, &k.Name, &k.Prefix, &k.Hash, &k.CreatedAt, &k.RevokedAt, &k.Admin)
		return k, err
	})
	if len(keys) == 0 {
		keys = nil
	}
	return keys, err
}

// RevokeAPIKey revokes the key whose ID is idOrPrefix, or every key whose
// prefix it is. A key keeps the earlier of its RevokedAt and at: a
// revocation scheduled for later (a rotation's grace) can be brought
// forward, never pushed back.
func (s *Store) RevokeAPIKey(ctx context.Context, idOrPrefix string, at time.Time) error {
	if err := affected(s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = least(coalesce(revoked_at, $1), $1)
		WHERE id = $2 OR prefix = $2`, store.Stamp(at), idOrPrefix)); err != nil {
		return fmt.Errorf("postgres: revoke api key %s: %w", idOrPrefix, err)
	}
	return nil
}

// CountAPIKeys counts every key, revoked ones included.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM api_keys`).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count api keys: %w", err)
	}
	return n, nil
}
