// Package providertest holds the checks every HTTP provider adapter runs
// against a fake upstream on a real socket, and Func, the fake provider
// of the tests of the layers above the adapters.
package providertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
)

// SecretCase is an upstream answer that quotes a secret the adapter was
// configured with.
type SecretCase struct {
	Name string
	// Status, ContentType and Body are the upstream's answer; a 200 is an
	// answer that fails mid-stream.
	Status      int
	ContentType string
	Body        string
	// Category and Message are the error wanted: for an auth failure the
	// generic message, otherwise the upstream's with "[redacted]" for
	// each secret.
	Category chat.Category
	Message  string
}

// NewFunc returns the adapter under test, for an upstream at baseURL
// reached through client, configured with the secrets passed to Secrets.
type NewFunc func(baseURL string, client *http.Client) provider.Provider

// fake returns the adapter newProvider makes for an upstream on a real
// socket, closed when t ends, that answers each request with answer once
// it has read the request's body.
func fake(t *testing.T, newProvider NewFunc, answer func(w http.ResponseWriter)) provider.Provider {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		answer(w)
	}))
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return newProvider(srv.URL, &http.Client{Transport: tr})
}

// Secrets runs each case against the adapter newProvider returns: the
// answer's error must have the case's category and message, and its
// Error() (what the client, the log and the stored message get) must hold
// no LeakLen bytes of any of secrets.
func Secrets(t *testing.T, secrets []string, newProvider NewFunc, cases []SecretCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			p := fake(t, newProvider, func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", c.ContentType)
				w.WriteHeader(c.Status)
				io.WriteString(w, c.Body)
			})
			req := &chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}
			_, err := chat.Collect(p.Stream(context.Background(), req))
			var ce *chat.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want a *chat.Error", err)
			}
			if ce.Category != c.Category || ce.Message != c.Message {
				t.Errorf("error = %s: %q, want %s: %q", ce.Category, ce.Message, c.Category, c.Message)
			}
			if leak := Leak(err.Error(), secrets...); leak != "" {
				t.Errorf("Error() = %q, quotes %q of a secret", err.Error(), leak)
			}
		})
	}
}

// LeakLen is how many consecutive bytes of a secret make a leak. It is
// the test's own, not the Scrubber's MinSecretLen: raising that must not
// weaken the check.
const LeakLen = 8

// Leak returns the first run of LeakLen bytes of one of secrets found in
// s, or "".
func Leak(s string, secrets ...string) string {
	for _, x := range secrets {
		for i := 0; i+LeakLen <= len(x); i++ {
			if w := x[i : i+LeakLen]; strings.Contains(s, w) {
				return w
			}
		}
	}
	return ""
}
