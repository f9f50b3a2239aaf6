package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"

	"golang.org/x/term"

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
	// The port first: a busy one is reported before the store is created.
	ln, err := gateway.ListenTCP(cfg.Listen)
	if err != nil {
		return listenError(cfg.Listen, err)
	}
	defer ln.Close()
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
	local, err := gw.Admit(ctx)
	if err != nil {
		return err
	}
	mode := "keys"
	if local {
		mode = "local (single user, no keys)"
	}
	log.Info("listening", "addr", ln.Addr().String(), "config", cfg.Path, "models", gw.Aliases(), "store", cfg.Store.Driver, "store_at", storeLocation(cfg.Store), "auth", mode)
	if isTerminal(env.Stderr) {
		io.WriteString(logs, readyLine(ln.Addr().String(), local))
	}
	return gw.Serve(ctx, ln)
}

// listenError says why the gateway cannot listen on addr, and what to
// do about a port in use.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is in use by another process (another firstword serve?): stop it, or listen on another port with --addr or the config's listen", addr)
	}
	return fmt.Errorf("cannot listen on %s: %w", addr, err)
}

// readyLine is the line a person at a terminal reads under the JSON log:
// where to open the gateway, and how to stop it.
func readyLine(addr string, local bool) string {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port)
	who := "API keys required"
	if local {
		who = "local mode: no key needed, this machine only"
	}
	return fmt.Sprintf("\nfirstword is ready: open %s/ for the chat page, or point an OpenAI client at %s/v1 (%s). Ctrl-C stops it.\n\n", url, url, who)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
