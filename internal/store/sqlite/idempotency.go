package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// ClaimIdempotencyKey inserts k unless a live record of its key exists,
// which it returns. The single writer connection serializes claims.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, k *store.IdempotencyKey, now time.Time) (*store.IdempotencyKey, error) {
	created := store.Stamp(k.CreatedAt)
	const op = "sqlite: claim idempotency key"
	var existing *store.IdempotencyKey
	err := inTx(ctx, s.w, op, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE tenant_id = ? AND scope = ? AND key = ? AND expires_at <= ?`,
			k.TenantID, k.Scope, k.Key, now.UnixMicro()); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		n, err := changed(tx.ExecContext(ctx, `INSERT INTO idempotency_keys (`+store.IdempotencyColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			k.TenantID, k.Scope, k.Key, k.RequestHash, k.ConversationID, k.MessageID, created.UnixMicro(), store.Stamp(k.ExpiresAt).UnixMicro()))
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if n == 0 {
			existing, err = scanIdempotencyKey(tx.QueryRowContext(ctx, `SELECT `+store.IdempotencyColumns+` FROM idempotency_keys
				WHERE tenant_id = ? AND scope = ? AND key = ?`, k.TenantID, k.Scope, k.Key))
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if existing == nil {
		k.CreatedAt, k.ExpiresAt = created, store.Stamp(k.ExpiresAt)
	}
	return existing, nil
}

func scanIdempotencyKey(row *sql.Row) (*store.IdempotencyKey, error) {
	k := &store.IdempotencyKey{}
	var created, expires int64
	if err := row.Scan(&k.TenantID, &k.Scope, &k.Key, &k.RequestHash, &k.ConversationID, &k.MessageID, &created, &expires); err != nil {
		return nil, store.NotFound(err)
	}
	k.CreatedAt, k.ExpiresAt = fromMicros(created), fromMicros(expires)
	return k, nil
}

// GetIdempotencyKey returns a record, or ErrNotFound.
func (s *Store) GetIdempotencyKey(ctx context.Context, tenantID, scope, key string) (*store.IdempotencyKey, error) {
	k, err := scanIdempotencyKey(s.r.QueryRowContext(ctx, `SELECT `+store.IdempotencyColumns+` FROM idempotency_keys
		WHERE tenant_id = ? AND scope = ? AND key = ?`, tenantID, scope, key))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get idempotency key: %w", err)
	}
	return k, nil
}

// BindIdempotencyKey records the turn a claimed key created.
func (s *Store) BindIdempotencyKey(ctx context.Context, tenantID, scope, key, conversationID, messageID string) error {
	if err := affected(s.w.ExecContext(ctx, `UPDATE idempotency_keys SET conversation_id = ?, message_id = ?
		WHERE tenant_id = ? AND scope = ? AND key = ?`, conversationID, messageID, tenantID, scope, key)); err != nil {
		return fmt.Errorf("sqlite: bind idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey deletes an unbound claim.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, tenantID, scope, key string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE tenant_id = ? AND scope = ? AND key = ?
		AND message_id = ''`, tenantID, scope, key); err != nil {
		return fmt.Errorf("sqlite: release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotencyKeys deletes the records expired by before.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int, error) {
	n, err := changed(s.w.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, before.UnixMicro()))
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge idempotency keys: %w", err)
	}
	return int(n), nil
}
