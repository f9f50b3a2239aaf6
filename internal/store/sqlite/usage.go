package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// RecordUsage inserts us in one transaction. A zero Time is set to now;
// each Time is updated to the stored value.
func (s *Store) RecordUsage(ctx context.Context, us ...*store.Usage) error {
	if len(us) == 0 {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: record usage: %w", err)
	}
	defer tx.Rollback()
	ins := tx.StmtContext(ctx, s.insertUsage)
	ats := make([]time.Time, len(us))
	for i, u := range us {
		ats[i] = stamp(u.Time)
		if _, err := ins.ExecContext(ctx, u.RequestID, u.TenantID, u.UserID, ats[i].UnixMicro(),
			u.Surface, u.Model, u.Deployment, u.Status, u.InputTokens, u.OutputTokens, u.CachedTokens,
			u.Estimated, u.Cost, u.TTFTMs, u.TotalMs); err != nil {
			return fmt.Errorf("sqlite: record usage %s: %w", u.RequestID, err)
		}
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
		count(*), sum(input_tokens), sum(output_tokens), sum(cached_tokens), sum(cost)
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
			&u.OutputTokens, &u.CachedTokens, &u.Cost); err != nil {
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
