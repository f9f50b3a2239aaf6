package cli

import (
	"context"
	"io"
	"log/slog"
	"net"

	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/gateway"
)

// Serve runs the gateway until ctx ends, then shuts down gracefully: it
// stops accepting, lets open streams finish for the shutdown timeout, then
// cancels the rest (they end with an error event and are recorded).
func Serve(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("serve")
	cfgPath := fs.String("config", "", "read the config from `FILE` (default: none; the built-in simulated models and the store ./firstword.db)")
	addr := fs.String("addr", "", "listen on `HOST:PORT` instead of the config's listen (whose default is 127.0.0.1:8080)")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	if *addr != "" {
		if _, _, err := net.SplitHostPort(*addr); err != nil {
			return usagef(fs, "--addr: want HOST:PORT, got %q", *addr)
		}
	}
	cfg, err := loadConfig(*cfgPath, env)
	if err != nil {
		return err
	}
	if *addr != "" {
		cfg.Listen = *addr
	}
	if key := env.Getenv(gateway.AdminKeyEnv); key != "" {
		if err := gateway.BootstrapAdminKey(ctx, cfg, key, env.Stderr); err != nil {
			return err
		}
	}
	logs := newLogBuffer(env.Stderr)
	defer logs.Close()
	log := newLogger(logs, cfg.Log)
	gw, err := gateway.Build(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer gw.Close()
	ln, local, err := gw.Listen(ctx)
	if err != nil {
		return err
	}
	mode := "keys"
	if local {
		mode = "local (single user, no keys)"
	}
	log.Info("listening", "addr", ln.Addr().String(), "config", cfg.Path, "models", gw.Aliases(), "store", cfg.Store.Driver, "store_at", storeLocation(cfg.Store), "auth", mode)
	return gw.Serve(ctx, ln)
}

// newLogger is serve's logger, in the configured format and level.
func newLogger(w io.Writer, lc config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(lc.Level))
	opts := &slog.HandlerOptions{Level: level}
	if lc.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
