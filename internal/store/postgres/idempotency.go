package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// ClaimIdempotencyKey inserts k unless a live record of its key exists,
// which it returns. Concurrent inserts of one key wait on the primary
// key: one inserts, the others read its record.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, k *store.IdempotencyKey, now time.Time) (*store.IdempotencyKey, error) {
	created, expires := store.Stamp(k.CreatedAt), store.Stamp(k.ExpiresAt)
	// A record can expire and be deleted between the insert and the
	// read: then claim again.
	for range 3 {
		if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE tenant_id = $1 AND scope = $2 AND key = $3
			AND expires_at <= $4`, k.TenantID, k.Scope, k.Key, now); err != nil {
			return nil, fmt.Errorf("postgres: claim idempotency key: %w", err)
		}
		tag, err := s.pool.Exec(ctx, `INSERT INTO idempotency_keys (`+store.IdempotencyColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
			k.TenantID, k.Scope, k.Key, k.RequestHash, k.ConversationID, k.MessageID, created, expires)
		if err != nil {
			return nil, fmt.Errorf("postgres: claim idempotency key: %w", err)
		}
		if tag.RowsAffected() == 1 {
			k.CreatedAt, k.ExpiresAt = created, expires
			return nil, nil
		}
		existing, err := s.GetIdempotencyKey(ctx, k.TenantID, k.Scope, k.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		return existing, err
	}
	return nil, fmt.Errorf("postgres: claim idempotency key: the record kept changing")
}

// GetIdempotencyKey returns a record, or ErrNotFound.
func (s *Store) GetIdempotencyKey(ctx context.Context, tenantID, scope, key string) (*store.IdempotencyKey, error) {
	k := &store.IdempotencyKey{}
	err := s.pool.QueryRow(ctx, `SELECT `+store.IdempotencyColumns+` FROM idempotency_keys
		WHERE tenant_id = $1 AND scope = $2 AND key = $3`, tenantID, scope, key).
		Scan(&k.TenantID, &k.Scope, &k.Key, &k.RequestHash, &k.ConversationID, &k.MessageID, &k.CreatedAt, &k.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("postgres: get idempotency key: %w", store.NotFound(err))
	}
	k.CreatedAt, k.ExpiresAt = k.CreatedAt.UTC(), k.ExpiresAt.UTC()
	return k, nil
}

// BindIdempotencyKey records the turn a claimed key created.
func (s *Store) BindIdempotencyKey(ctx context.Context, tenantID, scope, key, conversationID, messageID string) error {
	if err := affected(s.pool.Exec(ctx, `UPDATE idempotency_keys SET conversation_id = $1, message_id = $2
		WHERE tenant_id = $3 AND scope = $4 AND key = $5`, conversationID, messageID, tenantID, scope, key)); err != nil {
		return fmt.Errorf("postgres: bind idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey deletes an unbound claim.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, tenantID, scope, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE tenant_id = $1 AND scope = $2 AND key = $3
		AND message_id = ''`, tenantID, scope, key); err != nil {
		return fmt.Errorf("postgres: release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotencyKeys deletes the records expired by before.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1`, before)
	if err != nil {
		return 0, fmt.Errorf("postgres: purge idempotency keys: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
