package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/firstword/firstword/internal/budget/window"
)

// Budget prints the live latency budget of a running gateway: where the
// time goes, from its last minutes of traffic.
func Budget(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("budget")
	server := fs.String("server", "http://127.0.0.1:8080", "the gateway's base `URL`")
	asJSON := fs.Bool("json", false, "print the report as JSON")
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
	ans, err := c.send(ctx, "GET", "/v1/budget?surface="+url.QueryEscape(*surface), nil)
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
	var rep window.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return fmt.Errorf("decoding the report: %w", err)
	}
	PrintBudget(env.Stdout, &rep)
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
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tp50\tp95\tp99\ttarget\tvs target\tshare of TTFW\ton critical path\t")
	line := func(r window.Row, indent string) {
		target, vs := "-", "-"
		if r.TargetMs > 0 {
			target = fmt.Sprintf("p%.0f %s", r.TargetPercentile, fmtMs(r.TargetMs))
			switch {
			case r.Over > 1:
				vs = fmt.Sprintf("OVER %.2fx", r.Over)
			case r.Over > 0:
				vs = fmt.Sprintf("under %.2fx", r.Over)
			}
		}
		share, crit := "-", "-"
		if r.ShareOfTTFW > 0 {
			share = fmt.Sprintf("%.0f%%", 100*r.ShareOfTTFW)
		}
		if r.CriticalShare > 0 {
			crit = fmt.Sprintf("%.0f%%", 100*r.CriticalShare)
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
	if rep.Thinking.Count > 0 {
		fmt.Fprintf(w, "%d of %d requests thought: thinking took %.0f%% of the wait for the first word (median).\n",
			rep.TTFThought.Count, rep.Requests, 100*rep.Thinking.ShareOfTTFW)
	}
	if rep.CriticalPath != "" {
		fmt.Fprintf(w, "Critical path to the first word (%.0f%% of requests): %s\n", 100*rep.CriticalShare, rep.CriticalPath)
	}
	if rep.Overspend != "" {
		fmt.Fprintf(w, "Most over budget: %s\n", rep.Overspend)
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
