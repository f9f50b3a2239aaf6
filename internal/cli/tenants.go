package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/gateway"
	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/store"
)

// Tenants shows and sets tenants' and keys' limits and budgets, and
// reads usage: through a running gateway's admin API (--server), or
// directly on the config's store.
func Tenants(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("tenants")
	cfgPath := configFlag(fs)
	server := fs.String("server", "", "a running gateway's `URL` (its admin API; default: the config's store directly)")
	keyEnv := fs.String("key-env", gateway.AdminKeyEnv, "the environment variable holding an admin key, for --server")
	keyID := fs.String("key", "", "set-limits: a key's `ID` instead of a tenant; usage: only this key")
	model := fs.String("model", "", "usage: only this model")
	from := fs.String("from", "", "usage: from this UTC day (YYYY-MM-DD) or RFC 3339 time")
	to := fs.String("to", "", "usage: until this day or time (exclusive)")
	set := fs.String("set", "", `set-limits: the fields to set, as JSON, e.g. '{"requests_per_minute": 60, "usd_per_day": 5}' ('{"reset": true}' drops them)`)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if err := parseFlags(fs, args); err != nil {
			return err // --help, or a bad flag
		}
		return usagef(fs, "want an action: list, show ID, set-limits [ID], usage [ID]")
	}
	action, rest, id := args[0], args[1:], ""
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		id, rest = rest[0], rest[1:] // the ID may come before the flags
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 1 && id == "":
		id = fs.Arg(0)
	case fs.NArg() > 0:
		return usagef(fs, "unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if actions := []string{"list", "show", "set-limits", "usage"}; !slices.Contains(actions, action) {
		return unknownAction(fs, action, actions...)
	}
	for _, f := range []struct{ name, v string }{{"the tenant ID", id}, {"--key", *keyID}} {
		if why := auth.CheckName(f.v); why != "" {
			return usagef(fs, "%s %s", f.name, why)
		}
	}
	var c tenantsBackend
	if *server != "" {
		key := env.Getenv(*keyEnv)
		if key == "" {
			return fmt.Errorf("tenants: --server needs an admin key in $%s", *keyEnv)
		}
		c = &adminHTTP{newGatewayClient(strings.TrimRight(*server, "/"), key, 30*time.Second)}
	} else {
		st, err := openKeyStore(ctx, env, *cfgPath, false)
		if err != nil {
			return err
		}
		defer st.Close()
		ovs, err := st.ListLimitOverrides(ctx)
		if err != nil {
			return fmt.Errorf("tenants: reading limit overrides: %w", err)
		}
		c = &onStore{st: st, pol: limits.NewStored(ovs)}
	}
	var out any
	var err error
	switch action {
	case "list":
		out, err = c.list(ctx)
	case "show":
		if id == "" {
			return usagef(fs, "show needs a tenant ID")
		}
		out, err = c.show(ctx, id)
	case "set-limits":
		if *set == "" {
			return usagef(fs, "set-limits needs --set JSON")
		}
		scope := store.ScopeTenant
		if *keyID != "" {
			scope, id = store.ScopeKey, *keyID
		} else if id == "" {
			return usagef(fs, "set-limits needs a tenant ID or --key ID")
		}
		out, err = c.setLimits(ctx, scope, id, []byte(*set))
	case "usage":
		out, err = c.usage(ctx, usageQuery{tenant: id, key: *keyID, model: *model, from: *from, to: *to})
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// tenantsBackend runs the tenants actions: through a running gateway's
// admin API (adminHTTP) or on the store (onStore).
type tenantsBackend interface {
	list(ctx context.Context) (any, error)
	show(ctx context.Context, id string) (any, error)
	// setLimits applies the change set (JSON) to the override of a tenant
	// or a key (scope store.ScopeTenant or store.ScopeKey).
	setLimits(ctx context.Context, scope, id string, set []byte) (any, error)
	usage(ctx context.Context, q usageQuery) (any, error)
}

// usageQuery narrows a usage report; from and to are as the admin API
// takes them (limits.ParseWhen).
type usageQuery struct{ tenant, key, model, from, to string }

// adminHTTP calls a running gateway's admin API.
type adminHTTP struct{ c *gatewayClient }

func (a *adminHTTP) list(ctx context.Context) (any, error) {
	return a.do(ctx, http.MethodGet, "/admin/v1/tenants", nil)
}

func (a *adminHTTP) show(ctx context.Context, id string) (any, error) {
	return a.do(ctx, http.MethodGet, "/admin/v1/tenants/"+url.PathEscape(id), nil)
}

func (a *adminHTTP) setLimits(ctx context.Context, scope, id string, set []byte) (any, error) {
	path := "/admin/v1/tenants/" + url.PathEscape(id)
	if scope == store.ScopeKey {
		path = "/admin/v1/keys/" + url.PathEscape(id) + "/limits"
	}
	return a.do(ctx, http.MethodPut, path, set)
}

func (a *adminHTTP) usage(ctx context.Context, uq usageQuery) (any, error) {
	q := url.Values{}
	for k, v := range map[string]string{"tenant": uq.tenant, "key": uq.key, "model": uq.model, "from": uq.from, "to": uq.to} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return a.do(ctx, http.MethodGet, "/admin/v1/usage?"+q.Encode(), nil)
}

func (a *adminHTTP) do(ctx context.Context, method, path string, body []byte) (any, error) {
	ans, err := a.c.send(ctx, method, path, body)
	if err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	var v any
	if err := json.Unmarshal(ans.body, &v); err != nil {
		return nil, fmt.Errorf("tenants: %s %s: %d, not JSON", method, path, ans.code)
	}
	if ans.code != http.StatusOK {
		return nil, fmt.Errorf("tenants: %s %s: %d %s", method, path, ans.code, ans.errorMessage())
	}
	return v, nil
}

// onStore runs the actions on the store with the admin API's own
// operations (internal/limits): the overrides and the spend as the store
// has them (the config's own tenant policies are the running gateway's to
// show: use --server for the effective ones).
type onStore struct {
	st store.Store
	// pol are the store's overrides, as a gateway reads them.
	pol limits.Stored
}

// storeView is a tenant as the store alone shows it: its override and
// its spend this UTC day and month.
type storeView struct {
	ID       string          `json:"id"`
	Override limits.Override `json:"override"`
	USDDay   float64         `json:"usd_day"`
	USDMonth float64         `json:"usd_month"`
	TokDay   int64           `json:"tokens_day"`
	TokMonth int64           `json:"tokens_month"`
}

func storeViewOf(v limits.View) storeView {
	return storeView{ID: v.ID, Override: v.Override, USDDay: v.Spend.USDDay, USDMonth: v.Spend.USDMonth, TokDay: v.Spend.TokensDay, TokMonth: v.Spend.TokensMonth}
}

func (o *onStore) list(ctx context.Context) (any, error) {
	views, err := limits.TenantViews(ctx, o.st, o.pol)
	if err != nil {
		return nil, err
	}
	out := make([]storeView, 0, len(views))
	for _, v := range views {
		out = append(out, storeViewOf(v))
	}
	return map[string]any{"object": "list", "data": out}, nil
}

func (o *onStore) show(ctx context.Context, id string) (any, error) {
	v, err := limits.ViewOf(ctx, o.st, o.pol, store.ScopeTenant, id)
	if err != nil {
		return nil, err
	}
	return storeViewOf(v), nil
}

func (o *onStore) setLimits(ctx context.Context, scope, id string, set []byte) (any, error) {
	next, err := limits.SetOverride(ctx, o.st, scope, id, set)
	var ce *limits.ChangeError
	switch {
	case errors.Is(err, limits.ErrUnknownKey):
		return nil, fmt.Errorf("tenants: no key has the ID %q (keys list shows them)", id)
	case errors.As(err, &ce):
		return nil, fmt.Errorf("tenants: --set: %w", err)
	case err != nil:
		return nil, err
	}
	return map[string]any{"id": id, "scope": scope, "override": next}, nil
}

func (o *onStore) usage(ctx context.Context, q usageQuery) (any, error) {
	f := store.UsageFilter{TenantID: q.tenant, KeyID: q.key, Model: q.model}
	var err error
	if f.From, err = limits.ParseWhen(q.from); err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	if f.To, err = limits.ParseWhen(q.to); err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	rows, err := limits.Usage(ctx, o.st, f)
	if err != nil {
		return nil, err
	}
	return map[string]any{"object": "list", "data": rows}, nil
}
