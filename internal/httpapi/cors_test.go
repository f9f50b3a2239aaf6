package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
)

func corsServer(t *testing.T, c CORS) *httptest.Server {
	t.Helper()
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(2, time.Millisecond)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(10), Auth: keyAuth{local: true}, CORS: c}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCORS: preflights and requests from pages on other origins, on a
// real socket, against several policies: what is allowed gets exactly
// the Access-Control-* headers the browser needs, what is not gets none
// and a 403.
func TestCORS(t *testing.T) {
	const app = "https://app.example"
	custom := CORS{AllowedOrigins: []string{app}, AllowedMethods: []string{"GET", "POST", "PUT"},
		AllowedHeaders: []string{"Authorization", "Content-Type", "X-Custom"}, ExposedHeaders: []string{"X-Request-Id", "Retry-After"},
		MaxAge: time.Hour, AllowCredentials: true}
	for _, tc := range []struct {
		name    string
		cors    CORS
		method  string
		path    string
		headers map[string]string
		body    string
		status  int
		want    map[string]string // Access-Control-* headers, exactly
		vary    string
	}{
		{name: "nothing configured: preflight refused", method: "OPTIONS", path: "/v1/chat/completions",
			headers: map[string]string{"Origin": app, "Access-Control-Request-Method": "POST"}, status: 403, want: map[string]string{}},
		{name: "preflight with defaults", cors: CORS{AllowedOrigins: []string{app}}, method: "OPTIONS", path: "/v1/chat/completions",
			headers: map[string]string{"Origin": app, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type,idempotency-key"},
			status:  204, vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
			want: map[string]string{"Access-Control-Allow-Origin": app, "Access-Control-Allow-Methods": "GET, POST, PATCH, DELETE",
				"Access-Control-Allow-Headers": "authorization,content-type,idempotency-key", "Access-Control-Max-Age": "600"}},
		{name: "preflight with a configured policy", cors: custom, method: "OPTIONS", path: "/v1/chat",
			headers: map[string]string{"Origin": app, "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "x-custom"},
			status:  204, vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
			want: map[string]string{"Access-Control-Allow-Origin": app, "Access-Control-Allow-Methods": "GET, POST, PUT",
				"Access-Control-Allow-Headers": "x-custom", "Access-Control-Max-Age": "3600", "Access-Control-Allow-Credentials": "true"}},
		{name: "preflight of a method not allowed", cors: custom, method: "OPTIONS", path: "/v1/conversations/c1",
			headers: map[string]string{"Origin": app, "Access-Control-Request-Method": "DELETE"}, status: 403, want: map[string]string{}},
		{name: "preflight of a header not allowed", cors: CORS{AllowedOrigins: []string{app}}, method: "OPTIONS", path: "/v1/chat",
			headers: map[string]string{"Origin": app, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-secret"},
			status:  403, want: map[string]string{}},
		{name: "any header", cors: CORS{AllowedOrigins: []string{"*"}, AllowedHeaders: []string{"*"}}, method: "OPTIONS", path: "/v1/chat",
			headers: map[string]string{"Origin": "http://127.0.0.1:5173", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-anything"},
			status:  204, vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
			want: map[string]string{"Access-Control-Allow-Origin": "http://127.0.0.1:5173", "Access-Control-Allow-Methods": "GET, POST, PATCH, DELETE",
				"Access-Control-Allow-Headers": "x-anything", "Access-Control-Max-Age": "600"}},
		{name: "preflight from another origin", cors: custom, method: "OPTIONS", path: "/v1/chat",
			headers: map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, status: 403, want: map[string]string{}},
		{name: "request from an allowed origin", cors: CORS{AllowedOrigins: []string{app}}, method: "GET", path: "/v1/models",
			headers: map[string]string{"Origin": app, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, status: 200, vary: "Origin",
			want: map[string]string{"Access-Control-Allow-Origin": app, "Access-Control-Expose-Headers": strings.Join(DefaultCORSExposedHeaders, ", ")}},
		{name: "request with credentials", cors: custom, method: "POST", path: "/v1/chat/completions",
			headers: map[string]string{"Origin": app, "Content-Type": "application/json"}, body: completion, status: 200, vary: "Origin",
			want: map[string]string{"Access-Control-Allow-Origin": app, "Access-Control-Allow-Credentials": "true", "Access-Control-Expose-Headers": "X-Request-Id, Retry-After"}},
		{name: "request from another origin", cors: custom, method: "GET", path: "/v1/models",
			headers: map[string]string{"Origin": "https://evil.example"}, status: 403, want: map[string]string{}},
		{name: "same-origin request: no CORS headers", cors: custom, method: "GET", path: "/v1/models",
			headers: map[string]string{"Sec-Fetch-Site": "same-origin"}, status: 200, want: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := corsServer(t, tc.cors)
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			got := map[string]string{}
			for k, v := range resp.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					got[k] = strings.Join(v, ", ")
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Access-Control-* headers (-want +got):\n%s", diff)
			}
			if tc.vary != "" {
				if v := strings.Join(resp.Header.Values("Vary"), ", "); v != tc.vary {
					t.Errorf("Vary: %q, want %q", v, tc.vary)
				}
			}
			if tc.status == 403 && !strings.Contains(string(body), `"permission_error"`) {
				t.Errorf("refusal body %s, want an OpenAI permission_error", body)
			}
		})
	}
}

// TestCORSSDKHeaders: with the default allowed headers, the preflights of
// the official OpenAI JS SDK and Anthropic TS SDK in a browser (their
// Access-Control-Request-Headers as sent) pass; a header matching no name
// or prefix does not, and a prefix pattern needs more than the prefix.
func TestCORSSDKHeaders(t *testing.T) {
	const app = "https://app.example"
	srv := corsServer(t, CORS{AllowedOrigins: []string{app}})
	for _, tc := range []struct {
		name, path, headers string
		status              int
	}{
		{"openai js", "/v1/chat/completions", "authorization,content-type,openai-organization,openai-project,x-stainless-arch,x-stainless-lang," +
			"x-stainless-os,x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout", 204},
		{"anthropic ts", "/v1/messages", "anthropic-dangerous-direct-browser-access,anthropic-version,anthropic-beta,content-type,x-api-key," +
			"x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime," +
			"x-stainless-runtime-version,x-stainless-timeout", 204},
		{"firstword's own", "/v1/chat", "Content-Type, Idempotency-Key, Last-Event-ID, X-Firstword-Timeout, Cache-Control, X-Request-Timeout", 204},
		{"unknown header", "/v1/chat/completions", "content-type,x-secret", 403},
		{"the bare prefix", "/v1/chat/completions", "x-stainless-", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("OPTIONS", srv.URL+tc.path, nil)
			req.Header.Set("Origin", app)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", tc.headers)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("preflight: %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 204 && (resp.Header.Get("Access-Control-Allow-Headers") != tc.headers || resp.Header.Get("Access-Control-Allow-Origin") != app) {
				t.Errorf("preflight headers: %v", resp.Header)
			}
		})
	}
}
