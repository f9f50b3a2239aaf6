package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/firstword/firstword/internal/budget/window"
	"github.com/firstword/firstword/internal/gateway"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// knownStages is a pipeline with the lesson's stage delays: an 80 ms
// guard, three context lookups of 30, 120 and 60 ms in parallel, a 600 ms
// TTFT.
func knownStages(t *testing.T, extra string) *gatewaytest.Gateway {
	t.Helper()
	g := guardServer(t, 80*time.Millisecond)
	a, b, c := lookupServer(t, 30*time.Millisecond, 200, nil), lookupServer(t, 120*time.Millisecond, 200, nil), lookupServer(t, 60*time.Millisecond, 200, nil)
	return gatewaytest.Start(t, gatewaytest.MustParse(t, fmt.Sprintf(`
chat: {guard_mode: before}
guard:
  http: {url: "%s", timeout: 1s}
sources:
  lookups:
    - {name: orders, url: "%s/o", timeout: 1s}
    - {name: docs, url: "%s/d", timeout: 1s}
    - {name: profile, url: "%s/p", timeout: 1s}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
%s`, g.URL, a.URL, b.URL, c.URL, extra)))
}

func sendKnown(t *testing.T, gw *gatewaytest.Gateway, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := chatOnce(t, gw.URL, "", map[string]any{"message": "where is my order? [sim ttft=600ms gap=2ms tokens=10]"}, 0)
			if r.last.kind != "done" {
				t.Errorf("turn ended with %v", r.last)
			}
		}()
		time.Sleep(40 * time.Millisecond)
	}
	wg.Wait()
}

// TestBudgetReportKnownStages sends traffic with known stage delays and
// checks the live budget: each stage's p50 within 10% (or 5 ms) of its
// known value, TTFW within 10% of its expected value, and the critical
// path through the slowest source. The guard runs alongside the context
// sources (the lesson's "run the safety check alongside context
// building"), so the lesson's 80 + 120 + 600 = 800 ms before the first
// token becomes max(80, 120) + 600 = 720 ms.
func TestBudgetReportKnownStages(t *testing.T) {
	gw := knownStages(t, "")
	sendKnown(t, gw, 12)
	rep := gw.Window().Report(time.Now(), "", "", "chat", 5)
	byName := map[string]window.Row{}
	for _, r := range rep.Stages {
		byName[r.Name] = r
	}
	// A stage is never faster than what it waits for; a busy machine can
	// make it slower, but not by as much as the gaps between the stages'
	// delays (30, 60, 80, 120 ms).
	within := func(name string, got, want float64) {
		t.Helper()
		below, above := max(0.05*want, 2), max(0.5*want, 25)
		if got < want-below || got > want+above {
			t.Errorf("%s p50 = %.1f ms, want %.0f (-%.0f/+%.0f)", name, got, want, below, above)
		}
	}
	within("guard", byName["guard"].P50, 80)
	within("orders", byName["orders"].P50, 30)
	within("docs", byName["docs"].P50, 120)
	within("profile", byName["profile"].P50, 60)
	within("context", byName["context"].P50, 120)
	within("ttft", byName["ttft"].P50, 600)
	within("ttfw", rep.TTFW.P50, 720)
	if !strings.Contains(rep.CriticalPath, "docs → prompt → route → ttft") || strings.Contains(rep.CriticalPath, "orders") || strings.Contains(rep.CriticalPath, "guard →") {
		t.Errorf("critical path %q: want it through docs (the slowest source) to ttft", rep.CriticalPath)
	}
	// The stages before the sources (auth, parse, guard.local and the
	// user's message's write, which runs beside the sources) are
	// sub-millisecond and overlap, so the first steps of a request's path
	// vary; the tail, from the slowest source to the first token, must be
	// every request's.
	for _, rq := range gw.Window().Report(time.Now(), "", "", "chat", 12).Recent {
		if path := strings.Join(rq.CriticalPath, " → "); !strings.HasSuffix(path, "docs → prompt → route → ttft") {
			t.Errorf("request %s: critical path %q, want it through docs to ttft", rq.ID, path)
		}
	}
	if byName["ttft"].ShareOfTTFW < 0.75 || byName["ttft"].ShareOfTTFW > 0.9 {
		t.Errorf("ttft's share of TTFW %.2f, want about 600/720", byName["ttft"].ShareOfTTFW)
	}
	if len(rep.Recent) != 5 || len(rep.Recent[0].Stages) < 8 {
		t.Errorf("recent waterfalls: %+v", rep.Recent)
	}
	t.Logf("TTFW p50 %.1f ms; critical path %s", rep.TTFW.P50, rep.CriticalPath)

}

// TestOverBudgetNamed: a stage over its target is named.
func TestOverBudgetNamed(t *testing.T) {
	gw := knownStages(t, "budget:\n  stages:\n    docs: {p95: 50ms}\n    ttft: {p95: 2s}\n")
	sendKnown(t, gw, 4)
	rep := gw.Window().Report(time.Now(), "", "", "", 0)
	if rep.Overspend != "docs" {
		t.Errorf("most over budget %q, want docs (120 ms against 50 ms)", rep.Overspend)
	}
}

// TestMetricsExposition: /metrics parses with the Prometheus text parser
// and has the latency histograms and counters after traffic.
func TestMetricsExposition(t *testing.T) {
	gw := knownStages(t, "")
	sendKnown(t, gw, 3)
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=5ms gap=1ms tokens=5]"}]}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	time.Sleep(50 * time.Millisecond)
	resp, err := http.Get(gw.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	for _, name := range []string{"firstword_ttft_seconds", "firstword_ttfw_seconds", "firstword_ttc_seconds", "firstword_stage_seconds", "firstword_inter_token_gap_seconds", "firstword_output_tokens_per_second"} {
		f := families[name]
		if f == nil || f.GetType().String() != "HISTOGRAM" || len(f.Metric) == 0 || f.Metric[0].GetHistogram().GetSampleCount() == 0 {
			t.Errorf("histogram %s missing or empty", name)
		}
	}
	for _, name := range []string{"firstword_requests_total", "firstword_tokens_total", "firstword_cost_usd_total", "firstword_open_streams", "firstword_deployment_circuit_open", "firstword_deployment_ttft_ewma_seconds"} {
		if families[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	stages := map[string]bool{}
	for _, m := range families["firstword_stage_seconds"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "stage" {
				stages[l.GetValue()] = true
			}
		}
	}
	for _, s := range []string{"guard", "docs", "ttft", "generation", "persist", "store.prepare"} {
		if !stages[s] {
			t.Errorf("no stage_seconds series for stage %q (have %v)", s, stages)
		}
	}
	// Every metric the shipped Grafana dashboard queries exists.
	dash, err := os.ReadFile("../../deploy/grafana/firstword.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`firstword_[a-z_]+`).FindAllString(string(dash), -1) {
		name = strings.TrimSuffix(name, "_bucket")
		if families[name] == nil {
			t.Errorf("the dashboard queries %s, which /metrics does not have", name)
		}
	}
	var requests float64
	for _, m := range families["firstword_requests_total"].Metric {
		requests += m.GetCounter().GetValue()
	}
	if requests != 4 {
		t.Errorf("requests_total sums to %v, want 4", requests)
	}
}

// collector is an in-process OTLP/HTTP trace receiver.
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	spans map[string][]string // trace id → span names
	links map[string]string   // span name → parent span id (of the last seen)
	roots map[string]string   // trace id → root's parent span id
}

func newCollector(t *testing.T) *collector {
	c := &collector{spans: map[string][]string{}, roots: map[string]string{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("collector: %v", err)
			w.WriteHeader(400)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					tid := fmt.Sprintf("%x", sp.TraceId)
					c.spans[tid] = append(c.spans[tid], sp.Name)
					if strings.HasPrefix(sp.Name, "chat ") || strings.HasPrefix(sp.Name, "openai ") {
						c.roots[tid] = fmt.Sprintf("%x", sp.ParentSpanId)
					}
				}
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(nil)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) wait(t *testing.T, traceID string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		got := append([]string(nil), c.spans[traceID]...)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("trace %s: spans %v", traceID, c.spans)
	return nil
}

// TestTracingExport: with an OTLP endpoint, each request becomes a trace
// with a span per stage, under the trace ID the response announced, and a
// client's traceparent is continued.
func TestTracingExport(t *testing.T) {
	col := newCollector(t)
	gw := knownStages(t, "tracing: {endpoint: \""+col.URL+"\"}\n")
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "hi [sim ttft=20ms gap=1ms tokens=5]"}, 0)
	tid := r.headers.Get("X-Trace-Id")
	if len(tid) != 32 {
		t.Fatalf("X-Trace-Id = %q", tid)
	}
	spans := col.wait(t, tid, 8)
	for _, want := range []string{"chat chat", "guard", "docs", "orders", "profile", "context", "ttft", "persist"} {
		found := false
		for _, s := range spans {
			found = found || s == want
		}
		if !found {
			t.Errorf("no span %q in %v", want, spans)
		}
	}
	// Continue the client's trace.
	req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"hi [sim ttft=5ms gap=1ms tokens=3]"}]}`))
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Trace-Id"); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("X-Trace-Id = %q, want the client's trace", got)
	}
	col.wait(t, "4bf92f3577b34da6a3ce929d0e0e4736", 3)
	col.mu.Lock()
	parent := col.roots["4bf92f3577b34da6a3ce929d0e0e4736"]
	col.mu.Unlock()
	if parent != "00f067aa0ba902b7" {
		t.Errorf("root span's parent %q, want the client's span", parent)
	}
}

// TestMetricsListen: with metrics.listen, /metrics is served there alone
// and the main listener answers 404 at /metrics (a front door routing
// every path to it never exposes the metrics); the metrics listener closes
// with the gateway. An address in use fails Serve, naming the setting.
func TestMetricsListen(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1))
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, fmt.Sprintf("metrics: {listen: %q}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", addr)))
	if code, _ := getBody(t, gw.URL+"/metrics"); code != http.StatusNotFound {
		t.Errorf("main listener /metrics: %d, want 404", code)
	}
	code, body := getBody(t, "http://"+addr+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "firstword_usage_rows_queued") {
		t.Errorf("metrics listener /metrics: %d, want 200 with firstword_usage_rows_queued:\n%.300s", code, body)
	}
	if code, _ := getBody(t, "http://"+addr+"/healthz"); code != http.StatusNotFound {
		t.Errorf("metrics listener /healthz: %d, want 404 (it serves /metrics only)", code)
	}
	if code, _ := getBody(t, gw.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("main listener /healthz: %d", code)
	}

	// A second gateway on the same metrics address cannot start.
	cfg := gatewaytest.MustParse(t, fmt.Sprintf("metrics: {listen: %q}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", addr))
	g2, err := gateway.Build(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Serve(t.Context(), ln); err == nil || !strings.Contains(err.Error(), "metrics.listen") {
		t.Errorf("Serve with metrics.listen in use: %v, want an error naming metrics.listen", err)
	}

	if err := gw.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("the metrics listener still answers after the gateway stopped")
	}
}
