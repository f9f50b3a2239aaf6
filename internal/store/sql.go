package store

import (
	"database/sql"
	"errors"
	"time"
)

// What the SQL stores (sqlite/ and postgres/) share: one schema, kept in
// each one's dialect, whose times both keep the same way.

// Stamp returns t, or now if t is zero, as a Store keeps times: in UTC,
// to the microsecond.
func Stamp(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// Stamps returns the times a new row keeps: Stamp(created), and updated
// stamped, or the created time if updated is zero.
func Stamps(created, updated time.Time) (time.Time, time.Time) {
	c := Stamp(created)
	if updated.IsZero() {
		return c, c
	}
	return c, Stamp(updated)
}

// Bumped returns a conversation's UpdatedAt once added are appended to
// it: updated, or the last message's CreatedAt if that is later.
func Bumped(updated time.Time, added []*Message) time.Time {
	if len(added) > 0 && added[len(added)-1].CreatedAt.After(updated) {
		return added[len(added)-1].CreatedAt
	}
	return updated
}

// CeilMicro rounds t up to the microsecond, so that a bound with
// nanoseconds compares with stored (truncated) times as t itself would.
func CeilMicro(t time.Time) time.Time {
	if t.Nanosecond()%1000 != 0 {
		return t.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return t
}

// NotFound returns ErrNotFound if err says that a query found no row
// (sql.ErrNoRows, which pgx's ErrNoRows also matches), else err.
func NotFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// Column lists of the tables, in the order the stores scan them.
const (
	APIKeyColumns       = `id, tenant_id, user_id, name, prefix, hash, created_at, revoked_at, admin`
	ConversationColumns = `id, tenant_id, user_id, title, model, created_at, updated_at`
	MessageColumns      = `id, conversation_id, tenant_id, seq, role, content, status, finish_reason,
	model, deployment, input_tokens, output_tokens, cached_tokens, estimated, cost, timings, meta,
	error_code, error_message, created_at, updated_at, thinking`
	IdempotencyColumns = `tenant_id, scope, key, request_hash, conversation_id, message_id, created_at, expires_at`
	UsageColumns       = `request_id, tenant_id, user_id, created_at, surface, model, deployment, status,
	input_tokens, output_tokens, cached_tokens, estimated, cost, ttft_ms, total_ms,
	attempts_input_tokens, attempts_output_tokens, attempts_cost, key_id, ttfw_ms`
)

// AppendUsageArgs appends u's values to args in the order of UsageColumns,
// with at, u.Time as the dialect keeps it, for created_at.
func AppendUsageArgs(args []any, u *Usage, at any) []any {
	return append(args, u.RequestID, u.TenantID, u.UserID, at, u.Surface, u.Model, u.Deployment, u.Status,
		u.InputTokens, u.OutputTokens, u.CachedTokens, u.Estimated, u.Cost, u.TTFTMs, u.TotalMs,
		u.AttemptsInputTokens, u.AttemptsOutputTokens, u.AttemptsCost, u.KeyID, u.TTFWMs)
}

// Scanner is a row of a query's result (a *sql.Rows, a pgx row).
type Scanner interface{ Scan(dest ...any) error }

// ScanSpendSum reads a row of tenant_id, key_id, day, requests, tokens
// and cost.
func ScanSpendSum(sc Scanner) (SpendSum, error) {
	var u SpendSum
	err := sc.Scan(&u.TenantID, &u.KeyID, &u.Day, &u.Requests, &u.Tokens, &u.Cost)
	return u, err
}

// ScanUsageSum reads a row of tenant_id, model, day, requests, then the
// sums of input, output and cached tokens, cost, and the attempts' input
// and output tokens and cost.
func ScanUsageSum(sc Scanner) (UsageSum, error) {
	var u UsageSum
	err := sc.Scan(&u.TenantID, &u.Model, &u.Day, &u.Requests, &u.InputTokens,
		&u.OutputTokens, &u.CachedTokens, &u.Cost,
		&u.AttemptsInputTokens, &u.AttemptsOutputTokens, &u.AttemptsCost)
	return u, err
}

// ScanUsageRow reads a row of tenant_id, key_id, model, day, requests,
// errors, input and output tokens, cost, the attempts' cost and the p95
// of time to first word.
func ScanUsageRow(sc Scanner) (UsageRow, error) {
	var u UsageRow
	err := sc.Scan(&u.TenantID, &u.KeyID, &u.Model, &u.Day, &u.Requests, &u.Errors,
		&u.InputTokens, &u.OutputTokens, &u.Cost, &u.AttemptsCost, &u.TTFWP95Ms)
	return u, err
}
