package cli_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestBudgetCommand: budget prints a running gateway's live report of
// /v1/chat's traffic as a table (the stages, the time to first word, the
// critical path the gateway reports) and, with --json, as the gateway
// sends it. (internal/gateway's TestBudgetReportKnownStages checks the
// report's figures.)
func TestBudgetCommand(t *testing.T) {
	docs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, "the docs")
	}))
	defer docs.Close()
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, `
sources:
  lookups:
    - {name: docs, url: "`+docs.URL+`", timeout: 1s}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`))
	for range 3 {
		resp, err := http.Post(gw.URL+"/v1/chat", "application/json", strings.NewReader(`{"message":"where is my order? [sim ttft=20ms gap=1ms tokens=5]"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A turn reaches the window when it is metered, after its last event.
	var rep struct {
		Requests     int    `json:"requests"`
		CriticalPath string `json:"critical_path"`
	}
	for deadline := time.Now().Add(5 * time.Second); rep.Requests < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, v := gatewaytest.GetJSON(t, gw.URL+"/v1/budget?surface=chat", "")
		if n, ok := v["requests"].(float64); ok {
			rep.Requests = int(n)
		}
		rep.CriticalPath, _ = v["critical_path"].(string)
	}
	if rep.Requests < 3 || rep.CriticalPath == "" {
		t.Fatalf("the gateway's report: %d requests, critical path %q; want 3 and a path", rep.Requests, rep.CriticalPath)
	}

	out, stderr, code := runCLIEnv(t, nil, "budget", "--server", gw.URL, "--surface", "chat")
	if code != 0 {
		t.Fatalf("budget: exit %d, %s", code, stderr)
	}
	for _, want := range []string{"Where the time goes: 3 requests (/chat)", "stage", "p50", "p95", "p99", "target", "share of TTFW", "ttft", "docs", "TIME TO FIRST WORD", "Critical path to the first word", rep.CriticalPath} {
		if !strings.Contains(out, want) {
			t.Errorf("budget output lacks %q:\n%s", want, out)
		}
	}
	if out, stderr, code := runCLIEnv(t, nil, "budget", "--server", gw.URL, "--json"); code != 0 || !strings.Contains(out, `"critical_path"`) {
		t.Errorf("budget --json: exit %d, %s %s", code, out, stderr)
	}
}
