package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

// The admin key API (/admin/v1/keys): create, list, revoke and rotate API
// keys on a running gateway. A key's secret is shown once, when it is
// created; the store keeps its hash only. A change is seen at once by the
// replica that made it and within auth.cache_ttl by the others.

// keyForgetter drops an authenticator's cached answers of a key.
type keyForgetter interface{ Forget(prefix string) }

// createKeyRequest is the body of POST /admin/v1/keys.
type createKeyRequest struct {
	Tenant string `json:"tenant"`
	User   string `json:"user"`
	Name   string `json:"name"`
	Admin  bool   `json:"admin"`
}

func (k *createKeyRequest) validate() error {
	if k.Tenant == "" {
		return invalid("tenant", "tenant is required")
	}
	for _, f := range []struct{ name, v string }{{"tenant", k.Tenant}, {"user", k.User}, {"name", k.Name}} {
		if err := checkName(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// checkName refuses a tenant, user, name or ID with control characters,
// or too long, as a 400 naming param.
func checkName(param, v string) error {
	if why := auth.CheckName(v); why != "" {
		return invalid(param, param+" "+why)
	}
	return nil
}

// decodeStrict decodes one JSON value into v: no unknown field, and
// nothing after the value.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// createKey serves POST /admin/v1/keys: a new key, shown once. A user of
// "" makes the key its own user (its conversations are its own).
func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var body createKeyRequest
	if err := decodeStrict(raw, &body); err != nil {
		return invalid("", "request body: "+err.Error())
	}
	if err := body.validate(); err != nil {
		return err
	}
	k, secret, err := s.newKey(r, body)
	if err != nil {
		return err
	}
	out := auth.ShowKey(k)
	out.Key = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// newKey stores a new key of body's tenant, user and name.
func (s *Server) newKey(r *http.Request, body createKeyRequest) (*store.APIKey, string, error) {
	k := &store.APIKey{ID: store.NewID("key_"), TenantID: body.Tenant, UserID: body.User, Name: body.Name, Admin: body.Admin}
	secret, err := auth.CreateKey(r.Context(), s.opt.Store, k)
	if err != nil {
		return nil, "", s.adminStoreError(err)
	}
	// The first key ends local mode: at once here.
	s.forgetKey(k.Prefix)
	return k, secret, nil
}

// listKeys serves GET /admin/v1/keys[?tenant=ID], newest first.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	if err := checkName("tenant", r.URL.Query().Get("tenant")); err != nil {
		return err
	}
	keys, err := s.opt.Store.ListAPIKeys(r.Context(), r.URL.Query().Get("tenant"))
	if err != nil {
		return s.adminStoreError(err)
	}
	data := make([]auth.KeyView, 0, len(keys))
	for i := range keys {
		data = append(data, auth.ShowKey(&keys[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	return nil
}

// revokeKey serves POST /admin/v1/keys/{id}/revoke: the key stops working
// at once on this replica, within auth.cache_ttl on the others.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.keyByID(r)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if err := s.opt.Store.RevokeAPIKey(r.Context(), k.ID, now); err != nil {
		return s.adminStoreError(err)
	}
	s.forgetKey(k.Prefix)
	if k.RevokedAt == nil || k.RevokedAt.After(now) {
		k.RevokedAt = &now
	}
	writeJSON(w, http.StatusOK, auth.ShowKey(k))
	return nil
}

// maxRotationGrace bounds how long a rotated key may go on working.
const maxRotationGrace = 30 * 24 * time.Hour

// rotateKey serves POST /admin/v1/keys/{id}/rotate[?grace=DURATION]: a new
// key of the same tenant, user, name and kind, shown once; the old key is
// revoked at once, or when the grace (a Go duration, e.g. 10m) ends.
func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) error {
	var grace time.Duration
	if v := r.URL.Query().Get("grace"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxRotationGrace {
			return invalid("grace", "grace must be a duration between 0s and 720h, e.g. 10m")
		}
		grace = d
	}
	old, err := s.keyByID(r)
	if err != nil {
		return err
	}
	if old.RevokedAt != nil && !old.RevokedAt.After(time.Now()) {
		return &chat.Error{Category: chat.CategoryConflict, Code: "key_revoked", Param: "id",
			Message: "the key " + quoteValue(old.ID) + " is revoked: create a new one instead"}
	}
	k, secret, err := s.newKey(r, createKeyRequest{Tenant: old.TenantID, User: old.UserID, Name: old.Name, Admin: old.Admin})
	if err != nil {
		return err
	}
	if err := store.CopyKeyOverride(r.Context(), s.opt.Store, old.ID, k.ID); err != nil {
		return s.adminStoreError(err)
	}
	if s.opt.Limits != nil {
		s.opt.Limits.Reload(r.Context())
	}
	until := time.Now().UTC().Add(grace)
	if err := s.opt.Store.RevokeAPIKey(r.Context(), old.ID, until); err != nil {
		return s.adminStoreError(err)
	}
	s.forgetKey(old.Prefix)
	out := auth.ShowKey(k)
	out.Key = secret
	writeJSON(w, http.StatusCreated, map[string]any{"key": out, "revoked": old.ID, "revoked_at": until})
	return nil
}

// keyByID returns the key named by the path's {id}.
func (s *Server) keyByID(r *http.Request) (*store.APIKey, error) {
	id := r.PathValue("id")
	if err := checkName("id", id); err != nil {
		return nil, err
	}
	keys, err := s.opt.Store.ListAPIKeys(r.Context(), "")
	if err != nil {
		return nil, s.adminStoreError(err)
	}
	for i := range keys {
		if keys[i].ID == id {
			return &keys[i], nil
		}
	}
	return nil, &chat.Error{Category: chat.CategoryNotFound, Code: "key_not_found", Param: "id",
		Message: "no key has the id " + quoteValue(id)}
}

func (s *Server) forgetKey(prefix string) {
	if f, ok := s.opt.Auth.(keyForgetter); ok {
		f.Forget(prefix)
	}
}

func (s *Server) adminStoreError(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &chat.Error{Category: chat.CategoryNotFound, Code: "key_not_found", Message: "no such key"}
	}
	s.log.Error("admin key store", "err", err)
	return &chat.Error{Category: chat.CategoryStoreUnavailable, Message: "the key store is unavailable"}
}
