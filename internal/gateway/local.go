package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/store"
)

// AdminKeyEnv names a key for a store that has none yet (a new pod on an
// empty volume): serve stores it as an admin key of tenant admin before
// it starts (BootstrapAdminKey). Once the store has any key the variable
// is ignored.
const AdminKeyEnv = "FIRSTWORD_ADMIN_KEY"

// BootstrapAdminKey stores key, read from AdminKeyEnv, as an admin key of
// tenant admin if the config's store has no key yet, and says so on w.
// A key not in the form "firstword keys create" prints is an error.
func BootstrapAdminKey(ctx context.Context, cfg *config.Config, key string, w io.Writer) error {
	prefix, hash, ok := auth.Imported(key)
	if !ok {
		return fmt.Errorf("%s is not a firstword key (fw_, 8 letters or digits, _, at least 16 more)", AdminKeyEnv)
	}
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	n, err := st.CountAPIKeys(ctx)
	if err != nil || n > 0 {
		return err
	}
	k := &store.APIKey{ID: store.NewID("key_"), TenantID: "admin", Name: AdminKeyEnv, Prefix: prefix, Hash: hash, Admin: true}
	if err := auth.StoreKey(ctx, st, k); err != nil {
		// Another replica may have stored it (or another key) meanwhile.
		if n, cerr := st.CountAPIKeys(ctx); cerr == nil && n > 0 {
			return nil
		}
		return err
	}
	fmt.Fprintf(w, "the store had no API keys: stored %s as admin key %s (prefix %s) of tenant admin\n", AdminKeyEnv, k.ID, prefix)
	return nil
}

// Listen listens on the config's address for Serve, after Admit.
func (g *Gateway) Listen(ctx context.Context) (ln net.Listener, local bool, err error) {
	if local, err = g.Admit(ctx); err != nil {
		return nil, false, err
	}
	ln, err = ListenTCP(g.cfg.Listen)
	return ln, local, err
}

// Admit says whether the gateway may serve on the config's address: while
// the store has no API key the gateway serves anyone as the local user,
// so it then refuses any address but a loopback one; local reports that
// mode.
func (g *Gateway) Admit(ctx context.Context) (local bool, err error) {
	local, err = g.Local(ctx)
	if err != nil {
		return false, err
	}
	if local && !isLoopback(g.cfg.Listen) {
		return false, fmt.Errorf("no API keys exist, so firstword would serve anyone as the local user: it only does that on a loopback address, not %s. Create a key with \"firstword keys create --tenant NAME\", give one in %s, or listen on 127.0.0.1", g.cfg.Listen, AdminKeyEnv)
	}
	return local, nil
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
