package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"slices"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// migrationFS holds the migrations (see store.Migration), in this
// store's dialect.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrate applies, in order, the migrations not yet recorded in
// schema_migrations, all in one transaction. The transaction begins
// IMMEDIATE (see params), so processes opening the same file at once take
// turns, and each sees what the one before it applied.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := store.LoadMigrations(migrationFS)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return inTx(ctx, db, "migrate", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		applied, err := collect(rows, err, func(sc store.Scanner) (v int, err error) {
			err = sc.Scan(&v)
			return v, err
		})
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		for _, m := range ms {
			if slices.Contains(applied, m.Version) {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at)
				VALUES (?, ?)`, m.Version, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
		}
		return nil
	})
}
