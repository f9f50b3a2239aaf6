package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable wraps a store operation that did not finish within the
// store's timeout: the database is down, stalled or overloaded.
var ErrUnavailable = errors.New("store unavailable")

// WithTimeout returns st with every operation bounded by d, so that a
// stalled database costs a request at most d. An operation cut by d
// returns an error wrapping ErrUnavailable; one whose caller left first
// returns the caller's context error as before. Close is not bounded.
func WithTimeout(st Store, d time.Duration) Store {
	if d <= 0 {
		return st
	}
	return &timeoutStore{st: st, d: d}
}

type timeoutStore struct {
	st Store
	d  time.Duration
}

type budgetKey struct{}

// WithBudget returns ctx carrying a deadline that the store operations
// made under it share (see WithTimeout): each waits until it at most, or
// its own timeout if that ends sooner. A request that must answer within
// one store timeout, whatever it asks of the store, sets it once.
func WithBudget(ctx context.Context, deadline time.Time) context.Context {
	return context.WithValue(ctx, budgetKey{}, deadline)
}

// bound runs op under the timeout (or what is left of ctx's budget) and
// tells a timeout from the caller's own cancellation.
func bound[T any](s *timeoutStore, ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	d := s.d
	if b, ok := ctx.Value(budgetKey{}).(time.Time); ok {
		d = max(0, min(d, time.Until(b)))
	}
	tctx, cancel := context.WithTimeoutCause(ctx, d, ErrUnavailable)
	defer cancel()
	v, err := op(tctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(tctx), ErrUnavailable) {
		err = fmt.Errorf("%w: no answer within %s: %w", ErrUnavailable, d.Round(time.Millisecond), err)
	}
	return v, err
}

func bound0(s *timeoutStore, ctx context.Context, op func(context.Context) error) error {
	_, err := bound(s, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })
	return err
}

func (s *timeoutStore) CreateTenant(ctx context.Context, t *Tenant) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.CreateTenant(ctx, t) })
}

func (s *timeoutStore) GetTenant(ctx context.Context, id string) (*Tenant, error) {
	return bound(s, ctx, func(ctx context.Context) (*Tenant, error) { return s.st.GetTenant(ctx, id) })
}

func (s *timeoutStore) CreateAPIKey(ctx context.Context, k *APIKey) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.CreateAPIKey(ctx, k) })
}

func (s *timeoutStore) APIKeysByPrefix(ctx context.Context, prefix string) ([]APIKey, error) {
	return bound(s, ctx, func(ctx context.Context) ([]APIKey, error) { return s.st.APIKeysByPrefix(ctx, prefix) })
}

func (s *timeoutStore) ListAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error) {
	return bound(s, ctx, func(ctx context.Context) ([]APIKey, error) { return s.st.ListAPIKeys(ctx, tenantID) })
}

func (s *timeoutStore) RevokeAPIKey(ctx context.Context, idOrPrefix string, at time.Time) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.RevokeAPIKey(ctx, idOrPrefix, at) })
}

func (s *timeoutStore) CountAPIKeys(ctx context.Context) (int, error) {
	return bound(s, ctx, s.st.CountAPIKeys)
}

func (s *timeoutStore) CreateConversation(ctx context.Context, c *Conversation, first ...*Message) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.CreateConversation(ctx, c, first...) })
}

func (s *timeoutStore) GetConversation(ctx context.Context, tenantID, id string) (*Conversation, error) {
	return bound(s, ctx, func(ctx context.Context) (*Conversation, error) { return s.st.GetConversation(ctx, tenantID, id) })
}

func (s *timeoutStore) ListConversations(ctx context.Context, tenantID, userID string, limit int) ([]Conversation, error) {
	return bound(s, ctx, func(ctx context.Context) ([]Conversation, error) {
		return s.st.ListConversations(ctx, tenantID, userID, limit)
	})
}

func (s *timeoutStore) DeleteConversation(ctx context.Context, tenantID, id string) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.DeleteConversation(ctx, tenantID, id) })
}

func (s *timeoutStore) RenameConversation(ctx context.Context, tenantID, id, title string) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.RenameConversation(ctx, tenantID, id, title) })
}

func (s *timeoutStore) AddMessages(ctx context.Context, ms ...*Message) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.AddMessages(ctx, ms...) })
}

func (s *timeoutStore) CheckpointMessage(ctx context.Context, id, content string, thinking []byte, outputTokens int, at time.Time) error {
	return bound0(s, ctx, func(ctx context.Context) error {
		return s.st.CheckpointMessage(ctx, id, content, thinking, outputTokens, at)
	})
}

func (s *timeoutStore) FinishMessage(ctx context.Context, m *Message) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.FinishMessage(ctx, m) })
}

func (s *timeoutStore) ListMessages(ctx context.Context, tenantID, conversationID string) ([]Message, error) {
	return bound(s, ctx, func(ctx context.Context) ([]Message, error) {
		return s.st.ListMessages(ctx, tenantID, conversationID)
	})
}

func (s *timeoutStore) LastMessages(ctx context.Context, tenantID, conversationID string, n int) ([]Message, error) {
	return bound(s, ctx, func(ctx context.Context) ([]Message, error) {
		return s.st.LastMessages(ctx, tenantID, conversationID, n)
	})
}

func (s *timeoutStore) InterruptStreaming(ctx context.Context, staleBefore, at time.Time) (int, error) {
	return bound(s, ctx, func(ctx context.Context) (int, error) { return s.st.InterruptStreaming(ctx, staleBefore, at) })
}

func (s *timeoutStore) StaleStreaming(ctx context.Context, staleBefore time.Time, limit int) ([]string, error) {
	return bound(s, ctx, func(ctx context.Context) ([]string, error) { return s.st.StaleStreaming(ctx, staleBefore, limit) })
}

func (s *timeoutStore) InterruptMessage(ctx context.Context, id string, content *string, outputTokens int, at time.Time) (bool, error) {
	return bound(s, ctx, func(ctx context.Context) (bool, error) {
		return s.st.InterruptMessage(ctx, id, content, outputTokens, at)
	})
}

func (s *timeoutStore) DeleteMessages(ctx context.Context, tenantID string, ids ...string) (int, error) {
	return bound(s, ctx, func(ctx context.Context) (int, error) { return s.st.DeleteMessages(ctx, tenantID, ids...) })
}

func (s *timeoutStore) GetMessage(ctx context.Context, id string) (*Message, error) {
	return bound(s, ctx, func(ctx context.Context) (*Message, error) { return s.st.GetMessage(ctx, id) })
}

func (s *timeoutStore) ReopenMessage(ctx context.Context, id string, at time.Time) (bool, error) {
	return bound(s, ctx, func(ctx context.Context) (bool, error) { return s.st.ReopenMessage(ctx, id, at) })
}

func (s *timeoutStore) RecordUsage(ctx context.Context, us ...*Usage) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.RecordUsage(ctx, us...) })
}

func (s *timeoutStore) UsageSummary(ctx context.Context, tenantID string, from, to time.Time) ([]UsageSum, error) {
	return bound(s, ctx, func(ctx context.Context) ([]UsageSum, error) { return s.st.UsageSummary(ctx, tenantID, from, to) })
}

func (s *timeoutStore) PutLimitOverride(ctx context.Context, o *LimitOverride) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.PutLimitOverride(ctx, o) })
}

func (s *timeoutStore) ListLimitOverrides(ctx context.Context) ([]LimitOverride, error) {
	return bound(s, ctx, s.st.ListLimitOverrides)
}

func (s *timeoutStore) DeleteLimitOverride(ctx context.Context, scope, subjectID string) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.DeleteLimitOverride(ctx, scope, subjectID) })
}

func (s *timeoutStore) UsageSpend(ctx context.Context, since time.Time) ([]SpendSum, error) {
	return bound(s, ctx, func(ctx context.Context) ([]SpendSum, error) { return s.st.UsageSpend(ctx, since) })
}

func (s *timeoutStore) UsageReport(ctx context.Context, f UsageFilter) ([]UsageRow, error) {
	return bound(s, ctx, func(ctx context.Context) ([]UsageRow, error) { return s.st.UsageReport(ctx, f) })
}

func (s *timeoutStore) Close() error { return s.st.Close() }

func (s *timeoutStore) ClaimIdempotencyKey(ctx context.Context, k *IdempotencyKey, now time.Time) (*IdempotencyKey, error) {
	return bound(s, ctx, func(ctx context.Context) (*IdempotencyKey, error) { return s.st.ClaimIdempotencyKey(ctx, k, now) })
}

func (s *timeoutStore) GetIdempotencyKey(ctx context.Context, tenantID, scope, key string) (*IdempotencyKey, error) {
	return bound(s, ctx, func(ctx context.Context) (*IdempotencyKey, error) {
		return s.st.GetIdempotencyKey(ctx, tenantID, scope, key)
	})
}

func (s *timeoutStore) BindIdempotencyKey(ctx context.Context, tenantID, scope, key, conversationID, messageID string) error {
	return bound0(s, ctx, func(ctx context.Context) error {
		return s.st.BindIdempotencyKey(ctx, tenantID, scope, key, conversationID, messageID)
	})
}

func (s *timeoutStore) ReleaseIdempotencyKey(ctx context.Context, tenantID, scope, key string) error {
	return bound0(s, ctx, func(ctx context.Context) error { return s.st.ReleaseIdempotencyKey(ctx, tenantID, scope, key) })
}

func (s *timeoutStore) PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int, error) {
	return bound(s, ctx, func(ctx context.Context) (int, error) { return s.st.PurgeIdempotencyKeys(ctx, before) })
}
