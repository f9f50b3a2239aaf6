package sqlite

import (
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := Open(path)
	if err != nil {
		tb.Fatalf("Open(%s) = %v", path, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close() = %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			return open(t, filepath.Join(t.TempDir(), "firstword.db"))
		})
	})
	t.Run("memory", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return open(t, ":memory:") })
	})
}

// Every ":memory:" store is a database of its own.
func TestMemoryIsPrivate(t *testing.T) {
	a, b := open(t, ":memory:"), open(t, ":memory:")
	if err := a.CreateTenant(t.Context(), &store.Tenant{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetTenant(t.Context(), "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTenant on another :memory: store = %v, want ErrNotFound", err)
	}
}

// Opening a file again, or from several stores at once, applies each
// migration once and keeps the data.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "firstword.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { open(t, path) })
	}
	wg.Wait()
	s := open(t, path)
	if err := s.CreateTenant(t.Context(), &store.Tenant{ID: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if _, err := s.GetTenant(t.Context(), "acme"); err != nil {
		t.Errorf("GetTenant after reopening = %v", err)
	}
	rows, err := s.r.QueryContext(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	ms, err := store.LoadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.Version)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schema_migrations (-want +got):\n%s", diff)
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		return open(b, filepath.Join(b.TempDir(), "firstword.db"))
	})
}

// The DSN's settings reach every connection of both pools.
func TestPragmas(t *testing.T) {
	for _, tc := range []struct {
		path, journal string
	}{
		{filepath.Join(t.TempDir(), "firstword.db"), "wal"},
		{":memory:", "memory"}, // WAL needs a file
	} {
		s := open(t, tc.path)
		for _, p := range []struct {
			pool *sql.DB
			name string
			want map[string]string
		}{
			{s.w, "writer", map[string]string{"journal_mode": tc.journal, "synchronous": "1",
				"foreign_keys": "1", "busy_timeout": "5000", "query_only": "0"}},
			{s.r, "reader", map[string]string{"journal_mode": tc.journal, "synchronous": "1",
				"foreign_keys": "1", "busy_timeout": "5000", "query_only": "1"}},
		} {
			got := map[string]string{}
			for name := range p.want {
				var v string
				if err := p.pool.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
					t.Fatal(err)
				}
				got[name] = v
			}
			if diff := cmp.Diff(p.want, got); diff != "" {
				t.Errorf("Open(%s): %s pragmas (-want +got):\n%s", tc.path, p.name, diff)
			}
		}
	}
}

// BeginTx on the writer takes the write lock at once (BEGIN IMMEDIATE).
func TestWriteTxIsImmediate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "firstword.db")
	s := open(t, path)
	tx, err := s.w.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err == nil {
		t.Error("another connection began a write transaction while the store's was open")
	}
}

// TestEmbeddedMigrations: the migrations this store embeds load.
func TestEmbeddedMigrations(t *testing.T) {
	if _, err := store.LoadMigrations(migrationFS); err != nil {
		t.Errorf("embedded migrations: %v", err)
	}
}

// TestCheckpointsFollowWrites: a write is followed by a background
// checkpoint that copies the whole WAL (checkpointsRun counts only those),
// and none runs while nothing is written.
func TestCheckpointsFollowWrites(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "firstword.db"))
	write := func(id string) {
		t.Helper()
		if err := s.RecordUsage(t.Context(), &store.Usage{RequestID: id, TenantID: "t", Time: time.Now(), Surface: "openai", Model: "m", Status: "complete"}); err != nil {
			t.Fatal(err)
		}
	}
	// settled waits until a tick has run a checkpoint and then none runs
	// for several ticks: the count it settled at.
	settled := func() int64 {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		last, quiet := s.checkpointsRun.Load(), 0
		for quiet < 5 {
			if time.Now().After(deadline) {
				t.Fatalf("checkpoints did not settle: %d run", s.checkpointsRun.Load())
			}
			time.Sleep(checkpointEvery)
			if n := s.checkpointsRun.Load(); n != last {
				last, quiet = n, 0
			} else {
				quiet++
			}
		}
		return last
	}
	write("a")
	first := settled()
	if first == 0 {
		t.Fatal("no checkpoint ran after a write")
	}
	// Idle: ten more ticks run none.
	time.Sleep(10 * checkpointEvery)
	if n := s.checkpointsRun.Load(); n != first {
		t.Errorf("%d checkpoints ran with nothing written", n-first)
	}
	write("b")
	if second := settled(); second <= first {
		t.Errorf("no checkpoint ran after the second write (%d, then %d)", first, second)
	}
}
