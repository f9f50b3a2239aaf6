package yardstick

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedirectNotFollowed: a target that redirects elsewhere is counted as
// http_3xx, and the place it points at receives nothing (neither the
// request nor the key).
func TestRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	other := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	redirecting := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, other+"/v1/chat/completions", http.StatusTemporaryRedirect)
	}))
	tg := &Target{Name: "r", URL: redirecting + "/v1/chat/completions"}
	tg.SetAPIKey("sk-redirect-key")
	rep, err := Run(t.Context(), Options{Targets: []*Target{tg}, Concurrency: []int{1}, Requests: 2, Rounds: 1,
		MaxTime: time.Minute, RequestTimeout: 5 * time.Second, Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cellOf(t, rep, "r", 1); c.OK != 0 || c.Errors["http_3xx"] != 2 {
		t.Errorf("redirecting target: ok %d, errors %v; want 2 http_3xx", c.OK, c.Errors)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's destination received %d requests", n)
	}
}
