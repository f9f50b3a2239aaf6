package yardstick

import (
	"fmt"
	"io"
	"net/url"
	"strings"
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
	matched, noise := 0, false
	change := func(o, n Dist, stat string) string {
		s, within := distChange(o, n, stat)
		noise = noise || within
		return s
	}
	for _, n := range new.Cells {
		o, ok := before[key{n.Target, n.Concurrency}]
		if !ok {
			continue
		}
		matched++
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d → %d\t\n", n.Target, n.Concurrency,
			change(o.TTFW, n.TTFW, "p50"), change(o.TTFW, n.TTFW, "p95"), change(o.TTFW, n.TTFW, "p99"),
			change(o.TTC, n.TTC, "p50"), change(o.TTC, n.TTC, "p95"), pointChange(o.GapP99, n.GapP99, o.Gaps, n.Gaps),
			o.Requests-o.OK, n.Requests-n.OK)
	}
	tw.Flush()
	if matched == 0 {
		fmt.Fprintln(w, "no target and concurrency level in common")
	} else {
		fmt.Fprintln(w, "\nold → new in ms (change, relative change); errors: failed requests")
		if noise {
			fmt.Fprintln(w, "within noise: the old and the new 95% intervals overlap, so the change may be chance")
		}
	}
	if notes := compareSettings(old, new); len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

// compareSettings names what differs between two reports besides the
// figures: targets in one only, and a target's surface, URL path or model,
// or the prompt and load, changed (the rows then compare different
// things). Settings an older report did not record are not compared.
func compareSettings(old, new *Report) []string {
	var notes []string
	warn := func(what, a, b string) {
		if a != "" && b != "" && a != b {
			notes = append(notes, fmt.Sprintf("warning: %s differs: %s → %s", what, a, b))
		}
	}
	before := map[string]TargetInfo{}
	for _, t := range old.Targets {
		before[t.Name] = t
	}
	after := map[string]bool{}
	for _, n := range new.Targets {
		after[n.Name] = true
		o, ok := before[n.Name]
		if !ok {
			notes = append(notes, fmt.Sprintf("target %s: only in the new report", n.Name))
			continue
		}
		warn("target "+n.Name+" surface", string(o.Surface), string(n.Surface))
		warn("target "+n.Name+" URL path", urlPath(o.URL), urlPath(n.URL))
		warn("target "+n.Name+" model", o.Model, n.Model)
	}
	for _, o := range old.Targets {
		if !after[o.Name] {
			notes = append(notes, fmt.Sprintf("target %s: only in the old report", o.Name))
		}
	}
	warn("the prompt", quoted(old.Load.Prompt), quoted(new.Load.Prompt))
	if old.Load.MaxTokens != 0 && new.Load.MaxTokens != 0 {
		warn("--max-tokens", fmt.Sprint(old.Load.MaxTokens), fmt.Sprint(new.Load.MaxTokens))
	}
	warn("--rate (0: closed loop)", fmt.Sprint(old.Load.Rate), fmt.Sprint(new.Load.Rate))
	for _, r := range []struct {
		name string
		rep  *Report
	}{{"old", old}, {"new", new}} {
		if u := r.rep.Host; len(HostNotes(u)) > 0 {
			notes = append(notes, fmt.Sprintf("warning: the %s run's machine was %.0f%% busy, %.0f%% stolen by the hypervisor: its figures are noisy; trust only the changes not marked within noise", r.name, 100*u.Busy, 100*u.Steal))
		}
	}
	return notes
}

func urlPath(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Path
}

func quoted(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("%q", s)
}

// distChange formats a quantile's change, marked "within noise" when
// the two 95% intervals overlap (reports without intervals are not
// marked).
func distChange(o, n Dist, stat string) (string, bool) {
	of, ok1 := distFigure(o, stat)
	nf, ok2 := distFigure(n, stat)
	if !ok1 || !ok2 {
		return "-", false
	}
	s := pointChange(of.v, nf.v, o.N, n.N)
	if of.ci == [2]float64{} || nf.ci == [2]float64{} || of.ci[0] > nf.ci[1] || nf.ci[0] > of.ci[1] {
		return s, false
	}
	return strings.TrimSuffix(s, ")") + ", within noise)", true
}

// pointChange formats old → new (delta, percent).
func pointChange(old, new float64, nOld, nNew int) string {
	if nOld == 0 || nNew == 0 {
		return "-"
	}
	pct := ""
	if old != 0 {
		pct = fmt.Sprintf(", %+.0f%%", 100*(new-old)/old)
	}
	return fmt.Sprintf("%.1f → %.1f (%+.1f%s)", old, new, new-old, pct)
}
