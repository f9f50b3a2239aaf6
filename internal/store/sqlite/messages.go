package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// AddMessages appends ms, in order and in one transaction, to their
// conversation, which must be their TenantID's, or ErrNotFound. It sets
// each m.Seq; a zero CreatedAt is set to now and a zero UpdatedAt to
// CreatedAt, and the times are updated to the stored values. The
// conversation's UpdatedAt becomes the latest CreatedAt unless it is later.
func (s *Store) AddMessages(ctx context.Context, ms ...*store.Message) error {
	if len(ms) == 0 {
		return nil
	}
	return inTx(ctx, s.w, "sqlite: add messages", func(tx *sql.Tx) error { return s.addMessages(ctx, tx, ms) })
}

// addMessages inserts ms in tx and, if it commits, their fields are right.
func (s *Store) addMessages(ctx context.Context, tx *sql.Tx, ms []*store.Message) error {
	for _, m := range ms {
		created, updated := store.Stamps(m.CreatedAt, m.UpdatedAt)
		// The conversation row carries the last Seq: taking the next one,
		// the tenant check and the UpdatedAt bump are one statement.
		var seq int
		err := tx.StmtContext(ctx, s.bumpConversation).QueryRowContext(ctx,
			created.UnixMicro(), m.ConversationID, m.TenantID).Scan(&seq)
		err = store.NotFound(err)
		if err == nil {
			_, err = tx.StmtContext(ctx, s.insertMessage).ExecContext(ctx,
				m.ID, m.ConversationID, m.TenantID, seq, m.Role, m.Content, string(m.Status), m.FinishReason,
				m.Model, m.Deployment, m.InputTokens, m.OutputTokens, m.CachedTokens, m.Estimated, m.Cost,
				jsonText(m.Timings), jsonText(m.Meta), m.ErrorCode, m.ErrorMessage,
				created.UnixMicro(), updated.UnixMicro(), jsonText(m.Thinking))
		}
		if err != nil {
			return fmt.Errorf("sqlite: add message %s: %w", m.ID, err)
		}
		m.Seq, m.CreatedAt, m.UpdatedAt = seq, created, updated
	}
	return nil
}

// CheckpointMessage saves content, thinking and outputTokens of a message that is
// still streaming; for one that is not, it does nothing. ErrNotFound if
// there is no message id.
func (s *Store) CheckpointMessage(ctx context.Context, id, content string, thinking []byte, outputTokens int, at time.Time) error {
	err := affected(s.checkpoint.ExecContext(ctx, content, jsonText(thinking), outputTokens, store.Stamp(at).UnixMicro(), id))
	if errors.Is(err, store.ErrNotFound) {
		// Rare: a late checkpoint after the finish (fine) or a bad ID.
		err = store.NotFound(s.r.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE id = ?`, id).Scan(new(int)))
	}
	if err != nil {
		return fmt.Errorf("sqlite: checkpoint message %s: %w", id, err)
	}
	return nil
}

// FinishMessage writes m's final state (every field but its identity,
// Seq, Role and CreatedAt) to the message m.ID of m.TenantID, or returns
// ErrNotFound. A zero UpdatedAt is set to now; m.UpdatedAt is updated to the
// stored value.
func (s *Store) FinishMessage(ctx context.Context, m *store.Message) error {
	updated := store.Stamp(m.UpdatedAt)
	if err := affected(s.finish.ExecContext(ctx, string(m.Status), m.Content, m.FinishReason, m.Model,
		m.Deployment, m.InputTokens, m.OutputTokens, m.CachedTokens, m.Estimated, m.Cost,
		jsonText(m.Timings), jsonText(m.Meta), jsonText(m.Thinking), m.ErrorCode, m.ErrorMessage, updated.UnixMicro(),
		m.ID, m.TenantID)); err != nil {
		return fmt.Errorf("sqlite: finish message %s: %w", m.ID, err)
	}
	m.UpdatedAt = updated
	return nil
}

// ListMessages returns a tenant's conversation's messages ordered by Seq;
// none for another tenant's conversation.
func (s *Store) ListMessages(ctx context.Context, tenantID, conversationID string) ([]store.Message, error) {
	ms, err := queryMessages(s.listMessages.QueryContext(ctx, conversationID, tenantID))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list messages: %w", err)
	}
	return ms, nil
}

// DeleteMessages deletes a tenant's messages ids.
func (s *Store) DeleteMessages(ctx context.Context, tenantID string, ids ...string) (int, error) {
	total := 0
	for _, id := range ids {
		n, err := changed(s.w.ExecContext(ctx, `DELETE FROM messages WHERE id = ? AND tenant_id = ?`, id, tenantID))
		if err != nil {
			return total, fmt.Errorf("sqlite: delete message %s: %w", id, err)
		}
		total += int(n)
	}
	return total, nil
}

// GetMessage returns message id, whatever its tenant.
func (s *Store) GetMessage(ctx context.Context, id string) (*store.Message, error) {
	ms, err := queryMessages(s.r.QueryContext(ctx, `SELECT `+store.MessageColumns+` FROM messages WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get message %s: %w", id, err)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("sqlite: get message %s: %w", id, store.ErrNotFound)
	}
	return &ms[0], nil
}

// LastMessages returns the last n messages of a tenant's conversation,
// oldest first; none for another tenant's conversation.
func (s *Store) LastMessages(ctx context.Context, tenantID, conversationID string, n int) ([]store.Message, error) {
	if n <= 0 {
		return nil, nil
	}
	ms, err := queryMessages(s.lastMessages.QueryContext(ctx, conversationID, tenantID, n))
	if err != nil {
		return nil, fmt.Errorf("sqlite: last messages: %w", err)
	}
	slices.Reverse(ms)
	return ms, nil
}

func queryMessages(rows *sql.Rows, err error) ([]store.Message, error) {
	return collect(rows, err, func(sc store.Scanner) (store.Message, error) {
		var m store.Message
		var status string
		var created, updated int64
		err := sc.Scan(&m.ID, &m.ConversationID, &m.TenantID, &m.Seq, &m.Role, &m.Content,
			&status, &m.FinishReason, &m.Model, &m.Deployment, &m.InputTokens, &m.OutputTokens,
			&m.CachedTokens, &m.Estimated, &m.Cost, &m.Timings, &m.Meta, &m.ErrorCode,
			&m.ErrorMessage, &created, &updated, &m.Thinking)
		m.Status = store.Status(status)
		m.CreatedAt, m.UpdatedAt = fromMicros(created), fromMicros(updated)
		return m, err
	})
}

// StaleStreaming returns streaming messages not written since
// staleBefore, oldest first.
func (s *Store) StaleStreaming(ctx context.Context, staleBefore time.Time, limit int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM messages WHERE status = 'streaming' AND updated_at < ?
		ORDER BY updated_at LIMIT ?`, staleBefore.UTC().UnixMicro(), limit)
	ids, err := collect(rows, err, func(sc store.Scanner) (id string, err error) {
		err = sc.Scan(&id)
		return id, err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: stale streaming: %w", err)
	}
	return ids, nil
}

// ReopenMessage marks message id streaming if its writer was lost.
func (s *Store) ReopenMessage(ctx context.Context, id string, at time.Time) (bool, error) {
	n, err := changed(s.w.ExecContext(ctx, `UPDATE messages SET status = 'streaming', updated_at = ?
		WHERE id = ? AND status = 'interrupted' AND error_code = ''`, store.Stamp(at).UnixMicro(), id))
	if err != nil {
		return false, fmt.Errorf("sqlite: reopen message %s: %w", id, err)
	}
	return n == 1, nil
}

// InterruptMessage marks message id interrupted if it is streaming.
func (s *Store) InterruptMessage(ctx context.Context, id string, content *string, outputTokens int, at time.Time) (bool, error) {
	n, err := changed(s.w.ExecContext(ctx, `UPDATE messages SET status = 'interrupted', updated_at = ?,
		content = COALESCE(?, content), output_tokens = CASE WHEN ? IS NULL THEN output_tokens ELSE ? END
		WHERE id = ? AND status = 'streaming'`, store.Stamp(at).UnixMicro(), content, content, outputTokens, id))
	if err != nil {
		return false, fmt.Errorf("sqlite: interrupt message %s: %w", id, err)
	}
	return n == 1, nil
}

// InterruptStreaming marks streaming messages not written since
// staleBefore interrupted, keeping their last checkpoint.
func (s *Store) InterruptStreaming(ctx context.Context, staleBefore, at time.Time) (int, error) {
	n, err := changed(s.w.ExecContext(ctx, `UPDATE messages SET status = 'interrupted', updated_at = ?
		WHERE status = 'streaming' AND updated_at < ?`, store.Stamp(at).UnixMicro(), staleBefore.UTC().UnixMicro()))
	if err != nil {
		return 0, fmt.Errorf("sqlite: interrupt streaming: %w", err)
	}
	return int(n), nil
}
