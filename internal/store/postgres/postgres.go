// Package postgres is the store.Store on PostgreSQL, for running several
// gateway replicas on one database. It uses pgx through a pgxpool.Pool;
// statements are prepared and cached per connection by pgx.
//
// Times read back in UTC, truncated to the microsecond (timestamptz).
package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/firstword/firstword/internal/store"
)

// Store is a store.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a key=value
// DSN; pool settings such as pool_max_conns go in it too) and applies the
// pending migrations. ctx bounds only the opening.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		// Scan timestamptz in UTC rather than time.Local.
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool, waiting for the connections in use to be released.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// jsonArg is b for a json column: NULL when empty.
func jsonArg(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// affected returns ErrNotFound when tag reports no row changed.
func affected(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	return err
}

// rowTo adapts a store scan function to pgx.CollectRows.
func rowTo[T any](scan func(store.Scanner) (T, error)) pgx.RowToFunc[T] {
	return func(row pgx.CollectableRow) (T, error) { return scan(row) }
}
