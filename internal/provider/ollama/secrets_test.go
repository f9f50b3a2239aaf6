package ollama

import (
	"net/http"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// TestSecretsScrubbed: a proxy in front of Ollama that quotes the
// configured Authorization header has it scrubbed from the error; an auth
// failure gets a generic message naming the provider.
func TestSecretsScrubbed(t *testing.T) {
	const token = "olm-9Fj3Kd7Qp2Xz6Wv1Rt"
	newProvider := func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "local", BaseURL: baseURL, Client: client, Headers: map[string]string{"Authorization": "Bearer " + token}}})
	}
	// A text body cut at 200 bytes inside the token: "olm-9Fj3K…".
	cut := "bad gateway: " + strings.Repeat("upstream ", 19) + "token: "
	line := `{"model":"m","created_at":"2024-01-01T00:00:00Z","message":{"role":"assistant","content":"Hel"},"done":false}` + "\n"
	providertest.Secrets(t, []string{token}, newProvider, []providertest.SecretCase{
		{
			Name: "401 from a proxy quoting the token", Status: 401, ContentType: "application/json",
			Body:     `{"error":"invalid bearer token ` + token + `"}`,
			Category: chat.CategoryAuth, Message: `provider "local" rejected the gateway's credentials (HTTP 401): check its headers`,
		},
		{
			Name: "500 quoting the header", Status: 500, ContentType: "application/json",
			Body:     `{"error":"proxy failure for Bearer ` + token + `"}`,
			Category: chat.CategoryUpstreamUnavailable, Message: "proxy failure for [redacted]",
		},
		{
			Name: "502 text cut inside the token", Status: 502, ContentType: "text/plain",
			Body:     cut + token + " was refused",
			Category: chat.CategoryUpstreamUnavailable, Message: cut + "[redacted]…",
		},
		{
			Name: "mid-stream error line quoting the token", Status: 200, ContentType: "application/x-ndjson",
			Body:     line + `{"error":"upstream auth ` + token + ` expired"}` + "\n",
			Category: chat.CategoryUpstreamUnavailable, Message: "upstream auth [redacted] expired",
		},
	})
}
