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

// WriteTable prints the summary table: one row per target and level, then
// the fault columns.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tconc\tpeak\tok/n\tTTFB p50\tTTFW p50 [95% CI]\tTTFW p95\tTTFW p99\tTTC p50\tTTC p95\tgap p50\tgap p99\tbunched\ttok/s p50\treq/s\tvs baseline\tcpu/req\trss\terrors\t")
	for _, c := range r.Cells {
		vs := "-"
		if c.AddedTTFWP50 != nil {
			vs = fmt.Sprintf("TTFW %+.2f ms ×%.2f", *c.AddedTTFWP50, *c.TTFWRatio)
			if c.AddedTTCP50 != nil {
				vs += fmt.Sprintf(", TTC %+.2f ms", *c.AddedTTCP50)
			}
		} else if c.Target == r.Baseline {
			vs = "baseline"
		}
		cpu, rss := "-", "-"
		if c.CPUPerRequestMs != nil {
			cpu, rss = fmt.Sprintf("%.3f ms", *c.CPUPerRequestMs), fmt.Sprintf("%.1f MB", *c.RSSMaxMB)
		}
		conc := fmt.Sprint(c.Concurrency)
		if c.Partial {
			conc += " partial"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s [%s–%s]\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%.1f\t%s\t%s\t%s\t%s\t\n",
			c.Target, conc, c.PeakInFlight, c.OK, c.Requests, f1(c.TTFB.P50, c.TTFB.N), f1(c.TTFW.P50, c.TTFW.N),
			f1(c.TTFW.CI50[0], c.TTFW.N), f1(c.TTFW.CI50[1], c.TTFW.N), f1(c.TTFW.P95, c.TTFW.N), f1(c.TTFW.P99, c.TTFW.N),
			f1(c.TTC.P50, c.TTC.N), f1(c.TTC.P95, c.TTC.N), f1(c.GapP50, c.Gaps), f1(c.GapP99, c.Gaps),
			100*c.BunchedShare, f1(c.TokensPerSec.P50, c.TokensPerSec.N), c.Throughput, vs, cpu, rss, errorList(c.Errors))
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
		if n := r.Host.Note(); n != "" {
			fmt.Fprintln(w, n)
		}
	}
	fmt.Fprintf(w, "\npeak: most requests in flight at once; times in ms; p50 [95%% CI] by bootstrap; gaps between text chunks; bunched: share of gaps under 1 ms in a run that began after a gap of at least %g ms\n", r.Load.BunchAfterMs)
}

func (r *Report) writeFaults(w io.Writer) {
	fmt.Fprintf(w, "\nfaults (through the fake upstream %s)\n", r.Upstream)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tcancel mid-stream\tcancel before first token\tupstream drop\t")
	for _, f := range r.Faults {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", f.Target, f.CancelMid, f.CancelBefore, f.Drop)
	}
	tw.Flush()
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
