package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/firstword/firstword/internal/store"
)

// CreateConversation inserts c; its tenant must exist. A zero CreatedAt is
// set to now and a zero UpdatedAt to CreatedAt; c's times are updated to
// the stored values.
func (s *Store) CreateConversation(ctx context.Context, c *store.Conversation, first ...*store.Message) error {
	created, updated := store.Stamps(c.CreatedAt, c.UpdatedAt)
	op := "sqlite: create conversation " + c.ID
	err := inTx(ctx, s.w, op, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO conversations (id, tenant_id, user_id, title, model,
			created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.TenantID, c.UserID, c.Title, c.Model, created.UnixMicro(), updated.UnixMicro()); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return s.addMessages(ctx, tx, first)
	})
	if err != nil {
		return err
	}
	c.CreatedAt, c.UpdatedAt = created, store.Bumped(updated, first)
	return nil
}

func scanConversation(sc store.Scanner) (store.Conversation, error) {
	var c store.Conversation
	var created, updated int64
	err := sc.Scan(&c.ID, &c.TenantID, &c.UserID, &c.Title, &c.Model, &created, &updated)
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	return c, err
}

// GetConversation returns a tenant's conversation, or ErrNotFound.
func (s *Store) GetConversation(ctx context.Context, tenantID, id string) (*store.Conversation, error) {
	c, err := scanConversation(s.r.QueryRowContext(ctx, `SELECT `+store.ConversationColumns+`
		FROM conversations WHERE id = ? AND tenant_id = ?`, id, tenantID))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get conversation %s: %w", id, store.NotFound(err))
	}
	return &c, nil
}

// ListConversations returns a tenant's conversations (of userID, unless
// empty), most recently updated first, at most limit (so none if limit <=
// 0).
func (s *Store) ListConversations(ctx context.Context, tenantID, userID string, limit int) ([]store.Conversation, error) {
	if limit <= 0 {
		return nil, nil
	}
	q, args := `SELECT `+store.ConversationColumns+` FROM conversations WHERE tenant_id = ?
		ORDER BY updated_at DESC, id DESC LIMIT ?`, []any{tenantID, limit}
	if userID != "" {
		q = `SELECT ` + store.ConversationColumns + ` FROM conversations WHERE tenant_id = ? AND user_id = ?
			ORDER BY updated_at DESC, id DESC LIMIT ?`
		args = []any{tenantID, userID, limit}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	cs, err := collect(rows, err, scanConversation)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list conversations: %w", err)
	}
	return cs, nil
}

// DeleteConversation deletes a tenant's conversation and, by the foreign
// key's ON DELETE CASCADE, its messages. ErrNotFound if there is none.
func (s *Store) DeleteConversation(ctx context.Context, tenantID, id string) error {
	if err := affected(s.w.ExecContext(ctx, `DELETE FROM conversations WHERE id = ? AND tenant_id = ?`,
		id, tenantID)); err != nil {
		return fmt.Errorf("sqlite: delete conversation %s: %w", id, err)
	}
	return nil
}

// RenameConversation sets a tenant's conversation's title. ErrNotFound if
// there is none.
func (s *Store) RenameConversation(ctx context.Context, tenantID, id, title string) error {
	if err := affected(s.w.ExecContext(ctx, `UPDATE conversations SET title = ? WHERE id = ? AND tenant_id = ?`,
		title, id, tenantID)); err != nil {
		return fmt.Errorf("sqlite: rename conversation %s: %w", id, err)
	}
	return nil
}
