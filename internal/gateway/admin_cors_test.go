package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestAdminRefusesOtherOrigins: in local mode (no key stands in the way)
// with CORS open to every origin, a page on another site can neither
// preflight nor POST the admin key API, nor read /metrics; the API routes
// still get their CORS answers, and curl (no Origin) still creates keys.
func TestAdminRefusesOtherOrigins(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, adminKeysConfig+"cors: {allowed_origins: [\"*\"]}\n"))
	do := func(method, path, body string, header map[string]string) (*http.Response, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, gw.URL+path, rd)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	corsHeaders := func(h http.Header) []string {
		var got []string
		for k := range h {
			if strings.HasPrefix(k, "Access-Control-") {
				got = append(got, k)
			}
		}
		return got
	}
	preflight := map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "content-type", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}
	for _, path := range []string{"/admin/v1/keys", "/admin/health", "/metrics"} {
		resp, body := do("OPTIONS", path, "", preflight)
		if resp.StatusCode != http.StatusForbidden || len(corsHeaders(resp.Header)) != 0 || !strings.Contains(body, `"cross_origin_refused"`) {
			t.Errorf("preflight of %s from another site: %d %v %s; want 403 without Access-Control-* headers", path, resp.StatusCode, corsHeaders(resp.Header), body)
		}
	}
	if resp, _ := do("OPTIONS", "/v1/chat/completions", "", preflight); resp.StatusCode != http.StatusNoContent ||
		resp.Header.Get("Access-Control-Allow-Origin") != "https://evil.example" {
		t.Errorf("preflight of the API from an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}

	post := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors",
		"Content-Type": "application/json"}
	resp, body := do("POST", "/admin/v1/keys", `{"tenant":"ops","admin":true}`, post)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(body, `"key"`) || len(corsHeaders(resp.Header)) != 0 {
		t.Fatalf("cross-site POST /admin/v1/keys: %d %v %s; want 403 and no secret", resp.StatusCode, corsHeaders(resp.Header), body)
	}
	// Fetch Metadata alone (a browser that sends no Origin) is refused too.
	resp, body = do("POST", "/admin/v1/keys", `{"tenant":"ops","admin":true}`,
		map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Content-Type": "application/json"})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST without Origin: %d %s; want 403", resp.StatusCode, body)
	}
	// The gateway's own page, and curl, may.
	self := map[string]string{"Origin": gw.URL, "Content-Type": "application/json"}
	if resp, body := do("GET", "/admin/v1/keys", "", self); resp.StatusCode != http.StatusOK {
		t.Errorf("same-origin GET /admin/v1/keys: %d %s", resp.StatusCode, body)
	}
	if resp, body := do("POST", "/admin/v1/keys", `{"tenant":"ops","admin":true}`, map[string]string{"Content-Type": "application/json"}); resp.StatusCode != http.StatusCreated {
		t.Errorf("POST /admin/v1/keys without Origin: %d %s", resp.StatusCode, body)
	}
}
