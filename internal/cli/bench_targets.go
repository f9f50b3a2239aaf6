package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/yardstick"
)

// benchTargetFlags are the flags that switch bench to measuring any
// endpoint (docs/bench.md) instead of its built-in comparison.
var benchTargetFlags = []string{"target", "compare", "upstream", "from", "fail-if", "fail-on", "max-errors"}

// wantsTargets reports whether args use the any-endpoint mode.
func wantsTargets(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name := strings.TrimLeft(a, "-")
		if len(name) == len(a) {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		for _, f := range benchTargetFlags {
			if name == f {
				return true
			}
		}
	}
	return false
}

// BenchTargets measures the endpoints given with --target side by side.
func BenchTargets(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("bench")
	var targets []*yardstick.Target
	byName := map[string]*yardstick.Target{}
	type perTarget struct {
		flag, name, value string
		apply             func(t *yardstick.Target, v string) error
	}
	var opts []perTarget
	// The flag package would quote a refused value, which may hold a key:
	// a per-target flag's error is kept here and reported after parsing,
	// in words that show no value.
	var flagErr error
	keep := func(flag string, err error) error {
		if err != nil && flagErr == nil {
			flagErr = fmt.Errorf("--%s: %w", flag, err)
		}
		return nil
	}
	fs.Func("target", "`NAME=URL` of an endpoint to measure (repeatable); URL \"upstream\" is the built-in upstream itself", func(v string) error {
		name, u, err := yardstick.SplitAssign(v)
		if err != nil {
			return keep("target", err)
		}
		if byName[name] != nil {
			return keep("target", fmt.Errorf("target %s given twice", name))
		}
		t := &yardstick.Target{Name: name, URL: u}
		targets = append(targets, t)
		byName[name] = t
		return nil
	})
	each := func(flag, usage string, apply func(t *yardstick.Target, v string) error) {
		fs.Func(flag, usage, func(v string) error {
			name, value, err := yardstick.SplitAssign(v)
			if err != nil {
				return keep(flag, err)
			}
			opts = append(opts, perTarget{flag, name, value, apply})
			return nil
		})
	}
	each("model", "`NAME=MODEL` sent to a target (default chat)", func(t *yardstick.Target, v string) error { t.Model = v; return nil })
	each("surface", "`NAME=SURFACE` a target speaks: openai, anthropic, responses or chat (default: from the URL path, else openai)", func(t *yardstick.Target, v string) error {
		s, err := yardstick.ParseSurface(v)
		t.Surface = s
		return err
	})
	each("header", "`NAME=K:V` header sent to a target (repeatable)", func(t *yardstick.Target, v string) error {
		k, val, err := yardstick.SplitHeader(v)
		t.Headers = append(t.Headers, [2]string{k, val})
		return err
	})
	each("api-key-env", "`NAME=ENV`: a target's API key is in environment variable ENV", func(t *yardstick.Target, v string) error {
		key := env.Getenv(v)
		if key == "" {
			return fmt.Errorf("environment variable %s is empty", v)
		}
		t.APIKeyEnv = v
		t.SetAPIKey(key)
		return nil
	})
	each("pid", "`NAME=PID` of a local target's process: its CPU and RSS are read from /proc", func(t *yardstick.Target, v string) error {
		pid, err := strconv.Atoi(v)
		if err != nil || pid <= 0 {
			return fmt.Errorf("want a process id, got %q", v)
		}
		t.PID = pid
		return nil
	})
	baseline := fs.String("baseline", "", "`NAME` of the target the others are compared with")
	concList := fs.String("concurrency", "1", "comma-separated `LIST` of concurrency levels to sweep")
	requests := fs.Int("requests", 50, "`N` requests per target and level (0: only --duration bounds a level)")
	duration := fs.Duration("duration", 0, "time per target and level, a `DURATION` (0: only --requests bounds a level)")
	rate := fs.String("rate", "", "open loop: `R/s` request arrivals per second (the level caps requests in flight); default closed loop")
	rounds := fs.Int("rounds", 5, "`N` alternating rounds each level's requests are split into")
	maxTime := fs.Duration("max-time", 60*time.Second, "cap on the whole run, a `DURATION`")
	reqTimeout := fs.Duration("request-timeout", 30*time.Second, "cap on one request, a `DURATION`")
	maxTokens := fs.Int("max-tokens", 256, "`N` max output tokens asked of each target")
	prompt := fs.String("prompt", "Count from one to twenty in words.", "the user message sent, a `STRING`")
	bunchAfter := fs.Duration("bunch-after", 5*time.Millisecond, "a gap under 1 ms counts as bunched when its run of short gaps began after a gap of at least this `DURATION`")
	allowRemote := fs.Bool("allow-remote", false, "allow targets that are not on loopback")
	up := fs.String("upstream", "", "`builtin` starts firstword's fake upstream, prints its URL and probes cancellation and drops through it")
	upAddr := fs.String("upstream-addr", "127.0.0.1:0", "the built-in upstream's listen address `HOST:PORT`")
	upTTFT := fs.Duration("upstream-ttft", 50*time.Millisecond, "the built-in upstream's time to first token, a `DURATION`")
	upGap := fs.Duration("upstream-gap", 10*time.Millisecond, "the built-in upstream's gap between chunks, a `DURATION`")
	upChunks := fs.Int("upstream-chunks", 20, "`N` chunks the built-in upstream streams")
	probes := fs.Int("fault-probes", 5, "`N` probes of each fault (cancel mid-stream, cancel before first token, upstream drop) per target, with --upstream")
	cancelWait := fs.Duration("cancel-wait", 2*time.Second, "how long a cancel probe waits for the upstream to see the close, a `DURATION`")
	jsonOut := fs.String("json", "", "write the report as JSON to `FILE`")
	htmlOut := fs.String("html", "", "write the report as one self-contained HTML page with plots to `FILE`")
	compare := fs.String("compare", "", "`OLD.json` NEW.json: print the change between two reports and exit")
	from := fs.String("from", "", "measure nothing: print the report saved in `FILE` (by --json) and write its --html or --json again")
	var failIf []string
	fs.Func("fail-if", "`CHECK` that fails the run (exit 1) when true: TARGET[@LEVEL]:METRIC[.STAT] OP VALUE, such as firstword:ttfw.p95>800ms, firstword:ttfw.p50>direct+2ms or firstword:rps<refproxy*0.9 (repeatable)", func(v string) error {
		failIf = append(failIf, v)
		return nil
	})
	failOn := fs.String("fail-on", yardstick.JudgePoint, "judge --fail-if on the `point` estimate, or on the whole 95% interval (interval: fail only when all of it is past the limit, for noisy machines)")
	maxErrors := fs.String("max-errors", "1%", "fail the run (exit 1) when a target's share of failed requests, over all its levels, is above this `SHARE`, such as 1% or 0.01")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if flagErr != nil {
		return usagef(fs, "%v", flagErr)
	}
	judged := false // a flag that judges a run was given
	fs.Visit(func(f *flag.Flag) {
		judged = judged || f.Name == "fail-if" || f.Name == "fail-on" || f.Name == "max-errors"
	})
	if *failOn != yardstick.JudgePoint && *failOn != yardstick.JudgeInterval {
		return usagef(fs, "--fail-on: want point or interval, got %q", *failOn)
	}
	maxErr, err := yardstick.ParseShare(*maxErrors)
	if err != nil {
		return usagef(fs, "--max-errors %q: %v", *maxErrors, err)
	}
	// judge parses the --fail-if checks against a run's targets and
	// levels, before it is measured.
	judge := func(infos []yardstick.TargetInfo, levels []int) ([]*yardstick.Threshold, error) {
		var names []string
		for _, t := range infos {
			names = append(names, t.Name)
		}
		var ths []*yardstick.Threshold
		var errs []error
		for _, e := range failIf {
			th, err := yardstick.ParseThreshold(e, names)
			if err == nil {
				err = th.Validate(infos, levels)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ths = append(ths, th)
		}
		return ths, errors.Join(errs...)
	}
	if *compare != "" {
		if judged {
			return usagef(fs, "--fail-if, --fail-on and --max-errors judge a run or a --from report, not --compare")
		}
		if fs.NArg() != 1 {
			return usagef(fs, "--compare takes two reports: --compare OLD.json NEW.json")
		}
		old, err := yardstick.ReadReport(*compare)
		if err != nil {
			return err
		}
		cur, err := yardstick.ReadReport(fs.Arg(0))
		if err != nil {
			return err
		}
		yardstick.WriteCompare(env.Stdout, old, cur)
		return nil
	}
	if err := noOperands(fs); err != nil {
		return err
	}
	for _, o := range opts {
		t := byName[o.name]
		if t == nil {
			return usagef(fs, "--%s %s=…: no --target named %s", o.flag, o.name, o.name)
		}
		if err := o.apply(t, o.value); err != nil {
			return usagef(fs, "--%s for target %s: %v", o.flag, o.name, err)
		}
	}
	if *from != "" {
		rep, err := yardstick.ReadReport(*from)
		if err != nil {
			return err
		}
		ths, err := judge(rep.Targets, rep.Load.Concurrency)
		if err != nil {
			return usagef(fs, "%v", err)
		}
		rep.Judge(ths, *failOn, maxErr)
		if err := writeReport(env, rep, *jsonOut, *htmlOut); err != nil {
			return err
		}
		return checksFailed(rep)
	}
	var levels []int
	for _, s := range strings.Split(*concList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return usagef(fs, "--concurrency: want a comma-separated list of numbers, got %q", *concList)
		}
		levels = append(levels, n)
	}
	var r float64
	if *rate != "" {
		v, err := strconv.ParseFloat(strings.TrimSuffix(*rate, "/s"), 64)
		if err != nil || math.IsNaN(v) || v < 0.01 || v > 100000 {
			return usagef(fs, "--rate: want requests per second such as 20/s, got %q", *rate)
		}
		r = v
	}
	o := yardstick.Options{
		Targets: targets, Baseline: *baseline, Concurrency: levels, Requests: *requests, Duration: *duration,
		Rate: r, Rounds: *rounds, MaxTime: *maxTime, RequestTimeout: *reqTimeout, MaxTokens: *maxTokens,
		Prompt: *prompt, BunchAfter: *bunchAfter, AllowRemote: *allowRemote, FaultProbes: *probes, CancelWait: *cancelWait,
		Progress: yardstick.TerminalProgress(env.Stderr),
	}
	switch *up {
	case "":
	case "builtin":
		u, err := yardstick.StartUpstream(ctx, *upAddr, yardstick.Pace{TTFT: *upTTFT, Gap: *upGap, Chunks: *upChunks})
		if err != nil {
			return err
		}
		defer u.Close()
		fmt.Fprintf(env.Stderr, "built-in upstream: %s (OpenAI Chat Completions on any POST path)\n", u.URL)
		o.Upstream = u
		for _, t := range targets {
			if t.URL == "upstream" {
				t.URL = u.URL + "/v1/chat/completions"
			}
		}
		if len(targets) == 0 {
			<-ctx.Done() // serve until interrupted
			return nil
		}
	default:
		return usagef(fs, "--upstream: only builtin is known, got %q", *up)
	}
	if err := o.Check(); err != nil {
		return usagef(fs, "%v", err)
	}
	var infos []yardstick.TargetInfo
	for _, t := range targets {
		infos = append(infos, yardstick.TargetInfo{Name: t.Name, PID: t.PID})
	}
	ths, err := judge(infos, levels)
	if err != nil {
		return usagef(fs, "%v", err)
	}
	rep, err := yardstick.Run(ctx, o)
	if err != nil {
		return err
	}
	rep.Command = "firstword bench " + strings.Join(redactArgs(args), " ")
	rep.Judge(ths, *failOn, maxErr)
	if err := writeReport(env, rep, *jsonOut, *htmlOut); err != nil {
		return err
	}
	if rep.Interrupted {
		return &exitError{code: 130, err: errors.New("interrupted: the report above covers what was measured")}
	}
	return checksFailed(rep)
}

// checksFailed is exit 1 when a check of rep failed: its error share
// above --max-errors, or a --fail-if.
func checksFailed(rep *yardstick.Report) error {
	if ch := rep.Checks; ch != nil && !ch.Pass {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d checks failed (listed above under checks)", ch.Failed, len(ch.Results))}
	}
	return nil
}

func writeReport(env *Env, rep *yardstick.Report, jsonOut, htmlOut string) error {
	rep.WriteTable(env.Stdout)
	if jsonOut != "" {
		if err := rep.WriteJSON(jsonOut); err != nil {
			return err
		}
	}
	if htmlOut != "" {
		if err := rep.WriteHTML(htmlOut); err != nil {
			return err
		}
	}
	return nil
}

// redactArgs is the command line as a report shows it: header values and
// the user information and query of every URL cut, since keys hide there.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	header := false
	for i, a := range args {
		switch {
		case header:
			a = redactHeader(a)
		case strings.HasPrefix(a, "--header=") || strings.HasPrefix(a, "-header="):
			f, v, _ := strings.Cut(a, "=")
			a = f + "=" + redactHeader(v)
		}
		name := strings.TrimLeft(a, "-")
		header = len(name) < len(a) && name == "header"
		out[i] = yardstick.RedactText(a)
	}
	return out
}

func redactHeader(v string) string {
	if i := strings.Index(v, ":"); i >= 0 {
		return v[:i+1] + "[redacted]"
	}
	return "[redacted]"
}
