// Package sqlite is the embedded store.Store: one SQLite database file, or
// a private in-memory database, through modernc.org/sqlite (pure Go).
//
// Writes go through a pool of exactly one connection, so concurrent writers
// queue in Go instead of in SQLite's busy handler, which polls in sleeps of
// up to 100 ms and would ruin tail latency. Reads use a pool of several
// read-only connections, which WAL lets run alongside the writer.
//
// SQLite copies the WAL back into the database file (a checkpoint, with an
// fsync) in the commit that pushes the WAL past a size, adding milliseconds
// to that one write. A goroutine checkpoints in the background instead, on
// a read connection, while writes go on; the commit-time checkpoint remains,
// at a larger size, as a backstop.
//
// Times are stored as microseconds since the Unix epoch: they read back in
// UTC, truncated to the microsecond.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/store"

	sqlitedrv "modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Store is a store.Store on SQLite. It is safe for concurrent use.
type Store struct {
	w *sql.DB // one connection: every write
	r *sql.DB // several read-only connections

	// Statements of the chat path, prepared once.
	bumpConversation *sql.Stmt
	insertMessage    *sql.Stmt
	checkpoint       *sql.Stmt
	finish           *sql.Stmt
	insertUsage      *sql.Stmt
	insertUsages     *sql.Stmt // usageRows rows at once
	listMessages     *sql.Stmt
	lastMessages     *sql.Stmt

	stop, stopped chan struct{} // the background checkpoints; nil in memory
	walPath       string        // the WAL file the checkpoints watch
	// checkpointsRun counts the checkpoints that copied the whole WAL.
	checkpointsRun atomic.Int64
}

var _ store.Store = (*Store)(nil)

// Every connection gets these. busy_timeout is for other processes sharing
// the file and SQLite's rare transient locks (our own writes queue in the
// writer pool); synchronous=NORMAL in WAL mode may lose the last commits in
// a power loss, never consistency; wal_autocheckpoint is the backstop, in
// pages; _txlock=immediate makes BeginTx take the write lock at once, so a
// transaction never fails halfway upgrading from read to write.
const params = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" +
	"&_pragma=foreign_keys(ON)&_pragma=wal_autocheckpoint(10000)&_txlock=immediate"

// checkpointEvery is the period of the background checkpoints.
const checkpointEvery = 100 * time.Millisecond

// uriEscaper escapes what would end the path part of a file: URI.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// Open opens (creating it if needed) the database at path and applies the
// pending migrations. path ":memory:" gives a new private in-memory
// database, which lives until Close.
func Open(path string) (*Store, error) {
	var dsn string
	if path == ":memory:" {
		// A named shared-cache memory database is one database for all
		// the pool's connections; the random name keeps it private.
		dsn = "file:firstword-" + rand.Text() + "?mode=memory&cache=shared&" + params
	} else {
		dsn = "file:" + uriEscaper.Replace(path) + "?" + params
	}
	s := &Store{}
	var err error
	if s.w, err = sql.Open("sqlite", dsn); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.w.SetMaxOpenConns(1)
	ctx := context.Background()
	// Connections opening a new file at once collide switching it to WAL;
	// SQLite then returns SQLITE_BUSY without waiting (waiting could
	// deadlock), and the losers try again.
	for try := 1; ; try++ {
		err = migrate(ctx, s.w)
		var se *sqlitedrv.Error
		if err == nil || try == 10 || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY {
			break
		}
		time.Sleep(time.Duration(try) * 10 * time.Millisecond)
	}
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if s.r, err = sql.Open("sqlite", dsn+"&_pragma=query_only(1)"); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if path != ":memory:" { // which has no WAL
		s.walPath = path + "-wal"
		s.stop, s.stopped = make(chan struct{}), make(chan struct{})
		go s.checkpoints()
	}
	return s, nil
}

// checkpoints runs a PASSIVE checkpoint, which never waits for a lock, every
// checkpointEvery until Close, unless the WAL file has not changed since
// a checkpoint that copied all of it: an idle store costs a stat a tick,
// not a statement (a third of an idle gateway's CPU before). Errors
// and checkpoints that readers held back are tried again next tick.
func (s *Store) checkpoints() {
	defer close(s.stopped)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	var done walState // the WAL as of the last complete checkpoint
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		now, err := statWAL(s.walPath)
		if err == nil && now == done {
			continue
		}
		var busy, frames, copied int
		if err := s.r.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil || busy != 0 || copied != frames {
			continue
		}
		s.checkpointsRun.Add(1)
		// A write between the stat and the checkpoint changes the file
		// after now was read: the next tick sees it.
		if err == nil {
			done = now
		}
	}
}

// walState is what a write to the WAL changes: its size or its time.
type walState struct {
	size, mod int64 // mod: nanoseconds since the epoch
}

func statWAL(path string) (walState, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return walState{}, err
	}
	return walState{fi.Size(), fi.ModTime().UnixNano()}, nil
}

func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		db   *sql.DB
		sql  string
	}{
		{&s.bumpConversation, s.w, `UPDATE conversations SET last_seq = last_seq + 1, updated_at = max(updated_at, ?)
			WHERE id = ? AND tenant_id = ? RETURNING last_seq`},
		{&s.insertMessage, s.w, `INSERT INTO messages (` + store.MessageColumns + `)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.checkpoint, s.w, `UPDATE messages SET content = ?, thinking = ?, output_tokens = ?, updated_at = ?
			WHERE id = ? AND status = 'streaming'`},
		{&s.finish, s.w, `UPDATE messages SET status = ?, content = ?, finish_reason = ?, model = ?,
			deployment = ?, input_tokens = ?, output_tokens = ?, cached_tokens = ?, estimated = ?,
			cost = ?, timings = ?, meta = ?, thinking = ?, error_code = ?, error_message = ?, updated_at = ?
			WHERE id = ? AND tenant_id = ?`},
		{&s.insertUsage, s.w, insertUsageSQL + usageValues},
		{&s.insertUsages, s.w, insertUsageSQL + strings.Repeat(usageValues+", ", usageRows-1) + usageValues},
		{&s.listMessages, s.r, `SELECT ` + store.MessageColumns + ` FROM messages
			WHERE conversation_id = ? AND tenant_id = ? ORDER BY seq`},
		{&s.lastMessages, s.r, `SELECT ` + store.MessageColumns + ` FROM messages
			WHERE conversation_id = ? AND tenant_id = ? ORDER BY seq DESC LIMIT ?`},
	} {
		st, err := p.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.stmt = st
	}
	return nil
}

// Close closes the database. For ":memory:" that discards it.
func (s *Store) Close() error {
	if s.stop != nil {
		close(s.stop)
		<-s.stopped
	}
	var errs []error
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// micros is t in microseconds, rounded up (see store.CeilMicro), for a
// bound compared with stored times.
func micros(t time.Time) int64 { return store.CeilMicro(t).UnixMicro() }

// jsonText stores JSON as TEXT (a BLOB would read as JSONB to SQLite's json
// functions), and empty as NULL.
func jsonText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// changed returns how many rows a statement that returned (res, err)
// changed.
func changed(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// affected returns a statement's error, or ErrNotFound if it changed no
// row.
func affected(res sql.Result, err error) error {
	n, err := changed(res, err)
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	return err
}

// collect returns the rows of a query (rows, err), each read by scan, and
// closes them; nil for none.
func collect[T any](rows *sql.Rows, err error, scan func(store.Scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// inTx runs fn in a transaction of db and commits it if fn returns nil.
// It returns fn's error as is, and wraps a failure to begin or commit
// with op.
func inTx(ctx context.Context, db *sql.DB, op string, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
