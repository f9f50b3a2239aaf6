package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/store"
)

// CreateConversation inserts c, and first (see AddMessages), in one
// statement; its tenant must exist. A zero CreatedAt is set to now and a
// zero UpdatedAt to CreatedAt; c's times are updated to the stored
// values (UpdatedAt: the latest of first's CreatedAt, if later).
func (s *Store) CreateConversation(ctx context.Context, c *store.Conversation, first ...*store.Message) error {
	stored := *c
	stored.CreatedAt, stored.UpdatedAt = store.Stamps(c.CreatedAt, c.UpdatedAt)
	if err := appendMessages(ctx, s.pool, &stored, first); err != nil {
		return fmt.Errorf("postgres: create conversation %s: %w", c.ID, err)
	}
	c.CreatedAt, c.UpdatedAt = stored.CreatedAt, stored.UpdatedAt
	return nil
}

func scanConversation(row store.Scanner) (store.Conversation, error) {
	var c store.Conversation
	err := row.Scan(&c.ID, &c.TenantID, &c.UserID, &c.Title, &c.Model, &c.CreatedAt, &c.UpdatedAt)
	return c, err
}

// GetConversation returns a tenant's conversation, or ErrNotFound.
func (s *Store) GetConversation(ctx context.Context, tenantID, id string) (*store.Conversation, error) {
	c, err := scanConversation(s.pool.QueryRow(ctx, `SELECT `+store.ConversationColumns+`
		FROM conversations WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if err != nil {
		return nil, fmt.Errorf("postgres: get conversation %s: %w", id, store.NotFound(err))
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
	q, args := `SELECT `+store.ConversationColumns+` FROM conversations WHERE tenant_id = $1
		ORDER BY updated_at DESC, id DESC LIMIT $2`, []any{tenantID, limit}
	if userID != "" {
		q = `SELECT ` + store.ConversationColumns + ` FROM conversations WHERE tenant_id = $1 AND user_id = $2
			ORDER BY updated_at DESC, id DESC LIMIT $3`
		args = []any{tenantID, userID, limit}
	}
	rows, _ := s.pool.Query(ctx, q, args...) // CollectRows reports the error
	cs, err := pgx.CollectRows(rows, rowTo(scanConversation))
	if err != nil {
		return nil, fmt.Errorf("postgres: list conversations: %w", err)
	}
	if len(cs) == 0 {
		return nil, nil
	}
	return cs, nil
}

// DeleteConversation deletes a tenant's conversation and, by the foreign
// key's ON DELETE CASCADE, its messages. ErrNotFound if there is none.
func (s *Store) DeleteConversation(ctx context.Context, tenantID, id string) error {
	if err := affected(s.pool.Exec(ctx, `DELETE FROM conversations WHERE id = $1 AND tenant_id = $2`,
		id, tenantID)); err != nil {
		return fmt.Errorf("postgres: delete conversation %s: %w", id, err)
	}
	return nil
}

// RenameConversation sets a tenant's conversation's title. ErrNotFound if
// there is none.
func (s *Store) RenameConversation(ctx context.Context, tenantID, id, title string) error {
	if err := affected(s.pool.Exec(ctx, `UPDATE conversations SET title = $3 WHERE id = $1 AND tenant_id = $2`,
		id, tenantID, title)); err != nil {
		return fmt.Errorf("postgres: rename conversation %s: %w", id, err)
	}
	return nil
}
