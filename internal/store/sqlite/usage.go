package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/firstword/firstword/internal/store"
)

const (
	insertUsageSQL = `INSERT OR IGNORE INTO usage (` + store.UsageColumns + `) VALUES `
	usageValues    = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	usageCols      = 20
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
	ats := make([]time.Time, len(us))
	err := inTx(ctx, s.w, "sqlite: record usage", func(tx *sql.Tx) error {
		args := make([]any, 0, usageCols*usageRows)
		for i := 0; i < len(us); {
			stmt, n := s.insertUsage, 1
			if len(us)-i >= usageRows {
				stmt, n = s.insertUsages, usageRows
			}
			args = args[:0]
			for k, u := range us[i : i+n] {
				ats[i+k] = store.Stamp(u.Time)
				args = store.AppendUsageArgs(args, u, ats[i+k].UnixMicro())
			}
			if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("sqlite: record usage %s: %w", us[i].RequestID, err)
			}
			i += n
		}
		return nil
	})
	if err != nil {
		return err
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
	sums, err := collect(rows, err, store.ScanUsageSum)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage summary: %w", err)
	}
	return sums, nil
}
