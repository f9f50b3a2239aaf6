package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/store"
)

// addMessage takes the next Seq from the conversation row, checking the
// tenant and bumping updated_at, and inserts the message, in one statement:
// atomic without a transaction, and the UPDATE's row lock serialises
// concurrent appends to one conversation. No conversation, no row.
// Parameters in a SELECT list default to text, hence the casts.
const addMessage = `WITH c AS (
	UPDATE conversations SET last_seq = last_seq + 1, updated_at = greatest(updated_at, $19)
	WHERE id = $2 AND tenant_id = $3 RETURNING last_seq)
INSERT INTO messages (` + store.MessageColumns + `)
SELECT $1, $2, $3, c.last_seq, $4, $5, $6, $7, $8, $9, $10::bigint, $11::bigint, $12::bigint,
	$13::boolean, $14::double precision, $15::json, $16::json, $17, $18, $19, $20::timestamptz, $21::json
FROM c RETURNING seq`

// AddMessage appends m to its conversation, which must be m.TenantID's, or
// ErrNotFound. It sets m.Seq; a zero CreatedAt is set to now and a zero
// UpdatedAt to CreatedAt, and m's times are updated to the stored values.
// The conversation's UpdatedAt becomes m.CreatedAt unless it is later.
func (s *Store) AddMessages(ctx context.Context, ms ...*store.Message) error {
	switch len(ms) {
	case 0:
		return nil
	case 1:
		// One statement is its own transaction.
		return addMessages(ctx, s.pool, ms)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return addMessages(ctx, tx, ms) })
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func addMessages(ctx context.Context, q querier, ms []*store.Message) error {
	for _, m := range ms {
		created, updated := store.Stamps(m.CreatedAt, m.UpdatedAt)
		var seq int
		if err := q.QueryRow(ctx, addMessage, m.ID, m.ConversationID, m.TenantID, m.Role, m.Content,
			string(m.Status), m.FinishReason, m.Model, m.Deployment, m.InputTokens, m.OutputTokens,
			m.CachedTokens, m.Estimated, m.Cost, jsonArg(m.Timings), jsonArg(m.Meta), m.ErrorCode,
			m.ErrorMessage, created, updated, jsonArg(m.Thinking)).Scan(&seq); err != nil {
			return fmt.Errorf("postgres: add message %s: %w", m.ID, store.NotFound(err))
		}
		m.Seq, m.CreatedAt, m.UpdatedAt = seq, created, updated
	}
	return nil
}

// CheckpointMessage saves content, thinking and outputTokens of a message that is
// still streaming; for one that is not, it does nothing. ErrNotFound if
// there is no message id.
func (s *Store) CheckpointMessage(ctx context.Context, id, content string, thinking []byte, outputTokens int, at time.Time) error {
	err := affected(s.pool.Exec(ctx, `UPDATE messages SET content = $1, output_tokens = $2, updated_at = $3,
		thinking = $5 WHERE id = $4 AND status = 'streaming'`, content, outputTokens, store.Stamp(at), id, jsonArg(thinking)))
	if errors.Is(err, store.ErrNotFound) {
		// Rare: a late checkpoint after the finish (fine) or a bad ID.
		err = store.NotFound(s.pool.QueryRow(ctx, `SELECT 1 FROM messages WHERE id = $1`, id).Scan(new(int)))
	}
	if err != nil {
		return fmt.Errorf("postgres: checkpoint message %s: %w", id, err)
	}
	return nil
}

// FinishMessage writes m's final state (every field but its identity,
// Seq, Role and CreatedAt) to the message m.ID of m.TenantID, or returns
// ErrNotFound. A zero UpdatedAt is set to now; m.UpdatedAt is updated to the
// stored value.
func (s *Store) FinishMessage(ctx context.Context, m *store.Message) error {
	updated := store.Stamp(m.UpdatedAt)
	if err := affected(s.pool.Exec(ctx, `UPDATE messages SET status = $1, content = $2,
		finish_reason = $3, model = $4, deployment = $5, input_tokens = $6, output_tokens = $7,
		cached_tokens = $8, estimated = $9, cost = $10, timings = $11, meta = $12, error_code = $13,
		error_message = $14, updated_at = $15, thinking = $18 WHERE id = $16 AND tenant_id = $17`,
		string(m.Status), m.Content, m.FinishReason, m.Model, m.Deployment, m.InputTokens,
		m.OutputTokens, m.CachedTokens, m.Estimated, m.Cost, jsonArg(m.Timings), jsonArg(m.Meta),
		m.ErrorCode, m.ErrorMessage, updated, m.ID, m.TenantID, jsonArg(m.Thinking))); err != nil {
		return fmt.Errorf("postgres: finish message %s: %w", m.ID, err)
	}
	m.UpdatedAt = updated
	return nil
}

// ListMessages returns a tenant's conversation's messages ordered by Seq;
// none for another tenant's conversation.
func (s *Store) ListMessages(ctx context.Context, tenantID, conversationID string) ([]store.Message, error) {
	ms, err := s.queryMessages(ctx, `SELECT `+store.MessageColumns+` FROM messages
		WHERE conversation_id = $1 AND tenant_id = $2 ORDER BY seq`, conversationID, tenantID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list messages: %w", err)
	}
	return ms, nil
}

// LastMessages returns the last n messages of a tenant's conversation,
// oldest first; none for another tenant's conversation.
func (s *Store) LastMessages(ctx context.Context, tenantID, conversationID string, n int) ([]store.Message, error) {
	if n <= 0 {
		return nil, nil
	}
	ms, err := s.queryMessages(ctx, `SELECT `+store.MessageColumns+` FROM messages
		WHERE conversation_id = $1 AND tenant_id = $2 ORDER BY seq DESC LIMIT $3`, conversationID, tenantID, n)
	if err != nil {
		return nil, fmt.Errorf("postgres: last messages: %w", err)
	}
	slices.Reverse(ms)
	return ms, nil
}

// DeleteMessages deletes a tenant's messages ids.
func (s *Store) DeleteMessages(ctx context.Context, tenantID string, ids ...string) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM messages WHERE id = ANY($1) AND tenant_id = $2`, ids, tenantID)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete messages: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// GetMessage returns message id, whatever its tenant.
func (s *Store) GetMessage(ctx context.Context, id string) (*store.Message, error) {
	ms, err := s.queryMessages(ctx, `SELECT `+store.MessageColumns+` FROM messages WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("postgres: get message %s: %w", id, err)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("postgres: get message %s: %w", id, store.ErrNotFound)
	}
	return &ms[0], nil
}

func (s *Store) queryMessages(ctx context.Context, q string, args ...any) ([]store.Message, error) {
	rows, _ := s.pool.Query(ctx, q, args...) // CollectRows reports the error
	ms, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Message, error) {
		var m store.Message
		err := row.Scan(&m.ID, &m.ConversationID, &m.TenantID, &m.Seq, &m.Role, &m.Content,
			&m.Status, &m.FinishReason, &m.Model, &m.Deployment, &m.InputTokens, &m.OutputTokens,
			&m.CachedTokens, &m.Estimated, &m.Cost, &m.Timings, &m.Meta, &m.ErrorCode,
			&m.ErrorMessage, &m.CreatedAt, &m.UpdatedAt, &m.Thinking)
		return m, err
	})
	if len(ms) == 0 {
		ms = nil
	}
	return ms, err
}

// StaleStreaming returns streaming messages not written since
// staleBefore, oldest first.
func (s *Store) StaleStreaming(ctx context.Context, staleBefore time.Time, limit int) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM messages WHERE status = 'streaming' AND updated_at < $1
		ORDER BY updated_at LIMIT $2`, staleBefore.UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: stale streaming: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: stale streaming: %w", err)
	}
	return ids, nil
}

// ReopenMessage marks message id streaming if its writer was lost.
func (s *Store) ReopenMessage(ctx context.Context, id string, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE messages SET status = 'streaming', updated_at = $1
		WHERE id = $2 AND status = 'interrupted' AND error_code = ''`, store.Stamp(at), id)
	if err != nil {
		return false, fmt.Errorf("postgres: reopen message %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// InterruptMessage marks message id interrupted if it is streaming.
func (s *Store) InterruptMessage(ctx context.Context, id string, content *string, outputTokens int, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE messages SET status = 'interrupted', updated_at = $1,
		content = COALESCE($2, content), output_tokens = CASE WHEN $2::text IS NULL THEN output_tokens ELSE $3 END
		WHERE id = $4 AND status = 'streaming'`, store.Stamp(at), content, outputTokens, id)
	if err != nil {
		return false, fmt.Errorf("postgres: interrupt message %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// InterruptStreaming marks streaming messages not written since
// staleBefore interrupted, keeping their last checkpoint.
func (s *Store) InterruptStreaming(ctx context.Context, staleBefore, at time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE messages SET status = 'interrupted', updated_at = $1
		WHERE status = 'streaming' AND updated_at < $2`, store.Stamp(at), staleBefore.UTC())
	if err != nil {
		return 0, fmt.Errorf("postgres: interrupt streaming: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
