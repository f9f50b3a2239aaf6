package gateway_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/faultproxy"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// pgBehindProxy gives the test a schema of its own on the PostgreSQL
// server named by FIRSTWORD_TEST_POSTGRES_URL (skipping without one), and
// a fault proxy in front of the server. It returns the proxy and the URL
// that reaches the schema through it.
func pgBehindProxy(t *testing.T) (*faultproxy.Proxy, string) {
	t.Helper()
	u, err := neturl.Parse(pgSchema(t, "the frozen-database test"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	u.Host = p.Addr()
	return p, u.String()
}

// pgSchema gives the test a schema of its own on the PostgreSQL server
// named by FIRSTWORD_TEST_POSTGRES_URL, skipping what without one, and
// returns the URL that reaches it.
func pgSchema(t *testing.T, what string) string {
	t.Helper()
	base := os.Getenv("FIRSTWORD_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("FIRSTWORD_TEST_POSTGRES_URL not set: skipping " + what)
	}
	ctx := context.Background()
	schema := "fwstall_" + strings.ToLower(rand.Text())
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
		t.Fatalf("create schema: %v", err)
	}
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatalf("FIRSTWORD_TEST_POSTGRES_URL: %v", err)
	}
	t.Cleanup(func() {
		if err := exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// timed sends a request and returns its status and how long the status
// line took.
func timed(t *testing.T, method, url, key, body string) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	code, _ := send(t, method, url, key, body)
	return code, time.Since(start)
}

// TestFrozenDatabase (issue 15): with PostgreSQL frozen (connections
// open, no byte moving), every route that needs the database answers 503
// store_unavailable within the store timeout instead of hanging; what
// does not need it (local mode's completions, a key checked before the
// freeze) goes on; and all of it recovers when the database does.
func TestFrozenDatabase(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(map[bool]string{false: "local mode", true: "with keys"}[keyed], func(t *testing.T) {
			proxy, url := pgBehindProxy(t)
			t.Setenv("FW_STALL_PG_URL", url)
			const timeout = 500 * time.Millisecond
			gw := gatewaytest.Start(t, gatewaytest.MustParseEnv(t, fmt.Sprintf(`store: {driver: postgres, url_env: FW_STALL_PG_URL, timeout: %s}
auth: {cache_ttl: 200ms}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`, timeout)))
			key := ""
			if keyed {
				key = newKey(t, gw.Store(), "acme", "", false)
				time.Sleep(300 * time.Millisecond) // past the cache: keys are required
			}
			completion := `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=1ms gap=1ms tokens=3]"}]}`
			chat := `{"message":"hi [sim ttft=1ms gap=1ms tokens=3]"}`
			if code, _ := timed(t, "POST", gw.URL+"/v1/chat/completions", key, completion); code != 200 {
				t.Fatalf("before the freeze: completions %d", code)
			}
			if code, _ := timed(t, "POST", gw.URL+"/v1/chat", key, chat); code != 200 {
				t.Fatalf("before the freeze: chat %d", code)
			}

			proxy.Freeze()
			time.Sleep(400 * time.Millisecond) // the auth cache's answers are now past their ttl
			// The bound: the store timeout, plus room for a busy machine;
			// before, these waited for as long as the database was frozen.
			limit := timeout + 1500*time.Millisecond
			for _, rt := range []struct{ method, path, body string }{
				{"POST", "/v1/chat", chat},
				{"GET", "/v1/conversations", ""},
				{"GET", "/v1/usage", ""},
			} {
				code, d := timed(t, rt.method, gw.URL+rt.path, key, rt.body)
				t.Logf("frozen: %s %s: %d after %s", rt.method, rt.path, code, d.Round(time.Millisecond))
				if code != http.StatusServiceUnavailable || d > limit {
					t.Errorf("frozen: %s %s: %d after %s, want 503 within %s", rt.method, rt.path, code, d.Round(time.Millisecond), limit)
				}
				// The key check and the turn's write share one store
				// timeout (issue 34): before, each waited its own, and
				// the 503 came after two.
				if rt.path == "/v1/chat" && d >= 2*timeout {
					t.Errorf("frozen: /v1/chat answered after %s: the key check and the turn waited a store timeout (%s) each", d.Round(time.Millisecond), timeout)
				}
			}
			for range 3 {
				code, d := timed(t, "POST", gw.URL+"/v1/chat/completions", key, completion)
				t.Logf("frozen: completions: %d after %s", code, d.Round(time.Millisecond))
				if code != 200 || d > limit {
					t.Errorf("frozen: completions %d after %s, want 200 without waiting on the database", code, d.Round(time.Millisecond))
				}
			}
			proxy.Thaw()
			var code int
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if code, _ = timed(t, "POST", gw.URL+"/v1/chat", key, chat); code == 200 {
					break
				}
			}
			if code != 200 {
				t.Errorf("after the thaw: chat %d", code)
			}
		})
	}
}
