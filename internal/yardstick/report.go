package yardstick

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/firstword/firstword/internal/hostcpu"
)

// Report is a run's result, as --json writes it.
type Report struct {
	Started   time.Time `json:"started"`
	Elapsed   float64   `json:"elapsed_s"`
	Command   string    `json:"command,omitempty"`
	Truncated bool      `json:"truncated,omitempty"` // --max-time cut the run
	// Interrupted: the run was stopped (Ctrl-C) before it ended.
	Interrupted bool         `json:"interrupted,omitempty"`
	Targets     []TargetInfo `json:"targets"`
	Baseline    string       `json:"baseline,omitempty"`
	Load        LoadInfo     `json:"load"`
	Upstream    string       `json:"upstream,omitempty"`
	Cells       []Cell       `json:"cells"`
	Faults      []Faults     `json:"faults,omitempty"`
	// Host is how the machine's CPU time went during the run (absent
	// where /proc/stat is not): steal above hostcpu.Noisy makes the
	// figures noisy, whatever the targets did.
	Host *hostcpu.Usage `json:"host,omitempty"`
	// Checks are the verdicts of --max-errors and --fail-if.
	Checks *Checks `json:"checks,omitempty"`
}

// TargetInfo is a target as a report names it: never its key, and its URL
// without user information or query.
type TargetInfo struct {
	Name    string  `json:"name"`
	URL     string  `json:"url"`
	Surface Surface `json:"surface"`
	Model   string  `json:"model"`
	PID     int     `json:"pid,omitempty"`
}

// LoadInfo is how the load was shaped.
type LoadInfo struct {
	Concurrency  []int   `json:"concurrency"`
	Requests     int     `json:"requests_per_level"`
	DurationS    float64 `json:"duration_per_level_s,omitempty"`
	Rate         float64 `json:"rate_per_s,omitempty"` // 0: closed loop
	Rounds       int     `json:"rounds"`
	BunchAfterMs float64 `json:"bunch_after_ms"`
	Prompt       string  `json:"prompt,omitempty"`
	MaxTokens    int     `json:"max_tokens,omitempty"`
	CI           string  `json:"ci_method"`
}

// Cell is one target at one concurrency level. Times are milliseconds.
type Cell struct {
	Target      string `json:"target"`
	Concurrency int    `json:"concurrency"`
	// PeakInFlight is the most requests that were under way at once.
	PeakInFlight int `json:"peak_in_flight"`
	// Partial: the run was cut during this level; every target has
	// samples in it, but fewer than asked.
	Partial      bool           `json:"partial,omitempty"`
	Requests     int            `json:"requests"`
	OK           int            `json:"ok"`
	Errors       map[string]int `json:"errors"`
	TTFB         Dist           `json:"ttfb_ms"`
	TTFW         Dist           `json:"ttfw_ms"`
	TTC          Dist           `json:"ttc_ms"`
	TokensPerSec Dist           `json:"tokens_per_s"`
	Gaps         int            `json:"gaps"`
	GapP50       float64        `json:"gap_p50_ms"`
	GapP99       float64        `json:"gap_p99_ms"`
	BunchedShare float64        `json:"bunched_share"`
	Throughput   float64        `json:"throughput_per_s"`
	// CPU and RSS of the target's process, with --pid.
	CPUPerRequestMs *float64 `json:"cpu_per_request_ms,omitempty"`
	RSSMaxMB        *float64 `json:"rss_max_mb,omitempty"`
	// Against the baseline at the same level: p50 differences and ratios.
	AddedTTFWP50 *float64 `json:"added_ttfw_p50_ms,omitempty"`
	AddedTTCP50  *float64 `json:"added_ttc_p50_ms,omitempty"`
	TTFWRatio    *float64 `json:"ttfw_p50_ratio,omitempty"`
	TTCRatio     *float64 `json:"ttc_p50_ratio,omitempty"`
	// Samples for the plots: every TTFW, and the gaps (thinned evenly
	// past maxGapSamples), sorted.
	TTFWSamples []float64 `json:"ttfw_samples_ms"`
	GapSamples  []float64 `json:"gap_samples_ms"`
	// TTFWOverTime is each request's [start, TTFW]: seconds from the
	// run's start and milliseconds, in order of start (thinned evenly
	// past maxGapSamples); FailedAt the start of each failed request.
	// Together they show a warm-up or a stall.
	TTFWOverTime [][2]float64 `json:"ttfw_over_time,omitempty"`
	FailedAt     []float64    `json:"failed_at_s,omitempty"`
}

const ciMethod = "95% percentile bootstrap, 500 resamples of the pooled rounds"

func newReport(o *Options) *Report {
	r := &Report{Started: time.Now().UTC(), Baseline: o.Baseline, Load: LoadInfo{
		Concurrency: o.Concurrency, Requests: o.Requests, DurationS: o.Duration.Seconds(), Rate: o.Rate,
		Rounds: o.Rounds, BunchAfterMs: ms(o.BunchAfter), Prompt: o.Prompt, MaxTokens: o.MaxTokens, CI: ciMethod}}
	for _, t := range o.Targets {
		r.Targets = append(r.Targets, TargetInfo{Name: t.Name, URL: t.PublicURL(), Surface: t.Surface, Model: t.Model, PID: t.PID})
	}
	if o.Upstream != nil {
		r.Upstream = o.Upstream.URL
	}
	return r
}

func (r *Report) compareBaseline() {
	if r.Baseline == "" {
		return
	}
	base := map[int]*Cell{}
	for i := range r.Cells {
		if r.Cells[i].Target == r.Baseline {
			base[r.Cells[i].Concurrency] = &r.Cells[i]
		}
	}
	for i := range r.Cells {
		c := &r.Cells[i]
		b := base[c.Concurrency]
		if b == nil || c.Target == r.Baseline || b.TTFW.N == 0 || c.TTFW.N == 0 {
			continue
		}
		d, q := c.TTFW.P50-b.TTFW.P50, c.TTFW.P50/b.TTFW.P50
		c.AddedTTFWP50, c.TTFWRatio = &d, &q
		if b.TTC.N > 0 && c.TTC.N > 0 {
			d, q := c.TTC.P50-b.TTC.P50, c.TTC.P50/b.TTC.P50
			c.AddedTTCP50, c.TTCRatio = &d, &q
		}
	}
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadReport reads a report --json wrote.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Started.IsZero() || len(r.Targets) == 0 || len(r.Load.Concurrency) == 0 {
		return nil, fmt.Errorf("%s: not a bench report (no start time, targets or levels): write one with --json", path)
	}
	return &r, nil
}

// A column is one of the table's columns: stdout shows those marked
// stdout, the HTML all of them, with the same text.
type column struct {
	head   string
	stdout bool
	bold   bool // in the HTML
	get    func(r *Report, c *Cell) string
}

// columns are the table's columns in order.
var columns = []column{
	{"target", true, false, func(_ *Report, c *Cell) string { return c.Target }},
	{"conc", true, false, func(_ *Report, c *Cell) string {
		if c.Partial {
			return fmt.Sprint(c.Concurrency) + " partial"
		}
		return fmt.Sprint(c.Concurrency)
	}},
	{"peak", true, false, func(_ *Report, c *Cell) string { return fmt.Sprint(c.PeakInFlight) }},
	{"ok/n", true, false, func(_ *Report, c *Cell) string { return fmt.Sprintf("%d/%d", c.OK, c.Requests) }},
	{"TTFB p50", true, false, func(_ *Report, c *Cell) string { return f1(c.TTFB.P50, c.TTFB.N) }},
	{"TTFW p50 [95% CI]", true, true, func(_ *Report, c *Cell) string {
		return fmt.Sprintf("%s %s", f1(c.TTFW.P50, c.TTFW.N), ciText(c.TTFW.CI50, c.TTFW.N))
	}},
	{"TTFW p95", true, false, func(_ *Report, c *Cell) string { return f1(c.TTFW.P95, c.TTFW.N) }},
	{"TTFW p95 95% CI", false, false, func(_ *Report, c *Cell) string { return ciText(c.TTFW.CI95, c.TTFW.N) }},
	{"TTFW p99", true, false, func(_ *Report, c *Cell) string { return f1(c.TTFW.P99, c.TTFW.N) }},
	{"TTFW p99 95% CI", false, false, func(_ *Report, c *Cell) string { return ciText(c.TTFW.CI99, c.TTFW.N) }},
	{"TTC p50", true, true, func(_ *Report, c *Cell) string { return f1(c.TTC.P50, c.TTC.N) }},
	{"TTC p50 95% CI", false, false, func(_ *Report, c *Cell) string { return ciText(c.TTC.CI50, c.TTC.N) }},
	{"TTC p95", true, false, func(_ *Report, c *Cell) string { return f1(c.TTC.P95, c.TTC.N) }},
	{"TTC p95 95% CI", false, false, func(_ *Report, c *Cell) string { return ciText(c.TTC.CI95, c.TTC.N) }},
	{"gap p50", true, false, func(_ *Report, c *Cell) string { return f1(c.GapP50, c.Gaps) }},
	{"gap p99", true, false, func(_ *Report, c *Cell) string { return f1(c.GapP99, c.Gaps) }},
	{"gaps", false, false, func(_ *Report, c *Cell) string { return fmt.Sprint(c.Gaps) }},
	{"bunched", true, false, func(_ *Report, c *Cell) string { return fmt.Sprintf("%.1f%%", 100*c.BunchedShare) }},
	{"tok/s p50", true, false, func(_ *Report, c *Cell) string { return f1(c.TokensPerSec.P50, c.TokensPerSec.N) }},
	{"req/s", true, false, func(_ *Report, c *Cell) string { return fmt.Sprintf("%.1f", c.Throughput) }},
	{"vs baseline", true, false, func(r *Report, c *Cell) string {
		switch {
		case c.AddedTTFWP50 != nil:
			vs := fmt.Sprintf("TTFW %+.2f ms ×%.2f", *c.AddedTTFWP50, *c.TTFWRatio)
			if c.AddedTTCP50 != nil {
				vs += fmt.Sprintf(", TTC %+.2f ms ×%.2f", *c.AddedTTCP50, *c.TTCRatio)
			}
			return vs
		case c.Target == r.Baseline:
			return "baseline"
		}
		return "-"
	}},
	{"cpu/req", true, false, func(_ *Report, c *Cell) string {
		if c.CPUPerRequestMs == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f ms", *c.CPUPerRequestMs)
	}},
	{"rss", true, false, func(_ *Report, c *Cell) string {
		if c.RSSMaxMB == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f MB", *c.RSSMaxMB)
	}},
	{"errors", true, false, func(_ *Report, c *Cell) string { return errorList(c.Errors) }},
}

func ciText(ci [2]float64, n int) string {
	return "[" + f1(ci[0], n) + "–" + f1(ci[1], n) + "]"
}

// WriteTable prints the summary table: one row per target and level, then
// the fault columns.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, col := range columns {
		if col.stdout {
			fmt.Fprintf(tw, "%s\t", col.head)
		}
	}
	fmt.Fprintln(tw)
	for i := range r.Cells {
		for _, col := range columns {
			if col.stdout {
				fmt.Fprintf(tw, "%s\t", col.get(r, &r.Cells[i]))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	switch {
	case r.Interrupted:
		fmt.Fprintln(w, "\ninterrupted: the run was stopped; the levels missing above were not measured, those marked partial only in part")
	case r.Truncated:
		fmt.Fprintln(w, "\n--max-time cut the run: the levels missing above were not measured, those marked partial only in part")
	}
	if len(r.Faults) > 0 {
		r.writeFaults(w)
	}
	if r.Host != nil {
		fmt.Fprintf(w, "\nmachine: %.0f%% busy, %.0f%% stolen by the hypervisor\n", 100*r.Host.Busy, 100*r.Host.Steal)
		for _, n := range HostNotes(r.Host) {
			fmt.Fprintln(w, n)
		}
	}
	fmt.Fprintf(w, "\npeak: most requests in flight at once; times in ms; p50 [95%% CI] by bootstrap; gaps between text chunks; bunched: share of gaps under 1 ms in a run that began after a gap of at least %g ms\n", r.Load.BunchAfterMs)
	if r.Checks != nil {
		r.Checks.write(w)
	}
}

func (r *Report) writeFaults(w io.Writer) {
	fmt.Fprintf(w, "\nfaults (through the fake upstream %s)\n", r.Upstream)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tcancel mid-stream\tcancel before first token\tupstream drop\t")
	for _, f := range r.Faults {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", f.Target, r.cancelText(f.Target, f.CancelMid), r.cancelText(f.Target, f.CancelBefore), f.Drop)
	}
	tw.Flush()
	if r.graceWindow() {
		fmt.Fprintln(w, graceNote)
	}
}

// graceNote explains a /v1/chat target's NO in the cancel columns.
const graceNote = "grace window: /v1/chat keeps an answer going for resume.grace (15 s by default) after its client leaves, so that the client can resume it (docs/resume.md); POST /v1/conversations/{id}/stop ends it at once. Its NO is by design, not a leak."

// cancelText is a cancel column's cell: a /v1/chat target's NO says it
// is the grace window.
func (r *Report) cancelText(target string, c CancelResult) string {
	s := c.String()
	if c.Probes > 0 && c.Cancelled == 0 && r.surface(target) == SurfaceChat {
		s += ": grace window, by design"
	}
	return s
}

// graceWindow reports whether a cancel cell says "grace window".
func (r *Report) graceWindow() bool {
	for _, f := range r.Faults {
		if r.cancelText(f.Target, f.CancelMid) != f.CancelMid.String() || r.cancelText(f.Target, f.CancelBefore) != f.CancelBefore.String() {
			return true
		}
	}
	return false
}

func (r *Report) surface(target string) Surface {
	for _, t := range r.Targets {
		if t.Name == target {
			return t.Surface
		}
	}
	return ""
}

// BusyNoisy is the share of the machine's CPU time in use (by bench,
// its targets or anything else) from which a report says its figures
// are noisy: requests then wait for a CPU as well as for their target.
const BusyNoisy = 0.8

// HostNotes are a report's warnings about the machine it ran on: steal
// (hostcpu.Noisy) and a busy machine.
func HostNotes(u *hostcpu.Usage) []string {
	if u == nil {
		return nil
	}
	var notes []string
	if u.Busy >= BusyNoisy {
		notes = append(notes, fmt.Sprintf("The machine's CPUs were %.0f%% busy during the run (bench, its targets and anything else on it): requests waited for a CPU, so its figures are noisy; compare them with a run on a quieter machine, or judge them with --fail-on interval.", 100*u.Busy))
	}
	if n := u.Note(); n != "" {
		notes = append(notes, n)
	}
	return notes
}

// String is the cancel column: how many cancelled, how fast.
func (c CancelResult) String() string {
	if c.Probes == 0 {
		if c.NotReached > 0 {
			return "not via the upstream"
		}
		return "-"
	}
	if c.Cancelled == 0 {
		return fmt.Sprintf("NO (0/%d)", c.Probes)
	}
	return fmt.Sprintf("yes %d/%d, p50 %.2f ms, p95 %.2f ms", c.Cancelled, c.Probes, c.P50, c.P95)
}

// String is the drop column.
func (d DropResult) String() string {
	if d.Probes == 0 {
		return "-"
	}
	if d.Outcomes[notViaUpstream] == d.Probes {
		return notViaUpstream
	}
	return errorList(d.Outcomes) + fmt.Sprintf(" (of %d)", d.Probes)
}

func f1(v float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

func errorList(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
