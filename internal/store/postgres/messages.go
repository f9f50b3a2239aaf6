package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/store"
)

// AddMessages appends ms, in order, to their conversation (all to the
// same one), which must be their TenantID's, or ErrNotFound. It sets each
// m.Seq; a zero CreatedAt is set to now and a zero UpdatedAt to
// CreatedAt, and m's times are updated to the stored values. The
// conversation's UpdatedAt becomes the latest m.CreatedAt unless it is
// later. One statement (see appendMessages): one row updated, whatever
// the number of messages.
func (s *Store) AddMessages(ctx context.Context, ms ...*store.Message) error {
	if len(ms) == 0 {
		return nil
	}
	if err := appendMessages(ctx, s.pool, nil, ms); err != nil {
		return fmt.Errorf("postgres: add messages %s: %w", ms[0].ID, err)
	}
	return nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// messageValue is one message's row in appendMessages's VALUES list:
// the parameters' types (a parameter in a SELECT list would default to
// text), and its place among the messages appended (%d) where the Seq
// goes.
var messageValue = func() string {
	types := []string{"text", "text", "text", "%d", "text", "text", "text", "text", "text", "text", "bigint", "bigint", "bigint",
		"boolean", "double precision", "json", "json", "text", "text", "timestamptz", "timestamptz", "json"}
	var b strings.Builder
	b.WriteString("(")
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		if t == "%d" {
			b.WriteString("%d")
			continue
		}
		b.WriteString("$%d::" + t)
	}
	b.WriteString(")")
	return b.String()
}()

// messageArgs is how many parameters one message takes.
const messageArgs = 21

// appendMessages writes ms, all to one conversation, in one statement,
// as their tenant's (no conversation of it: no row, ErrNotFound). The
// conversation's row gives them their Seqs: with conv (new, created
// at, updated at the times given), the statement inserts it with its
// last Seq; otherwise it updates the stored one once for all of ms,
// taking the next Seqs, checking the tenant and bumping updated_at,
// and that row lock serialises concurrent appends to one conversation.
// Atomic without a transaction: a failed statement writes nothing. So a
// turn (its user message and the answer's placeholder) is one insert
// per row and at most one update.
func appendMessages(ctx context.Context, q querier, conv *store.Conversation, ms []*store.Message) error {
	n := len(ms)
	args := make([]any, 0, n*messageArgs+8)
	arg := func(v any) int {
		args = append(args, v)
		return len(args)
	}
	var latest time.Time
	created := make([]time.Time, n)
	updated := make([]time.Time, n)
	for i, m := range ms {
		if m.ConversationID != ms[0].ConversationID || m.TenantID != ms[0].TenantID {
			return errors.New("messages of more than one conversation")
		}
		created[i], updated[i] = store.Stamps(m.CreatedAt, m.UpdatedAt)
		if created[i].After(latest) {
			latest = created[i]
		}
	}
	var head string
	if conv != nil {
		if latest.After(conv.UpdatedAt) {
			conv.UpdatedAt = latest
		}
		head = fmt.Sprintf(`INSERT INTO conversations (id, tenant_id, user_id, title, model, created_at, updated_at, last_seq)
			VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d, %d) RETURNING last_seq`,
			arg(conv.ID), arg(conv.TenantID), arg(conv.UserID), arg(conv.Title), arg(conv.Model), arg(conv.CreatedAt), arg(conv.UpdatedAt), n)
		if n == 0 {
			rows, _ := q.Query(ctx, head, args...)
			rows.Close()
			return rows.Err()
		}
	} else {
		head = fmt.Sprintf(`UPDATE conversations SET last_seq = last_seq + %d, updated_at = greatest(updated_at, $%d::timestamptz)
			WHERE id = $%d AND tenant_id = $%d RETURNING last_seq`, n, arg(latest), arg(ms[0].ConversationID), arg(ms[0].TenantID))
	}
	values := make([]string, n)
	for i, m := range ms {
		values[i] = fmt.Sprintf(messageValue, arg(m.ID), arg(m.ConversationID), arg(m.TenantID), i+1, arg(m.Role), arg(m.Content),
			arg(string(m.Status)), arg(m.FinishReason), arg(m.Model), arg(m.Deployment), arg(m.InputTokens), arg(m.OutputTokens),
			arg(m.CachedTokens), arg(m.Estimated), arg(m.Cost), arg(jsonArg(m.Timings)), arg(jsonArg(m.Meta)), arg(m.ErrorCode),
			arg(m.ErrorMessage), arg(created[i]), arg(updated[i]), arg(jsonArg(m.Thinking)))
	}
	sql := `WITH c AS (` + head + `)
		INSERT INTO messages (` + store.MessageColumns + `)
		SELECT v.id, v.conversation_id, v.tenant_id, c.last_seq - ` + strconv.Itoa(n) + ` + v.ord, v.role, v.content, v.status,
			v.finish_reason, v.model, v.deployment, v.input_tokens, v.output_tokens, v.cached_tokens, v.estimated, v.cost,
			v.timings, v.meta, v.error_code, v.error_message, v.created_at, v.updated_at, v.thinking
		FROM c, (VALUES ` + strings.Join(values, ", ") + `) AS v (id, conversation_id, tenant_id, ord, role, content, status,
			finish_reason, model, deployment, input_tokens, output_tokens, cached_tokens, estimated, cost,
			timings, meta, error_code, error_message, created_at, updated_at, thinking)
		RETURNING id, seq`
	rows, _ := q.Query(ctx, sql, args...)
	seqs := map[string]int{}
	var id string
	var seq int
	if _, err := pgx.ForEachRow(rows, []any{&id, &seq}, func() error {
		seqs[id] = seq
		return nil
	}); err != nil {
		return err
	}
	if len(seqs) != n {
		// No conversation of this tenant: the UPDATE found no row.
		return store.ErrNotFound
	}
	for i, m := range ms {
		m.Seq, m.CreatedAt, m.UpdatedAt = seqs[m.ID], created[i], updated[i]
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
