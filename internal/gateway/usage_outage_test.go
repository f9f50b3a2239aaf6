package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/faultproxy"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestUsageSurvivesDatabaseOutage (issue 15): PostgreSQL freezes, behind a
// fault proxy, for longer than the old writer's 5 s give-up, while
// streamed requests keep succeeding; after the thaw and a shutdown, the
// usage table has exactly one row per request.
func TestUsageSurvivesDatabaseOutage(t *testing.T) {
	dbURL := os.Getenv("FIRSTWORD_TEST_POSTGRES_URL")
	if dbURL == "" {
		t.Skip("FIRSTWORD_TEST_POSTGRES_URL not set: skipping the usage-outage test on PostgreSQL")
	}
	u, err := neturl.Parse(dbURL)
	if err != nil {
		t.Fatalf("FIRSTWORD_TEST_POSTGRES_URL: %v", err)
	}
	proxy, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viaProxy := *u
	viaProxy.Host = proxy.Addr()
	t.Setenv("FW_USAGE_PG_URL", viaProxy.String())

	// The alias marks this run's rows in a shared database. The auth
	// cache outlives the freeze: local mode must not ask the frozen
	// database per request.
	marker := "outage" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg := gatewaytest.MustParseEnv(t, fmt.Sprintf(`store: {driver: postgres, url_env: FW_USAGE_PG_URL}
auth: {cache_ttl: 10m}
usage: {spill_path: %q, retry_max: 1s}
providers:
  sim: {type: sim}
models:
  %s: {deployments: [{provider: sim, model: small}]}
`, filepath.Join(t.TempDir(), "usage.spill"), marker))

	db, err := pgx.Connect(context.Background(), dbURL) // around the proxy
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	defer db.Exec(context.Background(), `DELETE FROM usage WHERE model = $1`, marker)
	rowsOf := func() map[string]int {
		t.Helper()
		rows, _ := db.Query(context.Background(), `SELECT request_id, count(*)::int FROM usage WHERE model = $1 GROUP BY request_id`, marker)
		got := map[string]int{}
		var id string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { got[id] = n; return nil }); err != nil {
			t.Fatalf("counting usage rows: %v", err)
		}
		return got
	}

	gw := gatewaytest.Start(t, cfg)
	base := gw.URL
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	var mu sync.Mutex
	var ids []string
	// chat streams one completion and keeps its request ID.
	chat := func(sim string) {
		body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi [sim %s]"}]}`, marker, sim)
		resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Errorf("request: %v", err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "data: [DONE]") {
			t.Errorf("request: %d %.300s", resp.StatusCode, b)
			return
		}
		mu.Lock()
		ids = append(ids, resp.Header.Get("X-Request-Id"))
		mu.Unlock()
	}
	const quick, long = "ttft=5ms gap=1ms tokens=5", "ttft=5ms gap=20ms tokens=50"

	// Before the freeze: every row written, and the writer idle, so that
	// no commit is in flight when the bytes stop.
	for range 5 {
		chat(quick)
	}
	for deadline := time.Now().Add(10 * time.Second); len(rowsOf()) < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("before the freeze, %d of 5 usage rows written", len(rowsOf()))
		}
	}
	time.Sleep(300 * time.Millisecond)

	// Streams in flight when the database freezes end during the freeze,
	// and requests keep coming for 7s.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { chat(long) })
	}
	time.Sleep(100 * time.Millisecond)
	proxy.Freeze()
	frozen := time.Now()
	wg.Go(func() {
		for time.Since(frozen) < 7*time.Second {
			chat(quick)
			time.Sleep(200 * time.Millisecond)
		}
	})
	wg.Wait()
	proxy.Thaw()
	for range 5 {
		chat(quick)
	}

	if m := scrapeUsage(t, client, base); m["firstword_usage_write_errors_total"] == 0 || m["firstword_usage_rows_dropped_total"] != 0 {
		t.Errorf("usage metrics after the outage %v, want write errors and nothing dropped", m)
	}
	if err := gw.Stop(); err != nil {
		t.Errorf("serve: %v", err)
	}

	want := map[string]int{}
	for _, id := range ids {
		want[id] = 1
	}
	if len(want) < 40 {
		t.Errorf("only %d requests succeeded", len(want))
	}
	if diff := cmp.Diff(want, rowsOf()); diff != "" {
		t.Errorf("usage rows per request ID (-want +got):\n%s", diff)
	}
}

// scrapeUsage reads the firstword_usage_* samples from /metrics.
func scrapeUsage(t *testing.T, client *http.Client, base string) map[string]float64 {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && strings.HasPrefix(name, "firstword_usage_") {
			m[name], _ = strconv.ParseFloat(value, 64)
		}
	}
	return m
}
