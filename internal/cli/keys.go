package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/store"
)

// Keys manages API keys: create, list, revoke. Keys live in the store
// the config names, so a running gateway sees them within auth.cache_ttl.
func Keys(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, keysUsage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	cfgPath := fs.String("config", "", "config `file` naming the store (default: firstword.db here)")
	tenant := fs.String("tenant", "", "tenant ID")
	user := fs.String("user", "", "user ID: keys with the same user share conversations (default: the key's own ID)")
	admin := fs.Bool("admin", false, "an admin key: reaches /admin/* and sees every tenant's budget views")
	name := fs.String("name", "", "a label for the key")
	if err := fs.Parse(rest); err != nil {
		return errUsage
	}
	cfg, err := loadConfig(*cfgPath, env)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "create":
		if *tenant == "" {
			return fmt.Errorf("--tenant is required")
		}
		if err := auth.EnsureTenant(ctx, st, *tenant, *tenant); err != nil {
			return err
		}
		key, prefix, hash := auth.NewKey()
		k := &store.APIKey{ID: conversation.NewID("key_"), TenantID: *tenant, UserID: *user, Name: *name, Prefix: prefix, Hash: hash, CreatedAt: time.Now().UTC(), Admin: *admin}
		if k.UserID == "" {
			k.UserID = k.ID // each key its own user: its conversations are its own
		}
		if err := st.CreateAPIKey(ctx, k); err != nil {
			return err
		}
		kind := "key"
		if k.Admin {
			kind = "admin key"
		}
		fmt.Fprintf(env.Stderr, "created %s %s (prefix %s) for tenant %s, user %s; it is shown once:\n", kind, k.ID, prefix, *tenant, k.UserID)
		fmt.Fprintln(env.Stdout, key)
	case "list":
		keys, err := st.ListAPIKeys(ctx, *tenant)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPREFIX\tTENANT\tUSER\tNAME\tADMIN\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", k.ID, k.Prefix, k.TenantID, k.UserID, k.Name, k.Admin, k.CreatedAt.Format(time.RFC3339), revoked)
		}
		tw.Flush()
	case "revoke":
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: firstword keys revoke ID|PREFIX")
		}
		if err := st.RevokeAPIKey(ctx, fs.Arg(0), time.Now().UTC()); err != nil {
			return fmt.Errorf("revoke %s: %w", fs.Arg(0), err)
		}
		fmt.Fprintf(env.Stderr, "revoked %s\n", fs.Arg(0))
	default:
		fmt.Fprint(env.Stderr, keysUsage)
		return errUsage
	}
	return nil
}

const keysUsage = `Usage:
  firstword keys create --tenant T [--user U] [--name LABEL] [--admin] [--config FILE]
  firstword keys list [--tenant T] [--config FILE]
  firstword keys revoke ID|PREFIX [--config FILE]
`

func loadConfig(path string, env *Env) (*config.Config, error) {
	if path == "" {
		cfg := config.Default()
		cfg.Store.Path = "firstword.db"
		return cfg, nil
	}
	cfg, err := config.Load(path, env.Getenv)
	if err != nil {
		return nil, err
	}
	if cfg.Store.Driver == "sqlite" && cfg.Store.Path == "" {
		cfg.Store.Path = "firstword.db"
	}
	return cfg, nil
}

// isLoopback reports whether a listen address only accepts local
// connections.
func isLoopback(addr string) bool {
	host := addr
	if i := strings.LastIndex(addr, ":"); i >= 0 {
		host = addr[:i]
	}
	host = strings.Trim(host, "[]")
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}
