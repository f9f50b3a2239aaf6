package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/gateway"
	"github.com/firstword/firstword/internal/store"
)

// Keys runs an action on API keys: create, list, revoke or rotate. Keys
// live in the store the config names, so a running gateway sees them
// within auth.cache_ttl; with --server the action goes through a running
// gateway's admin API instead.
func Keys(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("keys")
	if len(args) == 0 {
		return usagef(fs, "want an action: create, list, revoke or rotate")
	}
	switch args[0] {
	case "create":
		return keysCreate(ctx, env, args[1:])
	case "list":
		return keysList(ctx, env, args[1:])
	case "revoke":
		return keysRevoke(ctx, env, args[1:])
	case "rotate":
		return keysRotate(ctx, env, args[1:])
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return unknownAction(fs, args[0], "create", "list", "revoke", "rotate")
}

// parseKeyOperand parses the flags of a keys action that acts on one key
// and returns the key's ID (or prefix); none is a usage error saying
// missing, as is more than one.
func parseKeyOperand(fs *flag.FlagSet, args []string, missing string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	switch fs.NArg() {
	case 0:
		return "", usagef(fs, "%s", missing)
	case 1:
		return fs.Arg(0), nil
	}
	return "", usagef(fs, "want one key, got %s (flags go before the key)", strings.Join(fs.Args(), " "))
}

// configFlag defines the --config flag every keys action has.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "read the config, which names the store, from `FILE` (default: none; the store is the SQLite file firstword.db in the working directory)")
}

func keysCreate(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("keys create")
	cfgPath := configFlag(fs)
	tenant := fs.String("tenant", "", "the key's tenant `ID` (required; created if new)")
	user := fs.String("user", "", "user `ID`: keys with the same user share conversations (default: the key's own ID)")
	admin := fs.Bool("admin", false, "an admin key: reaches /admin/* and sees every tenant's budget views")
	name := fs.String("name", "", "a `LABEL` for the key, shown by keys list")
	srv := addServerFlags(fs)
	if err := parseAll(fs, args); err != nil {
		return err
	}
	if *tenant == "" {
		return usagef(fs, "--tenant is required")
	}
	for _, f := range []struct{ name, v string }{{"--tenant", *tenant}, {"--user", *user}, {"--name", *name}} {
		if why := auth.CheckName(f.v); why != "" {
			return usagef(fs, "%s %s", f.name, why)
		}
	}
	if *srv.url != "" {
		c, err := srv.client(env)
		if err != nil {
			return err
		}
		return remoteCreate(ctx, env, c, *tenant, *user, *name, *admin)
	}
	st, err := openKeyStore(ctx, env, *cfgPath, true)
	if err != nil {
		return err
	}
	defer st.Close()
	k := &store.APIKey{ID: store.NewID("key_"), TenantID: *tenant, UserID: *user, Name: *name, Admin: *admin}
	key, err := auth.CreateKey(ctx, st, k)
	if err != nil {
		return err
	}
	v := auth.ShowKey(k)
	v.Key = key
	printCreated(env, v, "")
	return nil
}

func keysList(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("keys list")
	cfgPath := configFlag(fs)
	tenant := fs.String("tenant", "", "list only the keys of tenant `ID` (default: every tenant's)")
	srv := addServerFlags(fs)
	if err := parseAll(fs, args); err != nil {
		return err
	}
	if *srv.url != "" {
		c, err := srv.client(env)
		if err != nil {
			return err
		}
		return remoteList(ctx, env, c, *tenant)
	}
	st, err := openKeyStore(ctx, env, *cfgPath, false)
	if errors.Is(err, errNoStore) {
		return nil // no store, no keys: the message said so
	}
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.ListAPIKeys(ctx, *tenant)
	if err != nil {
		return err
	}
	views := make([]auth.KeyView, 0, len(keys))
	for i := range keys {
		views = append(views, auth.ShowKey(&keys[i]))
	}
	printKeys(env.Stdout, views)
	return nil
}

func keysRevoke(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("keys revoke")
	cfgPath := configFlag(fs)
	yes := fs.Bool("yes", false, "revoke the last active key without asking (needed when stdin is not a terminal)")
	srv := addServerFlags(fs)
	id, err := parseKeyOperand(fs, args, "want the ID or prefix of the key to revoke")
	if err != nil {
		return err
	}
	if *srv.url != "" {
		c, err := srv.client(env)
		if err != nil {
			return err
		}
		var list struct {
			Data []auth.KeyView `json:"data"`
		}
		if err := c.do(ctx, "GET", "/admin/v1/keys", nil, &list); err != nil {
			return err
		}
		ids, err := checkRevoke(env, list.Data, id, *yes, time.Now())
		if len(ids) == 0 || err != nil {
			return err
		}
		// The admin API revokes by ID: a prefix is its keys' IDs.
		for _, kid := range ids {
			if err := remoteRevoke(ctx, env, c, kid); err != nil {
				return err
			}
		}
		return nil
	}
	st, err := openKeyStoreOf(ctx, env, *cfgPath, "revoke", id)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.ListAPIKeys(ctx, "")
	if err != nil {
		return err
	}
	views := make([]auth.KeyView, 0, len(keys))
	for i := range keys {
		views = append(views, auth.ShowKey(&keys[i]))
	}
	if ids, err := checkRevoke(env, views, id, *yes, time.Now()); len(ids) == 0 || err != nil {
		return err
	}
	if err := st.RevokeAPIKey(ctx, id, time.Now().UTC()); err != nil {
		return fmt.Errorf("revoke %s: %w", id, err)
	}
	fmt.Fprintf(env.Stderr, "revoked %s\n", id)
	return nil
}

// checkRevoke decides whether to revoke id (a key's ID or prefix) among
// keys and returns the IDs of the active keys it names, or none: no such
// key is an error; a key already revoked is said so, and nothing is done;
// the last active key is revoked only with yes or, on a terminal, once the
// user agrees, after saying that every request will then be refused. A
// key in a rotation's grace does not count as staying: it stops soon.
func checkRevoke(env *Env, keys []auth.KeyView, id string, yes bool, now time.Time) ([]string, error) {
	var match, revoking []string
	var revokedAt *time.Time
	left := 0
	for i := range keys {
		k := &keys[i]
		switch {
		case k.ID == id || k.Prefix == id:
			match = append(match, k.ID)
			if k.RevokedAt == nil || k.RevokedAt.After(now) {
				revoking = append(revoking, k.ID)
			} else {
				revokedAt = k.RevokedAt
			}
		case k.RevokedAt == nil:
			left++
		}
	}
	if len(match) == 0 {
		return nil, fmt.Errorf("no key %s: \"firstword keys list\" shows the keys' IDs and prefixes", id)
	}
	if len(revoking) == 0 {
		fmt.Fprintf(env.Stderr, "%s was already revoked at %s: nothing changed\n", id, revokedAt.UTC().Format(time.RFC3339))
		return nil, nil
	}
	if left > 0 || yes {
		return revoking, nil
	}
	fmt.Fprintf(env.Stderr, `%s is the last active API key (keys in a rotation's grace stop soon): once it is revoked, every API request gets 401.
The gateway does not go back to local mode once a key has existed; to get in
again, create a key with "firstword keys create --tenant NAME" on the same store.
`, id)
	if !env.Interactive {
		return nil, fmt.Errorf("not revoked: pass --yes to revoke the last active key")
	}
	fmt.Fprint(env.Stderr, "Revoke it? [y/N] ")
	answer, _ := bufio.NewReader(env.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return nil, fmt.Errorf("not revoked")
	}
	return revoking, nil
}

func keysRotate(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("keys rotate")
	cfgPath := configFlag(fs)
	grace := fs.Duration("grace", 0, "let the old key work for `DURATION` more (e.g. 10m; default: revoked at once)")
	srv := addServerFlags(fs)
	id, err := parseKeyOperand(fs, args, "want the ID of the key to rotate")
	if err != nil {
		return err
	}
	if *grace < 0 {
		return usagef(fs, "--grace must not be negative")
	}
	if *srv.url != "" {
		c, err := srv.client(env)
		if err != nil {
			return err
		}
		return remoteRotate(ctx, env, c, id, *grace)
	}
	st, err := openKeyStoreOf(ctx, env, *cfgPath, "rotate", id)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.ListAPIKeys(ctx, "")
	if err != nil {
		return err
	}
	var old *store.APIKey
	for i := range keys {
		if keys[i].ID == id {
			old = &keys[i]
		}
	}
	now := time.Now().UTC()
	switch {
	case old == nil:
		return fmt.Errorf("rotate %s: no key has this ID", id)
	case old.RevokedAt != nil && !old.RevokedAt.After(now):
		return fmt.Errorf("rotate %s: the key is revoked: create a new one instead", id)
	}
	k := &store.APIKey{ID: store.NewID("key_"), TenantID: old.TenantID, UserID: old.UserID, Name: old.Name, CreatedAt: now, Admin: old.Admin}
	key, err := auth.CreateKey(ctx, st, k)
	if err != nil {
		return err
	}
	if err := store.CopyKeyOverride(ctx, st, old.ID, k.ID); err != nil {
		return fmt.Errorf("rotate %s: the new key %s exists, but its limits were not copied (the old one is not revoked): %w", id, k.ID, err)
	}
	until := now.Add(*grace)
	if err := st.RevokeAPIKey(ctx, old.ID, until); err != nil {
		return fmt.Errorf("rotate %s: the new key %s exists, but the old one was not revoked: %w", id, k.ID, err)
	}
	v := auth.ShowKey(k)
	v.Key = key
	printCreated(env, v, fmt.Sprintf(", replacing %s (revoked from %s)", id, until.Format(time.RFC3339)))
	return nil
}

// errNoStore: the SQLite file a keys action would read does not exist.
var errNoStore = errors.New("no store")

// openKeyStore opens the store the config at cfgPath names, saying on
// stderr which it is: keys run in the wrong directory would otherwise
// use a store serve never reads. A SQLite file that does not exist yet is
// created if create is set (and the message says so); otherwise
// openKeyStore reports errNoStore and creates nothing.
func openKeyStore(ctx context.Context, env *Env, cfgPath string, create bool) (store.Store, error) {
	cfg, err := loadConfig(cfgPath, env)
	if err != nil {
		return nil, err
	}
	where := storeLocation(cfg.Store)
	switch {
	case !sqliteFileMissing(cfg.Store):
		fmt.Fprintf(env.Stderr, "store: %s\n", where)
	case create:
		fmt.Fprintf(env.Stderr, "store: %s does not exist yet: creating a new store (serve and keys use firstword.db in the working directory unless --config names a store)\n", where)
	default:
		fmt.Fprintf(env.Stderr, "store: %s does not exist: no keys (serve and keys use firstword.db in the working directory unless --config names a store)\n", where)
		return nil, errNoStore
	}
	return gateway.OpenStore(ctx, cfg)
}

// openKeyStoreOf opens the store, as openKeyStore, for action (revoke,
// rotate) on the key id: no store is no such key.
func openKeyStoreOf(ctx context.Context, env *Env, cfgPath, action, id string) (store.Store, error) {
	st, err := openKeyStore(ctx, env, cfgPath, false)
	if errors.Is(err, errNoStore) {
		return nil, fmt.Errorf("%s %s: no store, so no such key", action, id)
	}
	return st, err
}

// storeLocation says where a store keeps its data, for people and logs:
// "SQLite file /abs/path", "SQLite in memory (nothing is kept)" or
// "PostgreSQL at host:port/db". It never shows a password.
func storeLocation(s config.Store) string {
	if s.Driver == "postgres" {
		return "PostgreSQL at " + postgresLocation(s.ResolvedURL)
	}
	if s.Path == "" || strings.Contains(s.Path, ":memory:") {
		return "SQLite in memory (nothing is kept)"
	}
	path, err := filepath.Abs(s.Path)
	if err != nil {
		path = s.Path
	}
	return "SQLite file " + path
}

// postgresLocation is the host and database of a PostgreSQL connection
// string, a URL or keyword=value pairs, without the user or password.
func postgresLocation(dsn string) string {
	host, port, db := "", "", ""
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		host, db = u.Host, strings.TrimPrefix(u.Path, "/")
		if host == "" {
			host = u.Query().Get("host") // postgres:///db?host=/run/postgresql
		}
	} else {
		for _, f := range strings.Fields(dsn) {
			k, v, _ := strings.Cut(f, "=")
			v = strings.Trim(v, "'")
			switch k {
			case "host":
				host = v
			case "port":
				port = v
			case "dbname":
				db = v
			}
		}
	}
	if host == "" {
		host = "localhost"
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	}
	if db == "" {
		return host + " (the user's default database)"
	}
	return host + "/" + db
}

// sqliteFileMissing reports whether s is a SQLite file that does not
// exist yet.
func sqliteFileMissing(s config.Store) bool {
	if s.Driver == "postgres" || s.Path == "" || strings.Contains(s.Path, ":memory:") {
		return false
	}
	_, err := os.Stat(s.Path)
	return errors.Is(err, os.ErrNotExist)
}

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
