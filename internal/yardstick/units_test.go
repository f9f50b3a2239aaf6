package yardstick

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/hostcpu"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name, url     string
		surface       Surface
		wantURL       string
		wantSurface   Surface
		wantLoopback  bool
		wantPublicURL string
	}{
		{"openai by path", "http://127.0.0.1:8080/v1/chat/completions", "", "http://127.0.0.1:8080/v1/chat/completions", SurfaceOpenAI, true, ""},
		{"anthropic by path", "http://localhost/v1/messages", "", "http://localhost/v1/messages", SurfaceAnthropic, true, ""},
		{"responses by path", "http://[::1]:9/v1/responses", "", "http://[::1]:9/v1/responses", SurfaceResponses, true, ""},
		{"chat by path", "http://127.0.0.1:1/v1/chat", "", "http://127.0.0.1:1/v1/chat", SurfaceChat, true, ""},
		{"bare host is openai", "http://127.0.0.1:1", "", "http://127.0.0.1:1/v1/chat/completions", SurfaceOpenAI, true, ""},
		{"bare host, surface given", "http://127.0.0.1:1/", SurfaceAnthropic, "http://127.0.0.1:1/v1/messages", SurfaceAnthropic, true, ""},
		{"base URL ending in /v1", "http://127.0.0.1:1/api/v1/", SurfaceResponses, "http://127.0.0.1:1/api/v1/responses", SurfaceResponses, true, ""},
		{"custom path, surface given", "https://api.example.com/proxy/x", SurfaceResponses, "https://api.example.com/proxy/x", SurfaceResponses, false, ""},
		{"key in the URL is not shown", "https://u:sk-secret@api.example.com/v1/chat/completions?key=sk-2", "", "https://u:sk-secret@api.example.com/v1/chat/completions?key=sk-2", SurfaceOpenAI, false, "https://api.example.com/v1/chat/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := &Target{Name: "t", URL: tc.url, Surface: tc.surface}
			if err := tg.Resolve(); err != nil {
				t.Fatal(err)
			}
			if tg.URL != tc.wantURL || tg.Surface != tc.wantSurface || tg.Loopback() != tc.wantLoopback {
				t.Errorf("Resolve = %s %s loopback %v, want %s %s %v", tg.URL, tg.Surface, tg.Loopback(), tc.wantURL, tc.wantSurface, tc.wantLoopback)
			}
			if tc.wantPublicURL != "" && tg.PublicURL() != tc.wantPublicURL {
				t.Errorf("PublicURL = %s, want %s", tg.PublicURL(), tc.wantPublicURL)
			}
		})
	}
	for _, bad := range []string{"ftp://x/", "127.0.0.1:8080", "http://", "::"} {
		if err := (&Target{Name: "t", URL: bad}).Resolve(); err == nil {
			t.Errorf("Resolve(%q) accepted", bad)
		}
	}
}

// TestRemoteRefused: a target off loopback needs AllowRemote.
func TestRemoteRefused(t *testing.T) {
	opts := func(allow bool) Options {
		return Options{Targets: []*Target{{Name: "local", URL: "http://127.0.0.1:1"}, {Name: "far", URL: "https://203.0.113.7/v1/messages"}},
			Concurrency: []int{1}, Requests: 1, Rounds: 1, MaxTime: time.Second, RequestTimeout: time.Second, AllowRemote: allow}
	}
	o := opts(false)
	err := o.Check()
	if err == nil || !strings.Contains(err.Error(), "far") || !strings.Contains(err.Error(), "--allow-remote") || strings.Contains(err.Error(), "local") {
		t.Errorf("Check without AllowRemote = %v, want far refused, naming --allow-remote", err)
	}
	o = opts(true)
	if err := o.Check(); err != nil {
		t.Errorf("Check with AllowRemote = %v", err)
	}
}

func TestCheckBounds(t *testing.T) {
	o := Options{Targets: []*Target{{Name: "a", URL: "http://127.0.0.1:1"}}, Baseline: "b", Concurrency: []int{0}, Rounds: 0}
	err := o.Check()
	for _, want := range []string{"--baseline b", "concurrency 0", "--requests or --duration", "--max-time", "--rounds"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %v, want it to say %q", err, want)
		}
	}
}

func TestBunched(t *testing.T) {
	ms := func(xs ...float64) []time.Duration {
		var d []time.Duration
		for _, x := range xs {
			d = append(d, time.Duration(x*float64(time.Millisecond)))
		}
		return d
	}
	for _, tc := range []struct {
		name string
		gaps []time.Duration
		want int
	}{
		{"paced", ms(10, 10, 10, 10), 0},
		{"pairs after a long gap", ms(20, 0.1, 20, 0.2), 2},
		{"a run of three", ms(30, 0.1, 0.1, 0.1, 10), 3},
		{"short gaps after a short gap", ms(2, 0.1, 0.1), 0},
		{"first gap short", ms(0.1, 10), 0},
		{"exactly 1 ms is not bunched", ms(10, 1), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := bunched(tc.gaps, 5*time.Millisecond); got != tc.want {
				t.Errorf("bunched(%v) = %d, want %d", tc.gaps, got, tc.want)
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	var xs []float64
	for i := 100; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	d := summarise(xs)
	if d.N != 100 || d.P50 != 50 || d.P95 != 95 || d.P99 != 99 || d.Min != 1 || d.Max != 100 || d.Mean != 50.5 {
		t.Errorf("summarise = %+v", d)
	}
	for _, ci := range [][2]float64{d.CI50, d.CI95, d.CI99} {
		if ci[0] > ci[1] || ci[0] < 1 || ci[1] > 100 {
			t.Errorf("CI %v", ci)
		}
	}
	if d.CI50[0] >= 50 || d.CI50[1] <= 50 {
		t.Errorf("CI50 %v does not straddle the median of a spread sample", d.CI50)
	}
	if one := summarise([]float64{7}); one.P50 != 7 || one.CI99 != [2]float64{7, 7} {
		t.Errorf("summarise one = %+v", one)
	}
	if e := summarise(nil); e.N != 0 {
		t.Errorf("summarise nil = %+v", e)
	}
}

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&statusError{503}, "http_503"},
		{&eventError{code: "protocol"}, "event_protocol"},
		{&chat.Error{Category: chat.CategoryOverloaded}, "event_overloaded"},
		{chat.ProtocolError(errors.New("no [DONE]")), "protocol"},
		{chat.ProtocolError(fmt.Errorf("read: %w", io.ErrUnexpectedEOF)), "cut"},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), "refused"},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), "cut"},
		{os.ErrDeadlineExceeded, "timeout"},
		{errors.New("?"), "other"},
	} {
		if got := errorKind(tc.err); got != tc.want {
			t.Errorf("errorKind(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestChatReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		texts    []string
		end      string // "" for a clean end, else the error kind
	}{
		{"complete", "event: meta\ndata: {}\n\n: ping\n\nevent: delta\ndata: {\"text\":\"a\"}\n\nevent: delta\ndata: {\"text\":\"b\"}\n\nevent: done\ndata: {\"status\":\"complete\"}\n\n", []string{"a", "b"}, ""},
		{"error event", "event: delta\ndata: {\"text\":\"a\"}\n\nevent: error\ndata: {\"code\":\"upstream_unavailable\",\"message\":\"x\"}\n\n", []string{"a"}, "event_upstream_unavailable"},
		{"cut", "event: delta\ndata: {\"text\":\"a\"}\n\n", []string{"a"}, "protocol"},
		{"malformed delta", "event: delta\ndata: {\"text\":1}\n\n", nil, "protocol"},
		{"done timeout", "event: delta\ndata: {\"text\":\"a\"}\n\nevent: done\ndata: {\"status\":\"timeout\",\"usage\":{\"output_tokens\":1}}\n\n", []string{"a"}, "done_timeout"},
		{"done cancelled", "event: done\ndata: {\"status\":\"cancelled\"}\n\n", nil, "done_cancelled"},
		{"done with usage", "event: done\ndata: {\"usage\":{\"output_tokens\":9}}\n\n", []string{""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newChatReader(strings.NewReader(tc.in))
			var texts []string
			for {
				c, err := r.Next()
				if err == io.EOF {
					if tc.end != "" {
						t.Errorf("clean end, want %s", tc.end)
					}
					break
				}
				if err != nil {
					if kind := errorKind(err); kind != tc.end {
						t.Errorf("ended %s (%v), want %q", kind, err, tc.end)
					}
					break
				}
				texts = append(texts, c.Text)
			}
			if diff := cmp.Diff(tc.texts, texts); diff != "" {
				t.Errorf("texts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProcParsers(t *testing.T) {
	stat := []byte("4242 (fire word) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 9 0 100 200 300\n")
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 4*time.Second {
		t.Errorf("parseStatCPU = %v, %v, want 4s", cpu, err)
	}
	rss, err := parseStatusRSS([]byte("Name:\tx\nVmRSS:\t  2048 kB\nThreads: 3\n"))
	if err != nil || rss != 2048<<10 {
		t.Errorf("parseStatusRSS = %d, %v", rss, err)
	}
	if _, err := parseStatCPU([]byte("1 (x) S 1")); err == nil {
		t.Error("short stat accepted")
	}
	// This process, read live.
	if s, err := readProc(os.Getpid()); err != nil || s.RSS <= 0 {
		t.Errorf("readProc(self) = %+v, %v", s, err)
	}
}

// TestCompareGolden: --compare prints the change per target and level.
func TestCompareGolden(t *testing.T) {
	cell := func(target string, conc int, ttfw, ttc float64, failed int) Cell {
		return Cell{Target: target, Concurrency: conc, Requests: 50, OK: 50 - failed,
			TTFW: Dist{N: 50, P50: ttfw, P95: ttfw * 1.5, P99: ttfw * 2}, TTC: Dist{N: 50 - failed, P50: ttc, P95: ttc * 1.2},
			Gaps: 100, GapP99: 12}
	}
	old := &Report{Cells: []Cell{cell("a", 1, 50, 250, 0), cell("a", 10, 60, 270, 1), cell("gone", 1, 1, 1, 0)},
		Targets: []TargetInfo{{Name: "a", URL: "http://127.0.0.1:1/v1/chat/completions", Surface: SurfaceOpenAI, Model: "m1"}, {Name: "gone", URL: "http://127.0.0.1:2/v1/chat", Surface: SurfaceChat, Model: "chat"}},
		Load:    LoadInfo{Prompt: "hi", MaxTokens: 64}}
	cur := &Report{Cells: []Cell{cell("a", 1, 40, 260, 0), cell("a", 10, 66, 270, 0), cell("new", 1, 1, 1, 0)},
		Targets: []TargetInfo{{Name: "a", URL: "http://127.0.0.1:3/v1/chat", Surface: SurfaceChat, Model: "m2"}, {Name: "new", URL: "http://127.0.0.1:4/v1/chat", Surface: SurfaceChat, Model: "chat"}},
		Load:    LoadInfo{Prompt: "hello", MaxTokens: 64}}
	var b bytes.Buffer
	WriteCompare(&b, old, cur)
	checkGolden(t, "compare.golden", b.Bytes())
	b.Reset()
	WriteCompare(&b, old, &Report{Cells: []Cell{cell("other", 5, 1, 1, 0)}})
	if !strings.Contains(b.String(), "no target and concurrency level in common") {
		t.Errorf("disjoint reports: %s", b.String())
	}
}

// TestLoadShapes: open loop at a rate, a level bounded by time alone, and
// a run cut by MaxTime, against a fast fake target.
func TestLoadShapes(t *testing.T) {
	url := serve(t, chatTarget(time.Millisecond, time.Millisecond, 3)) + "/v1/chat"
	base := func() Options {
		return Options{Targets: []*Target{{Name: "c", URL: url}}, Concurrency: []int{2}, Rounds: 2, MaxTime: time.Minute,
			RequestTimeout: 5 * time.Second, Prompt: "hi", BunchAfter: 5 * time.Millisecond}
	}
	o := base()
	o.Requests, o.Rate = 6, 100
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Cells[0]; c.Requests != 6 || c.OK != 6 || rep.Load.Rate != 100 {
		t.Errorf("open loop: %d requests, %d ok, want 6", c.Requests, c.OK)
	}
	o = base()
	o.Duration = 200 * time.Millisecond
	rep, err = Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Cells[0]; c.Requests < 2 || c.OK != c.Requests || rep.Truncated {
		t.Errorf("duration only: %d requests, %d ok, truncated %v", c.Requests, c.OK, rep.Truncated)
	}
	o = base()
	o.Duration, o.MaxTime = time.Hour, 300*time.Millisecond
	rep, err = Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Truncated || len(rep.Cells) != 1 || rep.Cells[0].Requests != rep.Cells[0].OK {
		t.Errorf("cut by MaxTime: truncated %v, cells %d, requests cut counted as errors: %+v", rep.Truncated, len(rep.Cells), rep.Cells)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "--max-time cut the run") {
		t.Errorf("table does not say the run was cut:\n%s", table.String())
	}
}

func TestTerminalProgressQuietWhenPiped(t *testing.T) {
	if p := TerminalProgress(&bytes.Buffer{}); p != nil {
		t.Error("progress on a buffer")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := TerminalProgress(f); p != nil {
		t.Error("progress on a file")
	}
}

// TestErrorsCounted: failures are counted by kind, and a level where
// nothing succeeded still makes a table, JSON and HTML.
func TestErrorsCounted(t *testing.T) {
	down := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
	}))
	failing := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: delta\ndata: {\"text\":\"a\"}\n\nevent: error\ndata: {\"code\":\"overloaded\",\"message\":\"x\"}\n\n")
	}))
	rep, err := Run(t.Context(), Options{Targets: []*Target{{Name: "down", URL: down}, {Name: "failing", URL: failing + "/v1/chat"}},
		Baseline: "down", Concurrency: []int{1}, Requests: 3, Rounds: 1, MaxTime: time.Minute, RequestTimeout: 5 * time.Second, Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cellOf(t, rep, "down", 1); c.OK != 0 || c.Errors["http_503"] != 3 || c.TTFW.N != 0 {
		t.Errorf("down: %+v", c)
	}
	if c := cellOf(t, rep, "failing", 1); c.OK != 0 || c.Errors["event_overloaded"] != 3 || c.TTFW.N != 3 || c.AddedTTFWP50 != nil {
		t.Errorf("failing: %+v", c)
	}
	dir := t.TempDir()
	if err := rep.WriteJSON(filepath.Join(dir, "r.json")); err != nil {
		t.Error(err)
	}
	if err := rep.WriteHTML(filepath.Join(dir, "r.html")); err != nil {
		t.Error(err)
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	if !strings.Contains(b.String(), "http_503 3") || !strings.Contains(b.String(), "event_overloaded 3") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestHostInReports: the machine's CPU over the run is in the table, the
// HTML and the JSON, with the warning when the hypervisor took enough to
// make the figures noisy.
func TestHostInReports(t *testing.T) {
	for _, tc := range []struct {
		host  hostcpu.Usage
		noisy bool
	}{{hostcpu.Usage{Busy: 0.62, Steal: 0.21}, true}, {hostcpu.Usage{Busy: 0.4, Steal: 0.01}, false}} {
		rep := &Report{Host: &tc.host}
		var b bytes.Buffer
		rep.WriteTable(&b)
		line := fmt.Sprintf("machine: %.0f%% busy, %.0f%% stolen by the hypervisor", 100*tc.host.Busy, 100*tc.host.Steal)
		if !strings.Contains(b.String(), line) || strings.Contains(b.String(), "noisy") != tc.noisy {
			t.Errorf("steal %v: table without %q or with the wrong warning:\n%s", tc.host.Steal, line, b.String())
		}
		dir := t.TempDir()
		if err := rep.WriteHTML(filepath.Join(dir, "r.html")); err != nil {
			t.Fatal(err)
		}
		page, _ := os.ReadFile(filepath.Join(dir, "r.html"))
		if !strings.Contains(string(page), "stolen by the hypervisor") || strings.Contains(string(page), "noisy") != tc.noisy {
			t.Errorf("steal %v: HTML without the machine line or with the wrong warning", tc.host.Steal)
		}
		if err := rep.WriteJSON(filepath.Join(dir, "r.json")); err != nil {
			t.Fatal(err)
		}
		var back Report
		raw, _ := os.ReadFile(filepath.Join(dir, "r.json"))
		if err := json.Unmarshal(raw, &back); err != nil || back.Host == nil || *back.Host != tc.host {
			t.Errorf("JSON host %+v (%v), want %+v", back.Host, err, tc.host)
		}
	}
}

// TestFiguresOfAlikeGaps: gaps all alike (or all zero) on the log-scale
// plot draw a figure instead of panicking in the plotting library.
func TestFiguresOfAlikeGaps(t *testing.T) {
	for _, gaps := range [][]float64{{5, 5, 5}, {0, 0}, {0.0005}} {
		rep := &Report{Load: LoadInfo{Concurrency: []int{1}}, Targets: []TargetInfo{{Name: "a"}}, Cells: []Cell{{Target: "a", Concurrency: 1, GapSamples: gaps, TTFWSamples: []float64{3, 3}}}}
		if err := rep.WriteHTML(filepath.Join(t.TempDir(), "r.html")); err != nil {
			t.Errorf("gaps %v: %v", gaps, err)
		}
	}
}

// checkGolden compares got with testdata/name (-update rewrites it).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		os.WriteFile(golden, got, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}
