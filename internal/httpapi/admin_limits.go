package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/store"
)

// LimitsAdmin is what the admin API needs of admission.
type LimitsAdmin interface {
	// Policies is what applies to a tenant or key (kind "tenant" or
	// "key"): the config's, the override, and the two combined.
	Policies(kind, id string) (config limits.Policy, override limits.Override, effective limits.Policy)
	// Tenants lists the tenants the config gives a policy.
	Tenants() []string
	// Reload applies the store's overrides on this replica now.
	Reload(ctx context.Context)
}

// limitsRoutes are the admin API's limits, budgets and usage.
func (s *Server) limitsRoutes() {
	s.mux.Handle("GET /admin/v1/tenants", s.admin(route(s.listTenants)))
	s.mux.Handle("GET /admin/v1/tenants/{id}", s.admin(route(s.getTenant)))
	s.mux.Handle("PUT /admin/v1/tenants/{id}", s.admin(route(s.putTenant)))
	s.mux.Handle("PUT /admin/v1/keys/{id}/limits", s.admin(route(s.putKeyLimits)))
	s.mux.Handle("GET /admin/v1/usage", s.admin(route(s.adminUsage)))
}

// subjectView is a tenant's or key's limits, budget and spend so far, as
// the admin API shows them.
type subjectView struct {
	ID        string          `json:"id"`
	Config    limits.Policy   `json:"config"`
	Override  limits.Override `json:"override"`
	Effective limits.Policy   `json:"effective"`
	Spend     spendView       `json:"spend"`
	// Budget is each cap's state: ok, soft (past the soft threshold) or
	// exhausted; absent caps are left out.
	Budget map[string]string `json:"budget_state"`
}

// spendView is the spend of the current UTC day and month, summed from
// the usage rows (the attempts that did not give the answers included).
type spendView struct {
	Day         string  `json:"day"`
	Month       string  `json:"month"`
	USDDay      float64 `json:"usd_day"`
	USDMonth    float64 `json:"usd_month"`
	TokensDay   int64   `json:"tokens_day"`
	TokensMonth int64   `json:"tokens_month"`
}

var errNoLimits = &chat.Error{Category: chat.CategoryNotFound, Message: "limits are not served by this gateway (no store)"}

func (s *Server) limitsReady() error {
	if s.opt.Limits == nil || s.opt.Store == nil {
		return errNoLimits
	}
	return nil
}

// spendSums reads this month's spend, by tenant and key and day.
func (s *Server) spendSums(ctx context.Context, now time.Time) ([]store.SpendSum, error) {
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	sums, err := s.opt.Store.UsageSpend(ctx, month)
	if err != nil {
		s.log.Error("reading spend", "err", err)
		return nil, errConversationStore
	}
	return sums, nil
}

func (s *Server) view(kind, id string, sums []store.SpendSum, now time.Time) subjectView {
	cfg, ov, eff := s.opt.Limits.Policies(kind, id)
	v := subjectView{ID: id, Config: cfg, Override: ov, Effective: eff, Budget: map[string]string{}}
	v.Spend.Day, v.Spend.Month = now.Format("2006-01-02"), now.Format("2006-01")
	for _, r := range sums {
		if (kind == store.ScopeTenant && r.TenantID != id) || (kind == store.ScopeKey && r.KeyID != id) || !strings.HasPrefix(r.Day, v.Spend.Month) {
			continue
		}
		v.Spend.USDMonth += r.Cost
		v.Spend.TokensMonth += r.Tokens
		if r.Day == v.Spend.Day {
			v.Spend.USDDay += r.Cost
			v.Spend.TokensDay += r.Tokens
		}
	}
	soft := eff.Budget.SoftThreshold
	if soft == 0 {
		soft = limits.DefaultSoftThreshold
	}
	state := func(name string, used, limit float64) {
		switch {
		case limit <= 0:
		case used >= limit:
			v.Budget[name] = "exhausted"
		case used >= limit*soft:
			v.Budget[name] = "soft"
		default:
			v.Budget[name] = "ok"
		}
	}
	state("usd_per_day", v.Spend.USDDay, eff.Budget.USDPerDay)
	state("usd_per_month", v.Spend.USDMonth, eff.Budget.USDPerMonth)
	state("tokens_per_day", float64(v.Spend.TokensDay), float64(eff.Budget.TokensPerDay))
	state("tokens_per_month", float64(v.Spend.TokensMonth), float64(eff.Budget.TokensPerMonth))
	return v
}

// listTenants serves GET /admin/v1/tenants: every tenant with a policy
// (in the config or set here) or spend this month.
func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) error {
	if err := s.limitsReady(); err != nil {
		return err
	}
	now := time.Now().UTC()
	sums, err := s.spendSums(r.Context(), now)
	if err != nil {
		return err
	}
	ovs, err := s.opt.Store.ListLimitOverrides(r.Context())
	if err != nil {
		s.log.Error("reading limit overrides", "err", err)
		return errConversationStore
	}
	ids := s.opt.Limits.Tenants()
	for _, o := range ovs {
		if o.Scope == store.ScopeTenant {
			ids = append(ids, o.SubjectID)
		}
	}
	for _, r := range sums {
		ids = append(ids, r.TenantID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]subjectView, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.view(store.ScopeTenant, id, sums, now))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
	return nil
}

// getTenant serves GET /admin/v1/tenants/{id}.
func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) error {
	if err := s.limitsReady(); err != nil {
		return err
	}
	if err := checkName("id", r.PathValue("id")); err != nil {
		return err
	}
	now := time.Now().UTC()
	sums, err := s.spendSums(r.Context(), now)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view(store.ScopeTenant, r.PathValue("id"), sums, now))
	return nil
}

// putTenant serves PUT /admin/v1/tenants/{id}: the fields sent replace
// the tenant's (over the config's), the others stay.
func (s *Server) putTenant(w http.ResponseWriter, r *http.Request) error {
	return s.putOverride(w, r, store.ScopeTenant, r.PathValue("id"))
}

// putKeyLimits serves PUT /admin/v1/keys/{id}/limits, as putTenant for a
// key.
func (s *Server) putKeyLimits(w http.ResponseWriter, r *http.Request) error {
	if err := s.limitsReady(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := checkName("id", id); err != nil {
		return err
	}
	keys, err := s.opt.Store.ListAPIKeys(r.Context(), "")
	if err != nil {
		s.log.Error("listing keys", "err", err)
		return errConversationStore
	}
	if !slices.ContainsFunc(keys, func(k store.APIKey) bool { return k.ID == id }) {
		return &chat.Error{Category: chat.CategoryNotFound, Param: "id", Message: "no key has the ID " + quoteValue(id)}
	}
	return s.putOverride(w, r, store.ScopeKey, id)
}

func (s *Server) putOverride(w http.ResponseWriter, r *http.Request, scope, id string) error {
	if err := s.limitsReady(); err != nil {
		return err
	}
	if id == "" {
		return invalid("id", "the ID must not be empty")
	}
	if err := checkName("id", id); err != nil {
		return err
	}
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var body struct {
		limits.Override
		// Reset drops every override first: the config's policy applies.
		Reset bool `json:"reset"`
	}
	if err := decodeStrict(raw, &body); err != nil {
		return invalid("", "request body: "+err.Error())
	}
	if field, why := body.Override.Check(); field != "" {
		return invalid(field, field+" "+why)
	}
	ctx := r.Context()
	cur := limits.Override{}
	if !body.Reset {
		ovs, err := s.opt.Store.ListLimitOverrides(ctx)
		if err != nil {
			s.log.Error("reading limit overrides", "err", err)
			return errConversationStore
		}
		for _, o := range ovs {
			if o.Scope == scope && o.SubjectID == id {
				if cur, err = limits.ParseOverride(o.Settings); err != nil {
					cur = limits.Override{}
				}
			}
		}
	}
	next := cur.Merge(body.Override)
	settings, _ := json.Marshal(next)
	if next == (limits.Override{}) {
		if err := s.opt.Store.DeleteLimitOverride(ctx, scope, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			s.log.Error("deleting a limit override", "err", err)
			return errConversationStore
		}
	} else if err := s.opt.Store.PutLimitOverride(ctx, &store.LimitOverride{Scope: scope, SubjectID: id, Settings: settings, UpdatedAt: time.Now()}); err != nil {
		s.log.Error("writing a limit override", "err", err)
		return errConversationStore
	}
	s.opt.Limits.Reload(ctx)
	now := time.Now().UTC()
	sums, err := s.spendSums(ctx, now)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.view(scope, id, sums, now))
	return nil
}

// adminUsage serves GET /admin/v1/usage?tenant=&key=&model=&from=&to=:
// usage by tenant, key, model and UTC day. from and to are RFC 3339 times
// or YYYY-MM-DD days (UTC); to is exclusive.
func (s *Server) adminUsage(w http.ResponseWriter, r *http.Request) error {
	if err := s.limitsReady(); err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.UsageFilter{TenantID: q.Get("tenant"), KeyID: q.Get("key"), Model: q.Get("model")}
	for _, p := range []struct{ name, v string }{{"tenant", f.TenantID}, {"key", f.KeyID}} {
		if err := checkName(p.name, p.v); err != nil {
			return err
		}
	}
	if !utf8.ValidString(f.Model) || strings.ContainsFunc(f.Model, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return invalid("model", "model must hold printable characters only")
	}
	var err error
	if f.From, err = parseWhen(q.Get("from")); err != nil {
		return invalid("from", "from: want an RFC 3339 time or YYYY-MM-DD")
	}
	if f.To, err = parseWhen(q.Get("to")); err != nil {
		return invalid("to", "to: want an RFC 3339 time or YYYY-MM-DD")
	}
	rows, err := s.opt.Store.UsageReport(r.Context(), f)
	if err != nil {
		s.log.Error("reading usage", "err", err)
		return errConversationStore
	}
	if rows == nil {
		rows = []store.UsageRow{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": rows})
	return nil
}

// parseWhen parses an RFC 3339 time or a YYYY-MM-DD day ("" is zero).
func parseWhen(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, v)
}
