package postgres

import (
	"context"
	"embed"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/firstword/firstword/internal/store"
)

// migrationFS holds the migrations (see store.Migration), in this
// store's dialect.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLock is the pg_advisory_xact_lock key that serialises migrating
// ("fwmigrat" in ASCII).
const migrationLock int64 = 0x66776d6967726174

// migrate applies, in order, the migrations not yet recorded in
// schema_migrations, all in one transaction. The transaction first takes
// an advisory lock, so replicas starting together take turns and each sees
// what the one before it applied; being a transaction lock, it cannot
// outlive the transaction on a pooled connection.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := store.LoadMigrations(migrationFS)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return err
		}
		for _, m := range ms {
			if slices.Contains(versions, m.Version) {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.Version); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
