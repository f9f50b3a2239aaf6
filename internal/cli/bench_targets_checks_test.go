package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/cli"
)

var updateBench = flag.Bool("update-bench", false, "rewrite internal/cli/testdata/bench/*.golden")

func bench(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = cli.Main(context.Background(), append([]string{"bench"}, args...), func(string) string { return "" }, nil, &o, &e)
	return o.String(), e.String(), code
}

// reportChecks reads the checks of a report --json wrote.
func reportChecks(t *testing.T, path string) (pass bool, results []map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Checks *struct {
			Pass    bool             `json:"pass"`
			Results []map[string]any `json:"results"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Checks == nil {
		t.Fatalf("%s: no checks (%v)", path, err)
	}
	return r.Checks.Pass, r.Checks.Results
}

// TestBenchRefusedExitsNonZero: a run where every request failed, a
// target answering 500 or closing every connection, exits 1 and says
// which target passed --max-errors, on stdout and in the JSON.
func TestBenchRefusedExitsNonZero(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"500": func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			http.Error(w, "no", http.StatusInternalServerError)
		},
		"close": func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := httptest.NewServer(h)
			t.Cleanup(s.Close)
			jsonPath := filepath.Join(t.TempDir(), "r.json")
			out, stderr, code := bench(t, "--target", "down="+s.URL, "--requests", "3", "--rounds", "1", "--json", jsonPath)
			if code != 1 || !regexp.MustCompile(`(?m)^FAIL  --max-errors 1%  down: 100% of 3 requests failed \(\w+ 3\), more than --max-errors 1%$`).MatchString(out) ||
				!strings.Contains(stderr, "1 of 1 checks failed") {
				t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, out, stderr)
			}
			if pass, res := reportChecks(t, jsonPath); pass || len(res) != 1 || res[0]["pass"] != false || res[0]["value"] != 1.0 {
				t.Errorf("JSON checks: pass %v, %v", pass, res)
			}
			// --max-errors 100% lets it pass: the run itself went as asked.
			if _, _, code := bench(t, "--target", "down="+s.URL, "--requests", "2", "--rounds", "1", "--max-errors", "100%"); code != 0 {
				t.Errorf("--max-errors 100%%: exit %d", code)
			}
		})
	}
}

// TestBenchFailIf: against two live targets, a check that holds passes,
// one that fails exits 1, both printed and in the JSON; the HTML carries
// every column of the JSON's cells and the over-time plots.
func TestBenchFailIf(t *testing.T) {
	url, _ := openAITarget(t)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	args := []string{"--target", "a=" + url, "--target", "b=" + url, "--requests", "4", "--rounds", "2", "--concurrency", "1,2", "--baseline", "b",
		"--json", jsonPath, "--html", htmlPath}
	out, stderr, code := bench(t, append(args, "--fail-if", "a:ttfw.p95>30s", "--fail-if", "a:ttfw.p50<b*0.001", "--fail-if", "a@2:ttfw.min>=0ms")...)
	if code != 1 || !strings.Contains(stderr, "1 of 7 checks failed") {
		t.Fatalf("exit %d, stderr %q, want 1 and 1 of 7 failed:\n%s", code, stderr, out)
	}
	for _, re := range []string{
		`(?m)^pass  --max-errors 1%  a: 0% of 8 requests failed$`,
		`(?m)^pass  a:ttfw.p95>30s  at concurrency 1: a ttfw p95 \d+\.\d ms not > 30000\.0 ms$`,
		`(?m)^pass  a:ttfw.p95>30s  at concurrency 2: `,
		`(?m)^pass  a:ttfw.p50<b\*0.001  at concurrency 1: a ttfw p50 \d+\.\d ms not < \d+\.\d ms \(b \d+\.\d ms × 0.001\)$`,
		`(?m)^FAIL  a@2:ttfw.min>=0ms  at concurrency 2: a ttfw min \d+\.\d ms >= 0\.0 ms$`,
		`(?m)^checks: 1 of 7 failed$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("stdout does not match %s:\n%s", re, out)
		}
	}
	pass, res := reportChecks(t, jsonPath)
	if pass || len(res) != 7 {
		t.Fatalf("JSON checks: pass %v, %d results", pass, len(res))
	}
	var verdicts []string
	for _, r := range res {
		v := "pass"
		if r["pass"] != true {
			v = "FAIL"
		}
		verdicts = append(verdicts, v+" "+r["check"].(string))
	}
	if !slices.Contains(verdicts, "FAIL a@2:ttfw.min>=0ms") || !slices.Contains(verdicts, "pass a:ttfw.p95>30s") {
		t.Errorf("JSON verdicts %q", verdicts)
	}
	checkHTML(t, jsonPath, htmlPath, out)

	// The same report judged again with --from and checks that hold: exit 0.
	out, stderr, code = bench(t, "--from", jsonPath, "--fail-if", "a:ttfw.p95>30s", "--fail-if", "b:errors>0%")
	if code != 0 || !strings.Contains(out, "checks: all 6 passed") {
		t.Errorf("--from with passing checks: exit %d, %s\n%s", code, stderr, out)
	}
}

// checkHTML parses the HTML report: its table has a column for every
// figure of the JSON's cells (the stdout table's columns among them) and
// each row shows what stdout shows; it has an over-time plot per level.
func checkHTML(t *testing.T, jsonPath, htmlPath, stdout string) {
	t.Helper()
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	tables, figures := parseHTML(t, page)
	cells := tables["cells"]
	if len(cells) < 2 {
		t.Fatalf("the HTML has no table of cells: %v", tables)
	}
	head := cells[0]
	col := func(h string) int { return slices.Index(head, h) }
	// Where each of a cell's JSON fields is shown.
	shownIn := map[string]string{
		"target": "target", "concurrency": "conc", "partial": "conc", "peak_in_flight": "peak", "requests": "ok/n", "ok": "ok/n",
		"errors": "errors", "ttfb_ms": "TTFB p50", "ttfw_ms": "TTFW p50 [95% CI]", "ttc_ms": "TTC p50", "tokens_per_s": "tok/s p50",
		"gaps": "gaps", "gap_p50_ms": "gap p50", "gap_p99_ms": "gap p99", "bunched_share": "bunched", "throughput_per_s": "req/s",
		"cpu_per_request_ms": "cpu/req", "rss_max_mb": "rss", "added_ttfw_p50_ms": "vs baseline", "added_ttc_p50_ms": "vs baseline",
		"ttfw_p50_ratio": "vs baseline", "ttc_p50_ratio": "vs baseline",
		// Samples are drawn, not tabulated.
		"ttfw_samples_ms": "", "gap_samples_ms": "", "ttfw_over_time": "", "failed_at_s": "",
	}
	raw, _ := os.ReadFile(jsonPath)
	var rep struct {
		Cells []map[string]json.RawMessage `json:"cells"`
		Load  struct {
			Concurrency []int `json:"concurrency"`
		} `json:"load"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Cells {
		for k := range c {
			h, ok := shownIn[k]
			if !ok {
				t.Errorf("the JSON's cells have %q, which the HTML does not show (add a column, then add it here)", k)
			} else if h != "" && col(h) < 0 {
				t.Errorf("the HTML has no column %q for the JSON's %q; columns %q", h, k, head)
			}
		}
	}
	for _, h := range []string{"TTFW p95 95% CI", "TTFW p99 95% CI", "TTC p50 95% CI", "TTC p95 95% CI"} {
		if col(h) < 0 {
			t.Errorf("the HTML has no column %q", h)
		}
	}
	// Every stdout row, column by column, is an HTML row.
	lines := strings.Split(stdout, "\n")
	stdoutHead := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(lines[0]), -1)
	for i, line := range lines[1:len(cells)] {
		fields := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		row := cells[i+1]
		for k, h := range stdoutHead {
			if c := col(h); c < 0 || k >= len(fields) || row[c] != fields[k] {
				t.Errorf("row %d column %q: stdout %q, HTML %q", i, h, fields, row)
				break
			}
		}
	}
	for _, conc := range rep.Load.Concurrency {
		title := "Time to first word over the run, concurrency " + strconv.Itoa(conc)
		if !slices.Contains(figures, title) {
			t.Errorf("no figure %q among %q", title, figures)
		}
	}
}

// parseHTML returns the text of every table (by id: rows of cells) and
// the titles of the figures, read with encoding/xml's HTML mode.
func parseHTML(t *testing.T, page []byte) (tables map[string][][]string, figures []string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	tables = map[string][][]string{}
	var table string
	var cell *strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the HTML does not parse: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := func(name string) string {
				for _, a := range tok.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			switch tok.Name.Local {
			case "table":
				table = attr("id")
			case "tr":
				tables[table] = append(tables[table], nil)
			case "td", "th":
				cell = &strings.Builder{}
			case "figure":
				figures = append(figures, attr("title"))
			}
		case xml.EndElement:
			switch tok.Name.Local {
			case "td", "th":
				rows := tables[table]
				rows[len(rows)-1] = append(rows[len(rows)-1], cell.String())
				cell = nil
			case "table":
				table = ""
			}
		case xml.CharData:
			if cell != nil {
				cell.Write(tok)
			}
		}
	}
	return tables, figures
}

// TestBenchChecksGolden: a saved report judged with --from: on the point
// estimate a check fails that the whole interval does not, so --fail-on
// interval passes it; the table says the machine was busy and that
// /v1/chat's NO is its grace window.
func TestBenchChecksGolden(t *testing.T) {
	report := filepath.Join("testdata", "bench", "report.json")
	checks := []string{"--fail-if", "fw@1:ttfw.p50>direct+3ms", "--fail-if", "fw:ttfw.p95>800ms", "--fail-if", "fw:rps<direct*0.8", "--fail-if", "fw@10:cpu>5ms", "--max-errors", "5%"}
	for _, tc := range []struct {
		golden string
		args   []string
		code   int
	}{
		{"checks_point.golden", nil, 1},
		{"checks_interval.golden", []string{"--fail-on", "interval"}, 0},
	} {
		jsonPath := filepath.Join(t.TempDir(), "r.json")
		out, stderr, code := bench(t, append(append([]string{"--from", report, "--json", jsonPath}, checks...), tc.args...)...)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr %q", tc.golden, code, tc.code, stderr)
		}
		golden := filepath.Join("testdata", "bench", tc.golden)
		if *updateBench {
			os.WriteFile(golden, []byte(out), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), out); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.golden, diff)
		}
		if pass, _ := reportChecks(t, jsonPath); pass != (tc.code == 0) {
			t.Errorf("%s: JSON checks pass %v", tc.golden, pass)
		}
	}
}

// TestBenchFailIfRefused: a check that does not parse, or names what the
// run does not have, is a usage error before anything is measured, and
// says what is wrong and what is known.
func TestBenchFailIfRefused(t *testing.T) {
	target := "a=http://127.0.0.1:1/v1/chat/completions"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", target, "--fail-if", "a:ttwf.p95>1ms"}, `unknown metric "ttwf": known are ttfb.{p50,p95,p99,mean,min,max}, ttfw.`},
		{[]string{"--target", target, "--fail-if", "a:ttfw.p90>1ms"}, `unknown statistic "p90" of ttfw: known are p50, p95, p99, mean, min, max`},
		{[]string{"--target", target, "--fail-if", "c:ttfw.p50>a+1ms"}, "no target c: the targets are a"},
		{[]string{"--target", target, "--fail-if", "a:ttfw.p50>1parsec"}, `value "1parsec": want a time such as 800ms or 1.5s`},
		{[]string{"--target", target, "--fail-if", "a@5:ttfw.p50>1ms"}, "no level @5: the levels are 1"},
		{[]string{"--target", target, "--fail-on", "median"}, "--fail-on: want point or interval"},
		{[]string{"--target", target, "--max-errors", "5"}, "a share is at most 100%"},
		{[]string{"--fail-if", "a:rps<1", "--compare", "a.json", "b.json"}, "not --compare"},
	} {
		_, stderr, code := bench(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("bench %q: exit %d, want 2 and %q in stderr:\n%s", tc.args, code, tc.want, stderr[:min(len(stderr), 400)])
		}
	}
}

// TestBenchHelpListsBothModes: "help bench" and "bench -h", with or
// without --target, list the built-in comparison's flags and --target's.
func TestBenchHelpListsBothModes(t *testing.T) {
	for _, args := range [][]string{{"help", "bench"}, {"bench", "-h"}, {"bench", "--target", "x=http://127.0.0.1:1", "--help"}} {
		var o, e bytes.Buffer
		code := cli.Main(context.Background(), args, func(string) string { return "" }, nil, &o, &e)
		out := o.String()
		if code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, e.String())
		}
		for _, want := range []string{"Usage: firstword bench", "Flags of the built-in comparison", "--latency-requests N", "--phases LIST",
			"Flags with --target", "--target NAME=URL", "--fail-if CHECK", "--fail-on point", "--max-errors SHARE", "TARGET[@LEVEL]:METRIC[.STAT] OP VALUE"} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: no %q in:\n%s", args, want, out)
			}
		}
	}
}
