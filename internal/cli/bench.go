package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/bench"
)

// Bench measures the gateway against a direct connection to the same fake
// upstream and prints a Markdown report (docs/BENCHMARKS.md holds one).
func Bench(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	n := fs.Int("latency-requests", 60, "requests per path at concurrency 1 (×5 at concurrency 50)")
	conc := fs.Int("concurrency", 32, "concurrency of the throughput phase")
	dur := fs.Duration("duration", 10*time.Second, "duration of the throughput phase, per path")
	idle := fs.Int("idle-streams", 1000, "concurrent open streams for the memory phase")
	proxy := fs.Bool("reverse-proxy", true, "also measure Go's httputil.ReverseProxy as a baseline")
	phases := fs.String("phases", "latency,throughput,memory", "what to measure, comma-separated")
	var genv []string
	fs.Func("gateway-env", "`NAME=VALUE` added to the gateway's environment (repeatable)", func(v string) error { genv = append(genv, v); return nil })
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	rep, err := bench.Run(ctx, bench.Options{
		Exe: exe, LatencyRequests: *n, ThroughputConcurrency: *conc, ThroughputDuration: *dur,
		IdleStreams: *idle, ReverseProxy: *proxy, GatewayEnv: genv, Log: env.Stderr,
		Phases: strings.Split(*phases, ","),
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
	fs := flag.NewFlagSet("bench-proxy", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	upstream := fs.String("upstream", "", "upstream base URL (with --tcp, its host:port is used)")
	tcp := fs.Bool("tcp", false, "relay TCP connections byte for byte instead of proxying HTTP")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	u, err := url.Parse(*upstream)
	if err == nil && *tcp {
		return bench.RelayTCP(ctx, *addr, u.Host)
	}
	if err != nil || u.Host == "" {
		return fmt.Errorf("--upstream: want a URL, got %q", *upstream)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
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
	fs := flag.NewFlagSet("bench-upstream", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return errUsage
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
