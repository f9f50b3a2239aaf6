package cli_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/advisor"
	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/budget/window"
	"github.com/firstword/firstword/internal/cli"
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
	for _, want := range []string{"Where the time goes: 3 requests (/chat)", "stage", "min", "median", "max", "Fewer than 20 requests", "target", "share of TTFW", "ttft", "docs", "TIME TO FIRST WORD", "Critical path to the first word", rep.CriticalPath} {
		if !strings.Contains(out, want) {
			t.Errorf("budget output lacks %q:\n%s", want, out)
		}
	}
	if out, stderr, code := runCLIEnv(t, nil, "budget", "--server", gw.URL, "--json"); code != 0 || !strings.Contains(out, `"critical_path"`) {
		t.Errorf("budget --json: exit %d, %s %s", code, out, stderr)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestPrintBudgetGolden: the budget's table, from a window of sim
// traffic: with a model that thinks, the time to first thought and the
// thinking time (with its share of the wait for the first word) come
// below the stages, before the time to first word; without one, neither.
func TestPrintBudgetGolden(t *testing.T) {
	ms := time.Millisecond
	// One request: parse, route, an upstream attempt whose first token
	// came at ttft, thinking from thought to it when thought > 0, then
	// generation until done; the first word shown 1 ms after the first
	// token.
	type request struct{ thought, ttft, done time.Duration }
	observe := func(w *window.Window, now time.Time, i int, r request) {
		start := now.Add(-10 * time.Second)
		at := func(d time.Duration) time.Time { return start.Add(d) }
		rec := budget.New(start)
		rec.Add("parse", at(0), at(ms/2), "")
		rec.Add("route", at(ms/2), at(ms), "")
		rec.AddGroup("upstream sim/reasoner", at(ms), at(r.done), "ok")
		rec.Add("ttft", at(ms), at(r.ttft), "sim/reasoner")
		if r.thought > 0 {
			rec.Add("first_thought", at(ms), at(r.thought), "sim/reasoner")
			rec.Add("thinking", at(r.thought), at(r.ttft), "sim/reasoner")
			rec.Thought(at(r.thought), r.ttft-r.thought)
		}
		rec.Add("generation", at(r.ttft), at(r.done), "sim/reasoner")
		rec.FirstWord(at(r.ttft + ms))
		rec.Complete(at(r.done + ms))
		w.Observe(now, fmt.Sprint(i), "", "", "openai", "reasoner", "complete", rec)
	}
	// sim traffic: n requests, the i-th's times growing with i; with
	// thinking, the model thinks from 150 ms + 10 ms·i for 800 ms + 60 ms·i.
	traffic := func(n int, think bool) []request {
		var out []request
		for i := range n {
			d := time.Duration(i)
			r := request{ttft: 300*ms + 20*ms*d}
			if think {
				r.thought = 150*ms + 10*ms*d
				r.ttft = r.thought + 800*ms + 60*ms*d
			}
			r.done = r.ttft + 500*ms + 10*ms*d
			out = append(out, r)
		}
		return out
	}
	for _, tt := range []struct {
		name     string
		requests []request
	}{
		// Questions a routing rule kept from the thinking model among them.
		{"thinking", append(traffic(20, true), traffic(5, false)...)},
		{"plain", traffic(20, false)},
		// Two requests, one slow: min, median and max, not a p95 that
		// is the fast one.
		{"small", append(traffic(1, false), request{ttft: 1500 * ms, done: 2600 * ms})},
		// Two requests, the slow one over the 2 s target: over budget,
		// though the p95 of two is the fast one.
		{"small-over", append(traffic(1, false), request{ttft: 2500 * ms, done: 3000 * ms})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
			w := window.New(5*time.Minute, window.Targets{TTFW: &window.Target{Percentile: 95, Value: 2 * time.Second}}, 10)
			for i, r := range tt.requests {
				observe(w, now, i, r)
			}
			rep := w.Report(now, "", "", "openai", 0)
			var out bytes.Buffer
			cli.PrintBudget(&out, &rep)
			checkGolden(t, filepath.Join("testdata", "budget", tt.name+".txt"), out.Bytes())
		})
	}
}

// TestPrintAdviceGolden: the advisor's table for an alias whose answers
// are 100 or 300 tokens at 100 tokens/s and whose prompts repeat, and the
// note for an alias the advisor cannot route to a smaller one.
func TestPrintAdviceGolden(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	var ss []advisor.Sample
	for i := range 40 {
		n := 100 + 200*(i%2)
		gen := time.Duration(float64(n-1) / 100 * float64(time.Second))
		ss = append(ss, advisor.Sample{Time: t0.Add(time.Duration(i) * time.Second), Alias: "chat", Deployment: "sim/medium", Complete: true,
			TTFT: 600 * time.Millisecond, TTFW: 601 * time.Millisecond, Total: 601*time.Millisecond + gen, Gen: gen, CallStart: time.Millisecond,
			Input: 40, Output: n, Cost: float64(n) * 4e-6, RepeatKey: uint64(i%8 + 1)})
	}
	adv := advisor.Advise(map[string][]advisor.Sample{"chat": ss}, advisor.Options{
		Aliases: map[string]advisor.Alias{"chat": {FirstTokenTimeout: 5 * time.Second}},
		Price: func(string) (advisor.Price, bool) {
			return advisor.Price{Input: 1e-6, CachedInput: 1e-7, Output: 4e-6}, true
		},
	})
	var out bytes.Buffer
	cli.PrintAdvice(&out, adv)
	checkGolden(t, filepath.Join("testdata", "budget", "advice.txt"), out.Bytes())
	out.Reset()
	cli.PrintAdvice(&out, nil)
	if !strings.Contains(out.String(), "No advice yet") {
		t.Errorf("no advice: %q", out.String())
	}
}

// TestBudgetAdviseCommand: budget --advise reads a running gateway's
// GET /v1/budget/advice and prints it; --json prints it as sent.
func TestBudgetAdviseCommand(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, `
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`))
	for i := range 24 {
		resp, err := http.Post(gw.URL+"/v1/chat/completions", "application/json", strings.NewReader(
			fmt.Sprintf(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"question %d [sim ttft=2ms gap=1ms tokens=%d]"}]}`, i, 5+i%2*20)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var out, stderr string
	var code int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out, stderr, code = runCLIEnv(t, nil, "budget", "--server", gw.URL, "--advise"); code != 0 || strings.Contains(out, "24 requests") {
			break
		}
	}
	if code != 0 {
		t.Fatalf("budget --advise: exit %d, %s", code, stderr)
	}
	for _, want := range []string{"chat: 24 requests", "Ask for less: cap answers at", "max_tokens:", "Largest first, by p95 time to complete:"} {
		if !strings.Contains(out, want) {
			t.Errorf("budget --advise lacks %q:\n%s", want, out)
		}
	}
	if out, stderr, code := runCLIEnv(t, nil, "budget", "--server", gw.URL, "--advise", "--json"); code != 0 || !strings.Contains(out, `"by_ttc"`) {
		t.Errorf("budget --advise --json: exit %d, %s %s", code, out, stderr)
	}
}

// checkGolden compares got with the golden file (-update rewrites it).
func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", golden, diff)
	}
}
