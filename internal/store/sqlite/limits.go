package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// PutLimitOverride inserts or replaces an override.
func (s *Store) PutLimitOverride(ctx context.Context, o *store.LimitOverride) error {
	at := store.Stamp(o.UpdatedAt)
	_, err := s.w.ExecContext(ctx, `INSERT INTO limit_overrides (scope, subject_id, settings, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (scope, subject_id) DO UPDATE SET settings = excluded.settings, updated_at = excluded.updated_at`,
		o.Scope, o.SubjectID, string(o.Settings), at.UnixMicro())
	if err != nil {
		return fmt.Errorf("sqlite: put limit override: %w", err)
	}
	o.UpdatedAt = at
	return nil
}

// ListLimitOverrides returns every override, by scope and subject.
func (s *Store) ListLimitOverrides(ctx context.Context) ([]store.LimitOverride, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT scope, subject_id, settings, updated_at FROM limit_overrides ORDER BY scope, subject_id`)
	out, err := collect(rows, err, func(sc store.Scanner) (store.LimitOverride, error) {
		var o store.LimitOverride
		var settings string
		var at int64
		err := sc.Scan(&o.Scope, &o.SubjectID, &settings, &at)
		o.Settings, o.UpdatedAt = []byte(settings), fromMicros(at)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: list limit overrides: %w", err)
	}
	return out, nil
}

// DeleteLimitOverride removes an override.
func (s *Store) DeleteLimitOverride(ctx context.Context, scope, subjectID string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM limit_overrides WHERE scope = ? AND subject_id = ?`, scope, subjectID)
	if err != nil {
		return fmt.Errorf("sqlite: delete limit override: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// UsageSpend sums usage since since by tenant, key and UTC day.
func (s *Store) UsageSpend(ctx context.Context, since time.Time) ([]store.SpendSum, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tenant_id, key_id, date(created_at / 1000000, 'unixepoch') AS day, count(*),
		sum(input_tokens + output_tokens + attempts_input_tokens + attempts_output_tokens), sum(cost + attempts_cost)
		FROM usage WHERE created_at >= ? GROUP BY tenant_id, key_id, day ORDER BY day, tenant_id, key_id`, micros(since))
	out, err := collect(rows, err, store.ScanSpendSum)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage spend: %w", err)
	}
	return out, nil
}

// UsageReport sums usage by tenant, key, model and UTC day; the p95 of
// time to first word is the nearest rank among the rows that had one.
func (s *Store) UsageReport(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error) {
	where, args := `1 = 1`, []any{}
	if f.TenantID != "" {
		where, args = where+` AND tenant_id = ?`, append(args, f.TenantID)
	}
	if f.KeyID != "" {
		where, args = where+` AND key_id = ?`, append(args, f.KeyID)
	}
	if f.Model != "" {
		where, args = where+` AND model = ?`, append(args, f.Model)
	}
	if !f.From.IsZero() {
		where, args = where+` AND created_at >= ?`, append(args, micros(f.From))
	}
	if !f.To.IsZero() {
		where, args = where+` AND created_at < ?`, append(args, micros(f.To))
	}
	rows, err := s.r.QueryContext(ctx, `WITH u AS (
		SELECT tenant_id, key_id, model, date(created_at / 1000000, 'unixepoch') AS day, status,
			input_tokens, output_tokens, cost, attempts_cost, ttfw_ms
		FROM usage WHERE `+where+`),
	r AS (SELECT tenant_id, key_id, model, day, ttfw_ms,
			row_number() OVER (PARTITION BY tenant_id, key_id, model, day ORDER BY ttfw_ms) AS rn,
			count(*) OVER (PARTITION BY tenant_id, key_id, model, day) AS n
		FROM u WHERE ttfw_ms > 0),
	p AS (SELECT tenant_id, key_id, model, day, ttfw_ms FROM r WHERE rn = (n * 95 + 99) / 100)
	SELECT u.tenant_id, u.key_id, u.model, u.day, count(*),
		sum(CASE WHEN u.status IN ('error', 'timeout') THEN 1 ELSE 0 END),
		sum(u.input_tokens), sum(u.output_tokens), sum(u.cost), sum(u.attempts_cost),
		coalesce(max(p.ttfw_ms), 0)
	FROM u LEFT JOIN p ON p.tenant_id = u.tenant_id AND p.key_id = u.key_id AND p.model = u.model AND p.day = u.day
	GROUP BY u.tenant_id, u.key_id, u.model, u.day ORDER BY u.day, u.tenant_id, u.key_id, u.model`, args...)
	out, err := collect(rows, err, store.ScanUsageRow)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage report: %w", err)
	}
	return out, nil
}
