package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/gateway"
	"github.com/firstword/firstword/internal/store"
)

// Serve runs the gateway until ctx ends, then shuts down gracefully: it
// stops accepting, lets open streams finish for the shutdown timeout, then
// cancels the rest (they end with an error event and are recorded).
func Serve(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("serve")
	cfgPath := fs.String("config", "", "read the config from `FILE` (default: none; the built-in simulated models and the store ./firstword.db)")
	addr := fs.String("addr", "", "listen on `HOST:PORT` instead of the config's listen (whose default is 127.0.0.1:8080)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noOperands(fs); err != nil {
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
	if key := env.Getenv(adminKeyEnv); key != "" {
		if err := bootstrapAdminKey(ctx, env, cfg, key); err != nil {
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
	local, err := gw.Local(ctx)
	if err != nil {
		return err
	}
	if local && !isLoopback(cfg.Listen) {
		return fmt.Errorf("no API keys exist, so firstword would serve anyone as the local user: it only does that on a loopback address, not %s. Create a key with \"firstword keys create --tenant NAME\", give one in FIRSTWORD_ADMIN_KEY, or listen on 127.0.0.1", cfg.Listen)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
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

// adminKeyEnv names a key for a store that has none yet (a new pod on an
// empty volume): serve stores it as an admin key of tenant admin before
// it starts. Once the store has any key the variable is ignored.
const adminKeyEnv = "FIRSTWORD_ADMIN_KEY"

func bootstrapAdminKey(ctx context.Context, env *Env, cfg *config.Config, key string) error {
	prefix, hash, ok := auth.Imported(key)
	if !ok {
		return fmt.Errorf("%s is not a firstword key (fw_, 8 letters or digits, _, at least 16 more)", adminKeyEnv)
	}
	st, err := gateway.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	n, err := st.CountAPIKeys(ctx)
	if err != nil || n > 0 {
		return err
	}
	if err := auth.EnsureTenant(ctx, st, "admin", "admin"); err != nil {
		return err
	}
	id := conversation.NewID("key_")
	k := &store.APIKey{ID: id, TenantID: "admin", UserID: id, Name: adminKeyEnv, Prefix: prefix, Hash: hash, CreatedAt: time.Now().UTC(), Admin: true}
	if err := st.CreateAPIKey(ctx, k); err != nil {
		// Another replica may have stored it (or another key) meanwhile.
		if n, cerr := st.CountAPIKeys(ctx); cerr == nil && n > 0 {
			return nil
		}
		return err
	}
	fmt.Fprintf(env.Stderr, "the store had no API keys: stored %s as admin key %s (prefix %s) of tenant admin\n", adminKeyEnv, id, prefix)
	return nil
}
