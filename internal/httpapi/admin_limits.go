package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/store"
)

// LimitsAdmin is what the admin API needs of admission.
type LimitsAdmin interface {
	limits.Policies
	// Reload applies the store's overrides on this replica now.
	Reload(ctx context.Context)
}

// limitsRoutes are the admin API's limits, budgets and usage: each
// handler decodes the request, calls internal/limits' admin operation and
// encodes its answer.
func (s *Server) limitsRoutes() {
	s.mux.Handle("GET /admin/v1/tenants", s.admin(route(s.listTenants)))
	s.mux.Handle("GET /admin/v1/tenants/{id}", s.admin(route(s.getTenant)))
	s.mux.Handle("PUT /admin/v1/tenants/{id}", s.admin(route(s.putTenant)))
	s.mux.Handle("PUT /admin/v1/keys/{id}/limits", s.admin(route(s.putKeyLimits)))
	s.mux.Handle("GET /admin/v1/usage", s.admin(route(s.adminUsage)))
}

var errNoLimits = &chat.Error{Category: chat.CategoryNotFound, Message: "limits are not served by this gateway (no store)"}

func (s *Server) limitsReady() error {
	if s.opt.Limits == nil || s.opt.Store == nil {
		return errNoLimits
	}
	return nil
}

// limitsError answers an admin operation's error: a store failure is
// logged and unavailable, a refused change or an unknown key the client's.
func (s *Server) limitsError(err error, id string) error {
	var se *limits.StoreError
	var ce *limits.ChangeError
	switch {
	case errors.As(err, &se):
		s.log.Error(se.Op, "err", se.Err)
		return errConversationStore
	case errors.As(err, &ce) && ce.Field == "":
		return invalid("", "request body: "+ce.Error())
	case errors.As(err, &ce):
		return invalid(ce.Field, ce.Error())
	case errors.Is(err, limits.ErrUnknownKey):
		return &chat.Error{Category: chat.CategoryNotFound, Param: "id", Message: "no key has the ID " + quoteValue(id)}
	}
	return err
}

// listTenants serves GET /admin/v1/tenants: every tenant with a policy
// (in the config or set here) or spend this month.
func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) error {
	if err := s.limitsReady(); err != nil {
		return err
	}
	out, err := limits.TenantViews(r.Context(), s.opt.Store, s.opt.Limits)
	if err != nil {
		return s.limitsError(err, "")
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
	return nil
}

// getTenant serves GET /admin/v1/tenants/{id}.
func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) error {
	if err := s.limitsReady(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := checkName("id", id); err != nil {
		return err
	}
	v, err := limits.ViewOf(r.Context(), s.opt.Store, s.opt.Limits, store.ScopeTenant, id)
	if err != nil {
		return s.limitsError(err, id)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// putTenant serves PUT /admin/v1/tenants/{id}: the fields sent replace
// the tenant's (over the config's), the others stay.
func (s *Server) putTenant(w http.ResponseWriter, r *http.Request) error {
	return s.putOverride(w, r, store.ScopeTenant)
}

// putKeyLimits serves PUT /admin/v1/keys/{id}/limits, as putTenant for a
// key.
func (s *Server) putKeyLimits(w http.ResponseWriter, r *http.Request) error {
	return s.putOverride(w, r, store.ScopeKey)
}

func (s *Server) putOverride(w http.ResponseWriter, r *http.Request, scope string) error {
	if err := s.limitsReady(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if id == "" {
		return invalid("id", "the ID must not be empty")
	}
	if err := checkName("id", id); err != nil {
		return err
	}
	ctx := r.Context()
	// An unknown key is a 404 before its body is read.
	if err := limits.CheckSubject(ctx, s.opt.Store, scope, id); err != nil {
		return s.limitsError(err, id)
	}
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if _, err := limits.SetOverride(ctx, s.opt.Store, scope, id, raw); err != nil {
		return s.limitsError(err, id)
	}
	s.opt.Limits.Reload(ctx)
	v, err := limits.ViewOf(ctx, s.opt.Store, s.opt.Limits, scope, id)
	if err != nil {
		return s.limitsError(err, id)
	}
	writeJSON(w, http.StatusOK, v)
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
	if f.From, err = limits.ParseWhen(q.Get("from")); err != nil {
		return invalid("from", "from: want an RFC 3339 time or YYYY-MM-DD")
	}
	if f.To, err = limits.ParseWhen(q.Get("to")); err != nil {
		return invalid("to", "to: want an RFC 3339 time or YYYY-MM-DD")
	}
	rows, err := limits.Usage(r.Context(), s.opt.Store, f)
	if err != nil {
		return s.limitsError(err, "")
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": rows})
	return nil
}
