package yardstick

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteCompare prints, for every target and level in both reports, the
// change from old to new of the figures people act on.
func WriteCompare(w io.Writer, old, new *Report) {
	type key struct {
		target string
		conc   int
	}
	before := map[key]Cell{}
	for _, c := range old.Cells {
		before[key{c.Target, c.Concurrency}] = c
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tconc\tTTFW p50\tTTFW p95\tTTFW p99\tTTC p50\tTTC p95\tgap p99\terrors\t")
	matched := 0
	for _, n := range new.Cells {
		o, ok := before[key{n.Target, n.Concurrency}]
		if !ok {
			continue
		}
		matched++
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d → %d\t\n", n.Target, n.Concurrency,
			change(o.TTFW.P50, n.TTFW.P50, o.TTFW.N, n.TTFW.N), change(o.TTFW.P95, n.TTFW.P95, o.TTFW.N, n.TTFW.N),
			change(o.TTFW.P99, n.TTFW.P99, o.TTFW.N, n.TTFW.N), change(o.TTC.P50, n.TTC.P50, o.TTC.N, n.TTC.N),
			change(o.TTC.P95, n.TTC.P95, o.TTC.N, n.TTC.N), change(o.GapP99, n.GapP99, o.Gaps, n.Gaps),
			o.Requests-o.OK, n.Requests-n.OK)
	}
	tw.Flush()
	if matched == 0 {
		fmt.Fprintln(w, "no target and concurrency level in common")
		return
	}
	fmt.Fprintln(w, "\nold → new in ms (change, relative change); errors: failed requests")
}

// change formats old → new (delta, percent).
func change(old, new float64, nOld, nNew int) string {
	if nOld == 0 || nNew == 0 {
		return "-"
	}
	pct := ""
	if old != 0 {
		pct = fmt.Sprintf(", %+.0f%%", 100*(new-old)/old)
	}
	return fmt.Sprintf("%.1f → %.1f (%+.1f%s)", old, new, new-old, pct)
}
