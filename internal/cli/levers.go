package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/bench"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/gateway"
)

// Levers measures the latency levers (stream, shorter answers, a smaller
// model, cache, coalescing, prefix caching) against the built-in sim, and
// prints the table (docs/LEVERS.md holds one).
func Levers(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("levers")
	n := fs.Int("requests", 20, "`N` requests per lever")
	conc := fs.Int("concurrency", 10, "`N` requests in flight together")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	cfg, err := config.Parse("levers.yaml", []byte(bench.LeverConfig), env.Getenv)
	if err != nil {
		return err
	}
	cfg.ShutdownTimeout = time.Second
	gw, err := gateway.Build(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer gw.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- gw.Serve(sctx, ln) }()
	defer func() { stop(); <-done }()
	cost := func(id string) float64 {
		for range 100 {
			if rec, ok := gw.Meter().Find(id); ok {
				return rec.Cost
			}
			time.Sleep(5 * time.Millisecond)
		}
		return 0
	}
	ls, err := bench.RunLevers(ctx, "http://"+ln.Addr().String(), bench.LeverOptions{Requests: *n, Concurrency: *conc, Cost: cost, Log: env.Stderr})
	if err != nil {
		return err
	}
	cmd := "firstword levers"
	if len(args) > 0 {
		cmd += " " + strings.Join(args, " ")
	}
	fmt.Fprint(env.Stdout, bench.LeverTable(ls, cmd))
	return nil
}
