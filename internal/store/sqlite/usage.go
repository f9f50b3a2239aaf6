package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/firstword/firstword/internal/store"
)

const (
	insertUsageSQL = `INSERT OR IGNORE INTO usage (request_id, tenant_id, user_id, created_at, surface,
		model, deployment, status, input_tokens, output_tokens, cached_tokens, estimated, cost,
		ttft_ms, total_ms, attempts_input_tokens, attempts_output_tokens, attempts_cost, key_id, ttfw_ms) VALUES `
	usageValues = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	usageCols   = 20
	// usageRows is how many rows one multi-row insert takes: one
	// statement's overhead for many rows.
	usageRows = 16
)

// RecordUsage inserts us in one transaction, usageRows rows per statement
// while there are that many. A row whose request already has one is
// skipped, so a retried batch counts nothing twice. A zero Time is set to now; each Time is
// updated to the stored value.
func (s *Store) RecordUsage(ctx context.Context, us ...*store.Usage) error {
	if len(us) == 0 {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: record usage: %w", err)
	}
	defer tx.Rollback()
	ats := make([]time.Time, len(us))
	args := make([]any, 0, usageCols*usageRows)
	for i := 0; i < len(us); {
		stmt, n := s.insertUsage, 1
		if len(us)-i >= usageRows {
			stmt, n = s.insertUsages, usageRows
		}
		args = args[:0]
		for k, u := range us[i : i+n] {
			ats[i+k] = stamp(u.Time)
			args = append(args, u.RequestID, u.TenantID, u.UserID, ats[i+k].UnixMicro(),
				u.Surface, u.Model, u.Deployment, u.Status, u.InputTokens, u.OutputTokens, u.CachedTokens,
				u.Estimated, u.Cost, u.TTFTMs, u.TotalMs, u.AttemptsInputTokens, u.AttemptsOutputTokens, u.AttemptsCost, u.KeyID, u.TTFWMs)
		}
		if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("sqlite: record usage %s: %w", us[i].RequestID, err)
		}
		i += n
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: record usage: %w", err)
	}
	for i, u := range us {
		u.Time = ats[i]
	}
	return nil
}

// UsageSummary sums the usage of tenantID ("" for all) with from <= Time <
// to by tenant, model and UTC day, ordered by day, tenant and model.
func (s *Store) UsageSummary(ctx context.Context, tenantID string, from, to time.Time) ([]store.UsageSum, error) {
	where, args := `created_at >= ? AND created_at < ?`, []any{micros(from), micros(to)}
	if tenantID != "" {
		where, args = `tenant_id = ? AND `+where, append([]any{tenantID}, args...)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT tenant_id, model, date(created_at / 1000000, 'unixepoch') AS day,
		count(*), sum(input_tokens), sum(output_tokens), sum(cached_tokens), sum(cost),
		sum(attempts_input_tokens), sum(attempts_output_tokens), sum(attempts_cost)
		FROM usage WHERE `+where+`
		GROUP BY tenant_id, model, day ORDER BY day, tenant_id, model`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage summary: %w", err)
	}
	defer rows.Close()
	var sums []store.UsageSum
	for rows.Next() {
		var u store.UsageSum
		if err := rows.Scan(&u.TenantID, &u.Model, &u.Day, &u.Requests, &u.InputTokens,
			&u.OutputTokens, &u.CachedTokens, &u.Cost,
			&u.AttemptsInputTokens, &u.AttemptsOutputTokens, &u.AttemptsCost); err != nil {
			return nil, fmt.Errorf("sqlite: usage summary: %w", err)
		}
		sums = append(sums, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: usage summary: %w", err)
	}
	return sums, nil
}

// micros is t in microseconds, rounded up, so that a bound with
// nanoseconds compares with stored (truncated) times as the time itself
// would: stored >= micros(from) exactly when stored >= from.
func micros(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}
