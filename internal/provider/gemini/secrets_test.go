package gemini

import (
	"net/http"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// TestSecretsScrubbed: an upstream that quotes the configured key or a
// configured header value has it scrubbed from the error; an auth failure
// (Gemini's invalid key is a 400 with API_KEY_INVALID) gets a generic
// message naming the provider. The key travels in the x-goog-api-key
// header, never in the URL.
func TestSecretsScrubbed(t *testing.T) {
	const (
		key     = "AIzaSyBx4Qm7Tr2Lk9Vn3Wp8Zs1Yc6Ud0Ef5Gh"
		project = "billing-project-4821"
	)
	newProvider := func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "gemini", BaseURL: baseURL, APIKey: key, Client: client, Headers: map[string]string{"X-Goog-User-Project": project}}})
	}
	const authMessage = `provider "gemini" rejected the gateway's credentials (HTTP 400): check its api_key_env and headers`
	invalidKey := func(msg string) string {
		return `{"error": {"code": 400, "message": "` + msg + `", "status": "INVALID_ARGUMENT", "details": [` +
			`{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}},` +
			`{"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": "` + msg + `"}]}}`
	}
	event := `data: {"candidates": [{"content": {"parts": [{"text": "Hel"}],"role": "model"},"index": 0}],"modelVersion": "m"}` + "\r\n\r\n"
	providertest.Secrets(t, []string{key, project}, newProvider, []providertest.SecretCase{
		{
			Name: "400 API_KEY_INVALID as Gemini sends it", Status: 400, ContentType: "application/json; charset=UTF-8",
			Body:     invalidKey("API key not valid. Please pass a valid API key."),
			Category: chat.CategoryAuth, Message: authMessage,
		},
		{
			Name: "400 API_KEY_INVALID quoting the key", Status: 400, ContentType: "application/json; charset=UTF-8",
			Body:     invalidKey("API key not valid: " + key),
			Category: chat.CategoryAuth, Message: authMessage,
		},
		{
			Name: "403 leaked key", Status: 403, ContentType: "application/json; charset=UTF-8",
			Body:     `{"error": {"code": 403, "message": "Your API key ` + key + ` was reported as leaked. Please use another API key.", "status": "PERMISSION_DENIED"}}`,
			Category: chat.CategoryAuth, Message: `provider "gemini" rejected the gateway's credentials (HTTP 403): check its api_key_env and headers`,
		},
		{
			Name: "500 quoting the key and a header", Status: 500, ContentType: "application/json; charset=UTF-8",
			Body:     `{"error": {"code": 500, "message": "Internal error for key ` + key + ` in project ` + project + `.", "status": "INTERNAL"}}`,
			Category: chat.CategoryUpstreamUnavailable, Message: "Internal error for key [redacted] in project [redacted].",
		},
		{
			Name: "503 HTML page titled with the key", Status: 503, ContentType: "text/html",
			Body:     "<html><head><title>Unavailable for " + key + "</title></head></html>",
			Category: chat.CategoryOverloaded, Message: `upstream answered 503 with an HTML page (title: "Unavailable for [redacted]")`,
		},
		{
			Name: "mid-stream error event quoting the key", Status: 200, ContentType: "text/event-stream",
			Body:     event + `data: {"error": {"code": 500, "message": "Internal error for key ` + key + `", "status": "INTERNAL"}}` + "\r\n\r\n",
			Category: chat.CategoryUpstreamUnavailable, Message: "Internal error for key [redacted]",
		},
	})
}
