package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/bench"
	"github.com/firstword/firstword/internal/yardstick"
)

// Bench measures the gateway against a direct connection to the same fake
// upstream and prints a Markdown report (docs/BENCHMARKS.md holds one);
// with --target, any endpoints (BenchTargets). Its help lists both
// modes' flags, whichever mode was asked.
func Bench(ctx context.Context, env *Env, args []string) error {
	var err error
	if wantsTargets(args) {
		err = BenchTargets(ctx, env, args)
	} else {
		err = benchBuiltin(ctx, env, args)
	}
	if ue, ok := err.(*usageError); ok && ue.err == nil {
		return &usageError{fs: benchFlags()}
	}
	return err
}

// benchModes returns the FlagSets of bench's two modes, each got by
// asking the mode for its help.
func benchModes() (builtin, targets *flag.FlagSet) {
	env := &Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard}
	flagsOf := func(run func(context.Context, *Env, []string) error) *flag.FlagSet {
		ue, _ := run(context.Background(), env, []string{"--help"}).(*usageError)
		return ue.fs
	}
	return flagsOf(benchBuiltin), flagsOf(BenchTargets)
}

// benchFlags is one FlagSet with both modes' flags, for the help's
// checks; benchUsage prints them by mode.
func benchFlags() *flag.FlagSet {
	builtin, targets := benchModes()
	fs := newFlagSet("bench")
	for _, m := range []*flag.FlagSet{builtin, targets} {
		m.VisitAll(func(f *flag.Flag) {
			if fs.Lookup(f.Name) == nil {
				fs.Var(f.Value, f.Name, f.Usage)
			}
		})
	}
	return fs
}

// benchUsage prints bench's usage with both modes' flags, whichever mode
// was asked.
func benchUsage(w io.Writer, _ *flag.FlagSet) {
	builtin, targets := benchModes()
	c, _ := findCommand([]string{"bench"})
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: firstword bench [flags]\n       firstword bench --target NAME=URL [--target NAME=URL ...] [flags]\n\n%s\n", c.about)
	b.WriteString("\nFlags of the built-in comparison (no --target):\n")
	printFlags(&b, builtin)
	b.WriteString("\nFlags with --target (and with --upstream, --compare or --from):\n")
	printFlags(&b, targets)
	fmt.Fprintf(&b, `
With --target, bench exits 1 when a target's share of failed requests is
above --max-errors (1%%) or a --fail-if check is true, after printing and
writing the report; 2 for a usage error, such as a --fail-if that does not
parse or names no target; 130 when interrupted. --fail-if's grammar:

  TARGET[@LEVEL]:METRIC[.STAT] OP VALUE

OP is <, <=, > or >=; VALUE a figure (800ms, 1.5s, 5%%, 120/s) or another
target's same figure at the same level, plus, minus or times a figure
(direct+2ms, refproxy*0.9). Without @LEVEL a check is judged at every
level. METRIC[.STAT] is one of (cpu and rss need --pid):
%s
See docs/bench.md.
`, wrapList(yardstick.MetricNames(), "  ", 78))
	io.WriteString(w, b.String())
}

// wrapList joins items with ", " in lines of at most width, each
// starting with indent.
func wrapList(items []string, indent string, width int) string {
	var b strings.Builder
	line := indent
	for i, it := range items {
		if i < len(items)-1 {
			it += ","
		}
		if line != indent && len(line)+1+len(it) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += it
	}
	b.WriteString(line)
	return b.String()
}

// benchBuiltin is bench without --target: firstword against baselines.
func benchBuiltin(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("bench")
	n := fs.Int("latency-requests", 60, "`N` requests per path at concurrency 1 (5×N at concurrency 50)")
	conc := fs.Int("concurrency", 32, "`N` requests in flight in the throughput phase")
	dur := fs.Duration("duration", 10*time.Second, "how long the throughput phase runs on each path, a `DURATION` such as 30s or 2m")
	idle := fs.Int("idle-streams", 1000, "`N` concurrent open streams in the memory phase")
	proxy := fs.Bool("reverse-proxy", true, "also measure Go's httputil.ReverseProxy and a TCP relay as baselines, and, in the throughput and slowcpu phases, ReverseProxy reading each event")
	phases := fs.String("phases", "latency,throughput,chat,cancel,slowcpu,memory", "what to measure: a comma-separated `LIST` of latency, throughput, chat, cancel, slowcpu and memory")
	slowStreams := fs.Int("slow-streams", 1000, "`N` streams at 10 chunks a second in the slowcpu phase")
	slowWindow := fs.Duration("slow-window", 4*time.Second, "how long the slowcpu phase reads CPU in each round, a `DURATION`")
	slowRounds := fs.Int("slow-rounds", 3, "`N` alternating rounds per path in the slowcpu phase")
	chatN := fs.Int("chat-requests", 400, "`N` requests per endpoint in the chat phase (concurrency 50)")
	cancelRounds := fs.Int("cancel-rounds", 4, "`N` rounds of 50 closed streams per target and moment in the cancel phase")
	var genv []string
	fs.Func("gateway-env", "`NAME=VALUE` added to the gateway's environment (repeatable)", func(v string) error { genv = append(genv, v); return nil })
	if err := parseAll(fs, args); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	rep, err := bench.Run(ctx, bench.Options{
		Exe: exe, LatencyRequests: *n, ThroughputConcurrency: *conc, ThroughputDuration: *dur,
		IdleStreams: *idle, ReverseProxy: *proxy, GatewayEnv: genv, Log: env.Stderr,
		Phases:      strings.Split(*phases, ","),
		SlowStreams: *slowStreams, SlowWindow: *slowWindow, SlowRounds: *slowRounds,
		ChatRequests: *chatN, CancelRounds: *cancelRounds,
	})
	if err != nil {
		return err
	}
	cmd := "firstword bench"
	if len(args) > 0 {
		cmd += " " + strings.Join(args, " ")
	}
	fmt.Fprint(env.Stdout, rep.Markdown(cmd))
	return nil
}

// BenchProxy serves Go's httputil.ReverseProxy in front of one upstream:
// the baseline a gateway that parses nothing would reach.
func BenchProxy(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("bench-proxy")
	addr := fs.String("addr", "127.0.0.1:0", "listen address `HOST:PORT`")
	upstream := fs.String("upstream", "", "upstream base `URL` (required; with --tcp, its host:port is used)")
	tcp := fs.Bool("tcp", false, "relay TCP connections byte for byte instead of proxying HTTP")
	parse := fs.String("parse", "", "read every event of a stream on its way with `PARSER`: firstword (the gateway's own reader) or stdlib (bufio and encoding/json)")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	u, err := url.Parse(*upstream)
	if err != nil || u.Host == "" {
		return usagef(fs, "--upstream: want a URL, got %q", *upstream)
	}
	if *tcp {
		return bench.RelayTCP(ctx, *addr, u.Host)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	if *parse != "" {
		if rp.ModifyResponse, err = bench.ParseResponses(*parse); err != nil {
			return usagef(fs, "--parse: %v", err)
		}
	}
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 512, DisableCompression: true}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.Handle("/", rp)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// BenchUpstream serves the benchmark's fake upstreams.
func BenchUpstream(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("bench-upstream")
	addr := fs.String("addr", "127.0.0.1:0", "listen address `HOST:PORT`")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: bench.Upstreams()}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
