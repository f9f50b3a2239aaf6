package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
)

// keyAuth is an Authenticator: local mode, or keys by their literal value.
type keyAuth struct {
	local bool
	keys  map[string]auth.Principal
}

func (a keyAuth) Local(context.Context) (bool, error) { return a.local, nil }

func (a keyAuth) Authenticate(_ context.Context, authorization, apiKey string) (auth.Principal, error) {
	if a.local {
		return auth.Principal{TenantID: auth.LocalTenant, UserID: auth.LocalUser, Local: true}, nil
	}
	if p, ok := a.keys[strings.TrimPrefix(authorization, "Bearer ")]; ok {
		return p, nil
	}
	return auth.Principal{}, auth.ErrUnauthorized
}

func admissionServer(t *testing.T, a keyAuth, cors ...string) (*Server, *httptest.Server) {
	t.Helper()
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(2, time.Millisecond)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	api := New(Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(10), Auth: a, CORS: CORS{AllowedOrigins: cors},
		AllowedHosts: []string{"gateway.internal"}, MaxMessages: 3, MaxPromptBytes: 2048,
		Budget: func(tenant, user, surface string, recent int) any {
			return map[string]string{"tenant": tenant, "user": user}
		}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv
}

const completion = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// TestBrowserAdmission: what a web page on another site can make a
// browser send is refused before any handler runs, in local mode above
// all; what the chat page, SDKs and curl send goes through.
func TestBrowserAdmission(t *testing.T) {
	local := keyAuth{local: true}
	keyed := keyAuth{keys: map[string]auth.Principal{"k": {TenantID: "acme", UserID: "u"}}}
	for _, tc := range []struct {
		name    string
		auth    keyAuth
		cors    []string
		method  string
		path    string
		host    string
		headers map[string]string
		body    string
		want    int
		code    string
	}{
		{name: "sdk request", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json"}, body: completion, want: 200},
		{name: "json with charset", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}, body: completion, want: 200},
		{name: "text/plain body (no preflight)", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "text/plain"}, body: completion, want: 415, code: "unsupported_media_type"},
		{name: "form body", auth: local, method: "POST", path: "/v1/messages", headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: completion, want: 415},
		{name: "no content type", auth: local, method: "POST", path: "/v1/responses", body: completion, want: 415},
		{name: "foreign origin", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, body: completion, want: 403, code: "cross_origin_refused"},
		{name: "foreign origin reads", auth: local, method: "GET", path: "/v1/models", headers: map[string]string{"Origin": "https://evil.example"}, want: 403},
		{name: "null origin", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json", "Origin": "null"}, body: completion, want: 403},
		{name: "cross-site fetch without origin", auth: local, method: "GET", path: "/v1/models", headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, want: 403},
		{name: "cross-site navigation to the page", auth: local, method: "GET", path: "/healthz", headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, want: 200},
		{name: "cross-site frame", auth: local, method: "GET", path: "/v1/models", headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, want: 403},
		{name: "another port's image", auth: local, method: "GET", path: "/admin/runtime", headers: map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, want: 403},
		{name: "same origin (the chat page)", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json", "Origin": "http://{{HOST}}", "Sec-Fetch-Site": "same-origin"}, body: completion, want: 200},
		{name: "same origin behind a proxy rewriting Host", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json", "Origin": "https://chat.example.com", "Sec-Fetch-Site": "same-origin"}, body: completion, want: 200},
		{name: "allowed origin written with a slash and capitals", auth: local, cors: []string{"HTTPS://App.Example:443/"}, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json", "Origin": "https://app.example"}, body: completion, want: 200},
		{name: "cross-site navigation to the API", auth: local, method: "GET", path: "/admin/debug/pprof/profile?seconds=30", headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, want: 403},
		{name: "allowed origin", auth: local, cors: []string{"https://app.example"}, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json", "Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}, body: completion, want: 200},
		{name: "rebinding host name", auth: local, method: "GET", path: "/v1/models", host: "attacker.example:8080", want: 403, code: "host_refused"},
		{name: "the icon", auth: local, method: "GET", path: "/favicon.ico", want: 200},
		{name: "localhost", auth: local, method: "GET", path: "/v1/models", host: "localhost:8080", want: 200},
		{name: "ipv6 loopback", auth: local, method: "GET", path: "/v1/models", host: "[::1]:8080", want: 200},
		{name: "configured host", auth: local, method: "GET", path: "/v1/models", host: "Gateway.Internal", want: 200},
		{name: "any host once keys exist", auth: keyed, method: "GET", path: "/v1/models", host: "api.example.com", want: 200},
		{name: "foreign origin with a key", auth: keyed, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example", "Authorization": "Bearer k"}, body: completion, want: 403},
		{name: "too many messages", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json"},
			body: `{"model":"m","messages":[{"role":"user","content":"1"},{"role":"user","content":"2"},{"role":"user","content":"3"},{"role":"user","content":"4"}]}`, want: 413, code: "too_many_messages"},
		{name: "prompt too large", auth: local, method: "POST", path: "/v1/messages", headers: map[string]string{"Content-Type": "application/json"},
			body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 3000) + `"}]}`, want: 413},
		{name: "model name echoed short", auth: local, method: "POST", path: "/v1/chat/completions", headers: map[string]string{"Content-Type": "application/json"},
			body: `{"model":"` + strings.Repeat("m", 100000) + `","messages":[{"role":"user","content":"hi"}]}`, want: 404, code: "model_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := admissionServer(t, tc.auth, tc.cors...)
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			host := strings.TrimPrefix(srv.URL, "http://")
			for k, v := range tc.headers {
				req.Header.Set(k, strings.ReplaceAll(v, "{{HOST}}", host))
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, resp.StatusCode, b, tc.want)
			}
			if len(b) > 2048 {
				t.Errorf("the answer is %d bytes: a client's value was echoed whole", len(b))
			}
			if tc.code != "" && !strings.Contains(string(b), `"`+tc.code+`"`) {
				t.Errorf("body %s, want code %s", b, tc.code)
			}
		})
	}
}

// TestPreflight: an allowed origin's preflight is answered with what the
// browser needs; another origin's is refused.
func TestPreflight(t *testing.T) {
	_, srv := admissionServer(t, keyAuth{local: true}, "https://app.example")
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"https://app.example", http.StatusNoContent},
		{"https://evil.example", http.StatusForbidden},
	} {
		req, _ := http.NewRequest("OPTIONS", srv.URL+"/v1/chat/completions", nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("preflight from %s: %d, want %d", tc.origin, resp.StatusCode, tc.want)
			continue
		}
		if tc.want == http.StatusNoContent {
			h := resp.Header
			if h.Get("Access-Control-Allow-Origin") != tc.origin || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
				h.Get("Access-Control-Allow-Headers") != "authorization, content-type" || h.Get("Access-Control-Allow-Credentials") != "" {
				t.Errorf("preflight headers: %v", h)
			}
		}
	}
}

// TestReadyzDrains: /readyz is ready until Drain, then 503, while the
// rest of the API keeps answering.
func TestReadyzDrains(t *testing.T) {
	api, srv := admissionServer(t, keyAuth{local: true})
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/readyz"); got != 200 {
		t.Fatalf("/readyz before draining: %d", got)
	}
	api.Drain()
	if got := get("/readyz"); got != 503 {
		t.Errorf("/readyz while draining: %d, want 503", got)
	}
	if got := get("/v1/models"); got != 200 {
		t.Errorf("/v1/models while draining: %d, want 200", got)
	}
}

// TestAdminRoutes: the operators' routes need an admin key; the budget
// view shows a tenant its own traffic and an admin everyone's.
func TestAdminRoutes(t *testing.T) {
	a := keyAuth{keys: map[string]auth.Principal{
		"user":  {TenantID: "acme", UserID: "u"},
		"admin": {TenantID: "ops", UserID: "o", Admin: true},
	}}
	_, srv := admissionServer(t, a)
	do := func(method, path, key string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/admin/health", "/admin/runtime", "/admin/debug/pprof/heap?debug=1"} {
		if code, _ := do("GET", path, "user"); code != http.StatusForbidden {
			t.Errorf("GET %s with a tenant's key: %d, want 403", path, code)
		}
		if code, _ := do("GET", path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a key: %d, want 401", path, code)
		}
		if code, _ := do("GET", path, "admin"); code != http.StatusOK {
			t.Errorf("GET %s with an admin key: %d, want 200", path, code)
		}
	}
	if code, _ := do("GET", "/admin/runtime?gc=1", "admin"); code != http.StatusOK {
		t.Errorf("GET /admin/runtime?gc=1: %d", code)
	}
	if code, _ := do("GET", "/admin/gc", "admin"); code == http.StatusOK {
		t.Errorf("GET /admin/gc ran a collection: a GET must change nothing")
	}
	if code, _ := do("POST", "/admin/gc", "admin"); code != http.StatusOK {
		t.Errorf("POST /admin/gc with an admin key: %d", code)
	}
	scope := func(key, query string) string {
		code, b := do("GET", "/v1/budget"+query, key)
		if code != 200 {
			t.Fatalf("budget with %s: %d %s", key, code, b)
		}
		var v map[string]string
		json.Unmarshal([]byte(b), &v)
		return v["tenant"]
	}
	if got := scope("user", "?tenant=ops"); got != "acme" {
		t.Errorf("a tenant's budget view is scoped to %q, want acme", got)
	}
	if got := scope("admin", ""); got != "" {
		t.Errorf("an admin's budget view is scoped to %q, want every tenant", got)
	}
	if got := scope("admin", "?tenant=acme"); got != "acme" {
		t.Errorf("an admin's ?tenant=acme view is scoped to %q", got)
	}
}
