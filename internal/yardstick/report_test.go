package yardstick

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/hostcpu"
)

// TestBusyWarning: a machine whose CPUs were busy is warned about in the
// table, the HTML and --compare, not only one whose time was stolen.
func TestBusyWarning(t *testing.T) {
	for _, tc := range []struct {
		host hostcpu.Usage
		warn bool
	}{{hostcpu.Usage{Busy: 1}, true}, {hostcpu.Usage{Busy: 0.85, Steal: 0.01}, true}, {hostcpu.Usage{Busy: 0.5, Steal: 0.01}, false}} {
		rep := &Report{Host: &tc.host}
		var b bytes.Buffer
		rep.WriteTable(&b)
		busy := strconv.Itoa(int(100*tc.host.Busy)) + "% busy during the run"
		if strings.Contains(b.String(), busy) != tc.warn || strings.Contains(b.String(), "noisy") != tc.warn {
			t.Errorf("busy %v: warning %v wanted, table:\n%s", tc.host.Busy, tc.warn, b.String())
		}
		b.Reset()
		WriteCompare(&b, &Report{}, rep)
		if strings.Contains(b.String(), "warning: the new run's machine was "+strconv.Itoa(int(100*tc.host.Busy))+"% busy") != tc.warn {
			t.Errorf("busy %v: compare warning %v wanted:\n%s", tc.host.Busy, tc.warn, b.String())
		}
	}
}

// TestCompareWithinNoise: a change whose old and new intervals overlap is
// marked within noise, one whose intervals are apart is not, and a busy
// run is warned about.
func TestCompareWithinNoise(t *testing.T) {
	dist := func(p50, half float64) Dist {
		return Dist{N: 50, P50: p50, P95: p50 * 2, P99: p50 * 3, CI50: [2]float64{p50 - half, p50 + half},
			CI95: [2]float64{2*p50 - half, 2*p50 + half}, CI99: [2]float64{3*p50 - 10*half, 3*p50 + 10*half}}
	}
	cell := func(target string, ttfw, half float64) Cell {
		return Cell{Target: target, Concurrency: 1, Requests: 50, OK: 50, TTFW: dist(ttfw, half), TTC: dist(ttfw+200, half), Gaps: 10, GapP99: 12}
	}
	// a: -59% with intervals far apart; b: +4% inside wide intervals.
	old := &Report{Cells: []Cell{cell("a", 100, 2), cell("b", 50, 5)}, Host: &hostcpu.Usage{Busy: 1}}
	cur := &Report{Cells: []Cell{cell("a", 41, 2), cell("b", 52, 5)}}
	var b bytes.Buffer
	WriteCompare(&b, old, cur)
	checkGolden(t, "compare_noise.golden", b.Bytes())
}

// TestGraceWindowNote: a /v1/chat target's NO in the cancel columns says
// it is the grace window, by design; another surface's NO does not.
func TestGraceWindowNote(t *testing.T) {
	no := CancelResult{Probes: 3}
	rep := &Report{Upstream: "http://127.0.0.1:1",
		Targets: []TargetInfo{{Name: "chat", Surface: SurfaceChat}, {Name: "leaky", Surface: SurfaceOpenAI}},
		Faults:  []Faults{{Target: "chat", CancelMid: no, CancelBefore: no}, {Target: "leaky", CancelMid: no, CancelBefore: no}}}
	var b bytes.Buffer
	rep.WriteTable(&b)
	lines := strings.Split(b.String(), "\n")
	var chat, leaky string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "chat "):
			chat = l
		case strings.HasPrefix(l, "leaky "):
			leaky = l
		}
	}
	if strings.Count(chat, "NO (0/3): grace window, by design") != 2 || strings.Contains(leaky, "grace") || !strings.Contains(b.String(), graceNote) {
		t.Errorf("faults:\n%s", b.String())
	}
	dir := t.TempDir()
	if err := rep.WriteHTML(filepath.Join(dir, "r.html")); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "r.html"))
	if !bytes.Contains(page, []byte("NO (0/3): grace window, by design")) || !bytes.Contains(page, []byte("resume.grace")) {
		t.Errorf("the HTML has no grace-window note")
	}
}

// TestLegendsBesideThePlots: in every figure, the legend's entries are
// drawn right of the plot area, where they hide no line, and a run has a
// TTFW-over-time figure per level with a mark per request.
func TestLegendsBesideThePlots(t *testing.T) {
	rep := judgeReport()
	for i := range rep.Cells {
		c := &rep.Cells[i]
		c.TTFWSamples = []float64{c.TTFW.P50, c.TTFW.P95}
		c.TTFWOverTime = [][2]float64{{0.1, c.TTFW.P50}, {0.2, c.TTFW.P95}, {0.3, c.TTFW.P50}}
		c.FailedAt = []float64{0.25}
	}
	figs, err := rep.Figures()
	if err != nil {
		t.Fatal(err)
	}
	overTime := 0
	for _, f := range figs {
		if strings.HasPrefix(f.Title, "Time to first word over the run") {
			overTime++
		}
		d := xml.NewDecoder(strings.NewReader(string(f.SVG)))
		var x float64
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f.Title, err)
			}
			switch tok := tok.(type) {
			case xml.StartElement:
				for _, a := range tok.Attr {
					if tok.Name.Local == "text" && a.Name.Local == "x" {
						x, _ = strconv.ParseFloat(a.Value, 64)
					}
				}
			case xml.CharData:
				if s := strings.TrimSpace(string(tok)); strings.HasPrefix(s, "a") || strings.HasPrefix(s, "b") {
					if x < float64(plotWidth.Points()) {
						t.Errorf("%s: legend entry %q at x %.1f, inside the plot area (width %.0f)", f.Title, s, x, plotWidth.Points())
					}
				}
			}
		}
	}
	if overTime != len(rep.Load.Concurrency) {
		t.Errorf("%d over-time figures, want one per level (%d)", overTime, len(rep.Load.Concurrency))
	}
}
