package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/store"
)

// PutLimitOverride inserts or replaces an override.
func (s *Store) PutLimitOverride(ctx context.Context, o *store.LimitOverride) error {
	at := store.Stamp(o.UpdatedAt)
	_, err := s.pool.Exec(ctx, `INSERT INTO limit_overrides (scope, subject_id, settings, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (scope, subject_id) DO UPDATE SET settings = excluded.settings, updated_at = excluded.updated_at`,
		o.Scope, o.SubjectID, string(o.Settings), at)
	if err != nil {
		return fmt.Errorf("postgres: put limit override: %w", err)
	}
	o.UpdatedAt = at
	return nil
}

// ListLimitOverrides returns every override, by scope and subject.
func (s *Store) ListLimitOverrides(ctx context.Context) ([]store.LimitOverride, error) {
	rows, _ := s.pool.Query(ctx, `SELECT scope, subject_id, settings, updated_at FROM limit_overrides ORDER BY scope, subject_id`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LimitOverride, error) {
		var o store.LimitOverride
		var settings string
		err := row.Scan(&o.Scope, &o.SubjectID, &settings, &o.UpdatedAt)
		o.Settings, o.UpdatedAt = []byte(settings), o.UpdatedAt.UTC()
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list limit overrides: %w", err)
	}
	return out, nil
}

// DeleteLimitOverride removes an override.
func (s *Store) DeleteLimitOverride(ctx context.Context, scope, subjectID string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM limit_overrides WHERE scope = $1 AND subject_id = $2`, scope, subjectID)
	if err != nil {
		return fmt.Errorf("postgres: delete limit override: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// UsageSpend sums usage since since by tenant, key and UTC day.
func (s *Store) UsageSpend(ctx context.Context, since time.Time) ([]store.SpendSum, error) {
	rows, _ := s.pool.Query(ctx, `SELECT tenant_id, key_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*),
		sum(input_tokens + output_tokens + attempts_input_tokens + attempts_output_tokens)::bigint, sum(cost + attempts_cost)
		FROM usage WHERE created_at >= $1 GROUP BY tenant_id, key_id, day ORDER BY day, tenant_id, key_id`, store.CeilMicro(since))
	out, err := pgx.CollectRows(rows, rowTo(store.ScanSpendSum))
	if err != nil {
		return nil, fmt.Errorf("postgres: usage spend: %w", err)
	}
	return out, nil
}

// UsageReport sums usage by tenant, key, model and UTC day; the p95 of
// time to first word is the nearest rank among the rows that had one.
func (s *Store) UsageReport(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error) {
	where, args := `true`, []any{}
	arg := func(cond string, v any) {
		args = append(args, v)
		where += ` AND ` + cond + ` $` + strconv.Itoa(len(args))
	}
	if f.TenantID != "" {
		arg("tenant_id =", f.TenantID)
	}
	if f.KeyID != "" {
		arg("key_id =", f.KeyID)
	}
	if f.Model != "" {
		arg("model =", f.Model)
	}
	if !f.From.IsZero() {
		arg("created_at >=", store.CeilMicro(f.From))
	}
	if !f.To.IsZero() {
		arg("created_at <", store.CeilMicro(f.To))
	}
	rows, _ := s.pool.Query(ctx, `WITH u AS (
		SELECT tenant_id, key_id, model, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, status,
			input_tokens, output_tokens, cost, attempts_cost, ttfw_ms
		FROM usage WHERE `+where+`),
	r AS (SELECT tenant_id, key_id, model, day, ttfw_ms,
			row_number() OVER (PARTITION BY tenant_id, key_id, model, day ORDER BY ttfw_ms) AS rn,
			count(*) OVER (PARTITION BY tenant_id, key_id, model, day) AS n
		FROM u WHERE ttfw_ms > 0),
	p AS (SELECT tenant_id, key_id, model, day, ttfw_ms FROM r WHERE rn = (n * 95 + 99) / 100)
	SELECT u.tenant_id, u.key_id, u.model, u.day, count(*),
		sum(CASE WHEN u.status IN ('error', 'timeout') THEN 1 ELSE 0 END),
		sum(u.input_tokens)::bigint, sum(u.output_tokens)::bigint, sum(u.cost), sum(u.attempts_cost),
		coalesce(max(p.ttfw_ms), 0)
	FROM u LEFT JOIN p ON p.tenant_id = u.tenant_id AND p.key_id = u.key_id AND p.model = u.model AND p.day = u.day
	GROUP BY u.tenant_id, u.key_id, u.model, u.day ORDER BY u.day, u.tenant_id, u.key_id, u.model`, args...)
	out, err := pgx.CollectRows(rows, rowTo(store.ScanUsageRow))
	if err != nil {
		return nil, fmt.Errorf("postgres: usage report: %w", err)
	}
	return out, nil
}
