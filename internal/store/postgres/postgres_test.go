package postgres

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testURL returns the server to test against, or skips tb.
func testURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("FIRSTWORD_TEST_POSTGRES_URL")
	if u == "" {
		tb.Skip("FIRSTWORD_TEST_POSTGRES_URL not set: skipping the PostgreSQL conformance suite, migration tests and benchmarks")
	}
	return u
}

// newSchema creates a schema of its own for tb, dropped when tb ends, and
// returns the URL of the server with that schema as search_path.
func newSchema(tb testing.TB) string {
	tb.Helper()
	base := testURL(tb)
	ctx := context.Background()
	schema := "fwtest_" + strings.ToLower(rand.Text())
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(`CREATE SCHEMA ` + schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		if err := exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			tb.Errorf("drop schema: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("FIRSTWORD_TEST_POSTGRES_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func open(tb testing.TB, url string) *Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, url)
	if err != nil {
		tb.Fatalf("Open = %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	testURL(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, newSchema(t)) })
}

// Replicas opening one database at once apply each migration once, and a
// reopened store keeps the data.
func TestOpenConcurrent(t *testing.T) {
	u := newSchema(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { open(t, u) })
	}
	wg.Wait()
	s := open(t, u)
	if err := s.CreateTenant(t.Context(), &store.Tenant{ID: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	s = open(t, u)
	if _, err := s.GetTenant(t.Context(), "acme"); err != nil {
		t.Errorf("GetTenant after reopening = %v", err)
	}
	rows, _ := s.pool.Query(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	got, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
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
	testURL(b) // skips unless FIRSTWORD_TEST_POSTGRES_URL is set
	storetest.Bench(b, func(b *testing.B) store.Store { return open(b, newSchema(b)) })
}

// TestEmbeddedMigrations: the migrations this store embeds load.
func TestEmbeddedMigrations(t *testing.T) {
	if _, err := store.LoadMigrations(migrationFS); err != nil {
		t.Errorf("embedded migrations: %v", err)
	}
}
