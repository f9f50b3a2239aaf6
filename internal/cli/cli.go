// Package cli is firstword's command line and its composition root: the
// only place that reads the config and picks adapters.
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Main runs the command in args and returns the process exit code.
func Main(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &Env{Getenv: getenv, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		err = Serve(ctx, env, rest)
	case "sim":
		err = Sim(ctx, env, rest)
	case "budget":
		err = Budget(ctx, env, rest)
	case "keys":
		err = Keys(ctx, env, rest)
	case "levers":
		err = Levers(ctx, env, rest)
	case "bench":
		err = Bench(ctx, env, rest)
	case "bench-proxy":
		err = BenchProxy(ctx, env, rest)
	case "bench-upstream":
		err = BenchUpstream(ctx, env, rest)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "firstword: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
	if err != nil {
		if err == errUsage {
			return 2
		}
		fmt.Fprintf(stderr, "firstword %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// Env is the process environment a command runs in.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

var errUsage = fmt.Errorf("usage")

func usage(w io.Writer) {
	fmt.Fprint(w, strings.TrimLeft(`
firstword: a latency-first LLM chat gateway

Usage:
  firstword serve [--config FILE] [--addr HOST:PORT]
        Run the gateway. With no config it serves the built-in simulated
        models (sim-small, sim-medium, sim-large, chat) on 127.0.0.1:8080.
  firstword budget [--server URL] [--json]
        Print where the time goes in a running gateway: each stage's
        p50/p95/p99 against its target, and the critical path.
  firstword keys create|list|revoke ...
        Manage API keys (stored hashed). With no keys, serve runs in
        single-user local mode, on a loopback address only.
  firstword sim [--addr HOST:PORT] [--seed N]
        Run the simulated provider alone as an OpenAI-compatible upstream.
  firstword bench [--duration 10s] [--concurrency 32] [--idle-streams 1000]
        Measure the gateway against a direct connection to a fake upstream.
  firstword levers [--requests 20] [--concurrency 10]
        Measure the lesson's levers against the sim: first word, total time
        and cost for streaming, shorter answers, a smaller model, a cache
        hit, a coalesced duplicate and a cached prompt prefix.
  firstword help
        Show this help.
`, "\n"))
}
