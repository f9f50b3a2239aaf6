package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/auth"
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
	keyEnv := fs.String("key-env", "FIRSTWORD_ADMIN_KEY", "the environment variable holding an admin key, for --server")
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
	for _, f := range []struct{ name, v string }{{"the tenant ID", id}, {"--key", *keyID}} {
		if why := auth.CheckName(f.v); why != "" {
			return usagef(fs, "%s %s", f.name, why)
		}
	}
	var c tenantsClient
	if *server != "" {
		key := env.Getenv(*keyEnv)
		if key == "" {
			return fmt.Errorf("tenants: --server needs an admin key in $%s", *keyEnv)
		}
		c = &adminHTTP{base: strings.TrimRight(*server, "/"), key: key}
	} else {
		st, err := openKeyStore(ctx, env, *cfgPath, false)
		if err != nil {
			return err
		}
		defer st.Close()
		c = &adminStore{st: st}
	}
	var out any
	var err error
	switch action {
	case "list":
		out, err = c.get(ctx, "/admin/v1/tenants")
	case "show":
		if id == "" {
			return usagef(fs, "show needs a tenant ID")
		}
		out, err = c.get(ctx, "/admin/v1/tenants/"+url.PathEscape(id))
	case "set-limits":
		if *set == "" {
			return usagef(fs, "set-limits needs --set JSON")
		}
		path := "/admin/v1/tenants/" + url.PathEscape(id)
		if *keyID != "" {
			path = "/admin/v1/keys/" + url.PathEscape(*keyID) + "/limits"
		} else if id == "" {
			return usagef(fs, "set-limits needs a tenant ID or --key ID")
		}
		out, err = c.put(ctx, path, []byte(*set))
	case "usage":
		q := url.Values{}
		for k, v := range map[string]string{"tenant": id, "key": *keyID, "model": *model, "from": *from, "to": *to} {
			if v != "" {
				q.Set(k, v)
			}
		}
		out, err = c.get(ctx, "/admin/v1/usage?"+q.Encode())
	default:
		return usagef(fs, "unknown action %q: want list, show, set-limits or usage", action)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

type tenantsClient interface {
	get(ctx context.Context, path string) (any, error)
	put(ctx context.Context, path string, body []byte) (any, error)
}

// adminHTTP calls a running gateway's admin API.
type adminHTTP struct{ base, key string }

func (a *adminHTTP) get(ctx context.Context, path string) (any, error) {
	return a.do(ctx, http.MethodGet, path, nil)
}

func (a *adminHTTP) put(ctx context.Context, path string, body []byte) (any, error) {
	return a.do(ctx, http.MethodPut, path, body)
}

func (a *adminHTTP) do(ctx context.Context, method, path string, body []byte) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("tenants: %s %s: %d, not JSON", method, path, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		return nil, fmt.Errorf("tenants: %s %s: %d %s", method, path, resp.StatusCode, e.Error.Message)
	}
	return v, nil
}

// adminStore answers the same paths from the store: the overrides and
// the spend as the store has them (the config's own tenant policies are
// the running gateway's to show: use --server for the effective ones).
type adminStore struct{ st store.Store }

func (a *adminStore) get(ctx context.Context, path string) (any, error) {
	u, err := url.Parse(path)
	if err != nil {
		return nil, err
	}
	switch {
	case u.Path == "/admin/v1/usage":
		q := u.Query()
		f := store.UsageFilter{TenantID: q.Get("tenant"), KeyID: q.Get("key"), Model: q.Get("model")}
		if f.From, err = parseDay(q.Get("from")); err != nil {
			return nil, err
		}
		if f.To, err = parseDay(q.Get("to")); err != nil {
			return nil, err
		}
		rows, err := a.st.UsageReport(ctx, f)
		if rows == nil {
			rows = []store.UsageRow{}
		}
		return map[string]any{"object": "list", "data": rows}, err
	case u.Path == "/admin/v1/tenants":
		return a.tenants(ctx, "")
	}
	id, _ := url.PathUnescape(strings.TrimPrefix(u.Path, "/admin/v1/tenants/"))
	return a.tenants(ctx, id)
}

// tenants lists the tenants (or one) with overrides or spend this month.
func (a *adminStore) tenants(ctx context.Context, only string) (any, error) {
	ovs, err := a.st.ListLimitOverrides(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	sums, err := a.st.UsageSpend(ctx, time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return nil, err
	}
	type view struct {
		ID       string          `json:"id"`
		Override limits.Override `json:"override"`
		USDDay   float64         `json:"usd_day"`
		USDMonth float64         `json:"usd_month"`
		TokDay   int64           `json:"tokens_day"`
		TokMonth int64           `json:"tokens_month"`
	}
	views := map[string]*view{}
	get := func(id string) *view {
		if views[id] == nil {
			views[id] = &view{ID: id}
		}
		return views[id]
	}
	for _, o := range ovs {
		if o.Scope == store.ScopeTenant && (only == "" || o.SubjectID == only) {
			get(o.SubjectID).Override, _ = limits.ParseOverride(o.Settings)
		}
	}
	today := now.Format("2006-01-02")
	for _, s := range sums {
		if only != "" && s.TenantID != only {
			continue
		}
		v := get(s.TenantID)
		v.USDMonth += s.Cost
		v.TokMonth += s.Tokens
		if s.Day == today {
			v.USDDay += s.Cost
			v.TokDay += s.Tokens
		}
	}
	if only != "" {
		return get(only), nil
	}
	out := []*view{}
	for _, v := range views {
		out = append(out, v)
	}
	return map[string]any{"object": "list", "data": out}, nil
}

func (a *adminStore) put(ctx context.Context, path string, body []byte) (any, error) {
	scope, id := store.ScopeTenant, strings.TrimPrefix(path, "/admin/v1/tenants/")
	if rest, ok := strings.CutPrefix(path, "/admin/v1/keys/"); ok {
		scope, id = store.ScopeKey, strings.TrimSuffix(rest, "/limits")
	}
	id, _ = url.PathUnescape(id)
	if scope == store.ScopeKey {
		keys, err := a.st.ListAPIKeys(ctx, "")
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(keys, func(k store.APIKey) bool { return k.ID == id }) {
			return nil, fmt.Errorf("tenants: no key has the ID %q (keys list shows them)", id)
		}
	}
	var in struct {
		limits.Override
		Reset bool `json:"reset"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("tenants: --set: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("tenants: --set: unexpected data after the JSON value")
	}
	if field, why := in.Override.Check(); field != "" {
		return nil, fmt.Errorf("tenants: --set: %s %s", field, why)
	}
	cur := limits.Override{}
	if !in.Reset {
		ovs, err := a.st.ListLimitOverrides(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range ovs {
			if o.Scope == scope && o.SubjectID == id {
				cur, _ = limits.ParseOverride(o.Settings)
			}
		}
	}
	next := cur.Merge(in.Override)
	if next == (limits.Override{}) {
		if err := a.st.DeleteLimitOverride(ctx, scope, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	} else {
		b, _ := json.Marshal(next)
		if err := a.st.PutLimitOverride(ctx, &store.LimitOverride{Scope: scope, SubjectID: id, Settings: b, UpdatedAt: time.Now()}); err != nil {
			return nil, err
		}
	}
	return map[string]any{"id": id, "scope": scope, "override": next}, nil
}

func parseDay(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, fmt.Errorf("tenants: want YYYY-MM-DD or an RFC 3339 time, got %q", v)
	}
	return t, nil
}
