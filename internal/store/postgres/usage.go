package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/store"
)

const insertUsage = `INSERT INTO usage (` + store.UsageColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
	ON CONFLICT (request_id) DO NOTHING`

// RecordUsage inserts us in one transaction (one round trip, as a batch).
// A row whose request already has one is skipped, so a retried batch
// counts nothing twice.
// A zero Time is set to now; each Time is updated to the stored value.
func (s *Store) RecordUsage(ctx context.Context, us ...*store.Usage) error {
	if len(us) == 0 {
		return nil
	}
	ats := make([]time.Time, len(us))
	b := &pgx.Batch{}
	for i, u := range us {
		ats[i] = store.Stamp(u.Time)
		b.Queue(insertUsage, store.AppendUsageArgs(nil, u, ats[i])...)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("postgres: record usage: %w", err)
	}
	for i, u := range us {
		u.Time = ats[i]
	}
	return nil
}

// UsageSummary sums the usage of tenantID ("" for all) with from <= Time <
// to by tenant, model and UTC day, ordered by day, tenant and model.
func (s *Store) UsageSummary(ctx context.Context, tenantID string, from, to time.Time) ([]store.UsageSum, error) {
	where, args := `created_at >= $1 AND created_at < $2`, []any{store.CeilMicro(from), store.CeilMicro(to)}
	if tenantID != "" {
		where, args = where+` AND tenant_id = $3`, append(args, tenantID)
	}
	rows, _ := s.pool.Query(ctx, `SELECT tenant_id, model,
		to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*),
		sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cached_tokens)::bigint, sum(cost),
		sum(attempts_input_tokens)::bigint, sum(attempts_output_tokens)::bigint, sum(attempts_cost)
		FROM usage WHERE `+where+`
		GROUP BY tenant_id, model, day ORDER BY day, tenant_id, model`, args...)
	sums, err := pgx.CollectRows(rows, rowTo(store.ScanUsageSum))
	if err != nil {
		return nil, fmt.Errorf("postgres: usage summary: %w", err)
	}
	if len(sums) == 0 {
		return nil, nil
	}
	return sums, nil
}
