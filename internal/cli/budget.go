package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/firstword/firstword/internal/advisor"
	"github.com/firstword/firstword/internal/budget/window"
)

// Budget prints the live latency budget of a running gateway: where the
// time goes, from its last minutes of traffic.
func Budget(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("budget")
	server := fs.String("server", "http://127.0.0.1:8080", "the gateway's base `URL`")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	advise := fs.Bool("advise", false, "print the lever advisor's advice instead: which lever would save the most, per alias (docs/LEVERS.md)")
	surface := fs.String("surface", "", "only the traffic of `SURFACE`: chat (/v1/chat), openai or anthropic (default: every surface)")
	// Not the flag's default: the help would print the key.
	key := fs.String("key", "", "API `KEY` (fw_...), needed once keys exist; an admin key shows every tenant (default: $FIRSTWORD_API_KEY)")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	if *key == "" {
		*key = env.Getenv("FIRSTWORD_API_KEY")
	}
	c := newGatewayClient(strings.TrimSuffix(*server, "/"), *key, 10*time.Second)
	path := "/v1/budget?surface=" + url.QueryEscape(*surface)
	if *advise {
		path = "/v1/budget/advice"
	}
	ans, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return fmt.Errorf("reading %s: %w", *server, err)
	}
	body := ans.body
	switch {
	case ans.code == http.StatusUnauthorized && *key == "":
		return fmt.Errorf("this gateway needs an API key: pass --key fw_... or set FIRSTWORD_API_KEY (an admin key shows every tenant)")
	case ans.code == http.StatusUnauthorized:
		return fmt.Errorf("%s refused the API key (401: revoked, or from another store?): %s", *server, strings.TrimSpace(string(body)))
	case ans.code != http.StatusOK:
		return fmt.Errorf("%s answered %d: %s", *server, ans.code, strings.TrimSpace(string(body)))
	}
	if *asJSON {
		_, err := env.Stdout.Write(body)
		return err
	}
	if *advise {
		var list struct{ Data []advisor.Advice }
		if err := json.Unmarshal(body, &list); err != nil {
			return fmt.Errorf("decoding the advice: %w", err)
		}
		PrintAdvice(env.Stdout, list.Data)
		return nil
	}
	var rep window.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return fmt.Errorf("decoding the report: %w", err)
	}
	PrintBudget(env.Stdout, &rep)
	if rep.Requests == 0 && *key != "" {
		fmt.Fprintln(env.Stdout, "A tenant's key shows that tenant's traffic only: requests served in local mode, before the first key was created, are not in it. An admin key shows every tenant's.")
	}
	return nil
}

// PrintBudget renders a report as a table.
func PrintBudget(w io.Writer, rep *window.Report) {
	on := "every surface"
	if rep.Surface != "" {
		on = "/" + rep.Surface
	}
	fmt.Fprintf(w, "Where the time goes: %d requests (%s) in the last %s\n\n", rep.Requests, on, time.Duration(rep.WindowSeconds*float64(time.Second)))
	if rep.Requests == 0 {
		fmt.Fprintln(w, "No traffic yet.")
		return
	}
	small := rep.Requests < window.SmallSample
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	if small {
		fmt.Fprintln(tw, "stage\tn\tmin\tmedian\tmax\ttarget\tvs target\tshare of TTFW\ton critical path\t")
	} else {
		fmt.Fprintln(tw, "stage\tp50\tp95\tp99\ttarget\tvs target\tshare of TTFW\ton critical path\t")
	}
	line := func(r window.Row, indent string) {
		target, vs := "-", "-"
		if r.TargetMs > 0 {
			target = fmt.Sprintf("p%.0f %s", r.TargetPercentile, fmtMs(r.TargetMs))
			over, of := r.Over, ""
			if small && r.Max > 0 {
				// A few requests' percentile is one of them: judge the slowest.
				over, of = r.Max/r.TargetMs, " (max)"
			}
			switch {
			case over > 1:
				vs = fmt.Sprintf("OVER %.2fx%s", over, of)
			case over > 0:
				vs = fmt.Sprintf("under %.2fx%s", over, of)
			}
		}
		share, crit := "-", "-"
		if r.ShareOfTTFW > 0 {
			share = fmt.Sprintf("%.0f%%", 100*r.ShareOfTTFW)
		}
		if r.CriticalShare > 0 {
			crit = fmt.Sprintf("%.0f%%", 100*r.CriticalShare)
		}
		if small {
			fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", indent, r.Name, r.Count, fmtMs(r.Min), fmtMs(r.P50), fmtMs(r.Max), target, vs, share, crit)
			return
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", indent, r.Name, fmtMs(r.P50), fmtMs(r.P95), fmtMs(r.P99), target, vs, share, crit)
	}
	for _, r := range rep.Stages {
		indent := "  "
		if r.Group {
			indent = "[group] "
		}
		line(r, indent)
	}
	total := func(name string, r window.Row) {
		r.Name, r.CriticalShare = name, 0
		line(r, "")
	}
	if rep.TTFThought.Count > 0 {
		// Time to first word is still what the user feels: these say how
		// much of it was thinking.
		total("TIME TO FIRST THOUGHT", rep.TTFThought)
		total("THINKING", rep.Thinking)
	}
	total("TIME TO FIRST WORD", rep.TTFW)
	total("TIME TO COMPLETE", rep.TTC)
	tw.Flush()
	fmt.Fprintln(w)
	if small {
		fmt.Fprintf(w, "Fewer than %d requests: each row shows how many ran it and their min, median and max, not percentiles (a p95 of a few requests is one of them, and hides the slow one).\n", window.SmallSample)
	}
	if rep.Thinking.Count > 0 {
		fmt.Fprintf(w, "%d of %d requests thought: thinking took %.0f%% of the wait for the first word (median).\n",
			rep.TTFThought.Count, rep.Requests, 100*rep.Thinking.ShareOfTTFW)
	}
	if rep.CriticalPath != "" {
		fmt.Fprintf(w, "Critical path to the first word (%.0f%% of requests): %s\n", 100*rep.CriticalShare, rep.CriticalPath)
	}
	overspend := rep.Overspend
	if small {
		// Judged on the max, as the rows are.
		overspend = ""
		worst := 1.0
		for _, r := range append(slices.Clone(rep.Stages), rep.TTFW, rep.TTC) {
			if r.TargetMs > 0 && r.Max/r.TargetMs > worst {
				worst, overspend = r.Max/r.TargetMs, r.Name
			}
		}
	}
	if overspend != "" {
		fmt.Fprintf(w, "Most over budget: %s\n", overspend)
	} else {
		fmt.Fprintln(w, "Every stage with a target is within it.")
	}
}

func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000:
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.2f s", v/1000)
}

// PrintAdvice renders the lever advisor's advice: per alias, the levers
// by their saving at p95 of the time to complete, then the two rankings
// and each lever's config.
func PrintAdvice(w io.Writer, advice []advisor.Advice) {
	if len(advice) == 0 {
		fmt.Fprintln(w, "No advice yet: the advisor needs at least 20 requests of an alias in its window (budget.advice_window, default 15m).")
		return
	}
	for i, a := range advice {
		if i > 0 {
			fmt.Fprintln(w)
		}
		m := a.Measured
		fmt.Fprintf(w, "%s: %d requests; first word p50 %s, p95 %s; complete p50 %s, p95 %s; $%.6f a request\n\n",
			a.Alias, a.Requests, fmtMs(m.TTFWP50), fmtMs(m.TTFWP95), fmtMs(m.TTCP50), fmtMs(m.TTCP95), m.Cost)
		if len(a.Levers) == 0 {
			fmt.Fprintln(w, "No lever would save anything measurable in this traffic.")
		} else {
			tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "lever\tsaves: first word p50\tp95\tcomplete p50\tp95\tcost\trequests changed\t")
			for _, l := range a.Levers {
				s := l.Saving
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.0f%%\t%d\t\n", l.Title, fmtSaving(s.TTFWP50), fmtSaving(s.TTFWP95),
					fmtSaving(s.TTCP50), fmtSaving(s.TTCP95), 100*s.CostShare, l.Affected)
			}
			tw.Flush()
			fmt.Fprintln(w)
			fmt.Fprintf(w, "Largest first, by p95 time to first word: %s\n", rankingText(a.ByTTFW))
			fmt.Fprintf(w, "Largest first, by p95 time to complete:   %s\n", rankingText(a.ByTTC))
			for _, l := range a.Levers {
				fmt.Fprintf(w, "\n%s: %s\n", l.Title, l.Detail)
				for _, line := range strings.Split(l.Config, "\n") {
					fmt.Fprintf(w, "    %s\n", line)
				}
			}
		}
		for _, n := range a.Notes {
			fmt.Fprintf(w, "\nNote: %s\n", n)
		}
	}
}

func fmtSaving(v float64) string {
	if v < 1 && v > -1 {
		return "-"
	}
	if v < 0 {
		return "+" + fmtMs(-v)
	}
	return fmtMs(v)
}

func rankingText(names []string) string {
	if len(names) == 0 {
		return "none saves a millisecond"
	}
	return strings.Join(names, " > ")
}
