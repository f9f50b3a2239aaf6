package openai

import (
	"net/http"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// TestSecretsScrubbed: an upstream that quotes the configured key or a
// configured header value (OpenAI's 401 does) has it scrubbed from the
// error; an auth failure gets a generic message naming the provider.
func TestSecretsScrubbed(t *testing.T) {
	const (
		key   = "sk-proj-Zq3XbT9kLm2NvR8pW4sY7uA1cE6gH0jK5oQ"
		org   = "org-Q7xv29LmPz41KdRt"
		token = "gwt-7hQ2mK9xL4pV8sN1cR5"
	)
	newProvider := func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "openai", BaseURL: baseURL, APIKey: key, Client: client, Headers: map[string]string{"OpenAI-Organization": org, "X-Gateway-Token": token}}})
	}
	const authMessage = `provider "openai" rejected the gateway's credentials (HTTP 401): check its api_key_env and headers`
	// A text body cut at 200 bytes inside the key: "sk-proj-Z…".
	cut := "bad gateway: " + strings.Repeat("upstream ", 19) + "token: "
	chunk := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n"
	providertest.Secrets(t, []string{key, org, token}, newProvider, []providertest.SecretCase{
		{
			Name: "401 quoting the key", Status: 401, ContentType: "application/json; charset=utf-8",
			Body:     `{"error":{"message":"Incorrect API key provided: ` + key + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			Category: chat.CategoryAuth, Message: authMessage,
		},
		{
			Name: "401 quoting the key masked", Status: 401, ContentType: "application/json; charset=utf-8",
			Body:     `{"error":{"message":"Incorrect API key provided: sk-proj-` + strings.Repeat("*", 60) + `K5oQ. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			Category: chat.CategoryAuth, Message: authMessage,
		},
		{
			Name: "500 quoting the key and the organization", Status: 500, ContentType: "application/json",
			Body:     `{"error":{"message":"The server had an error while processing your request (key ` + key + `, organization ` + org + `). Sorry about that!","type":"server_error","param":null,"code":null}}`,
			Category: chat.CategoryUpstreamUnavailable, Message: "The server had an error while processing your request (key [redacted], organization [redacted]). Sorry about that!",
		},
		{
			Name: "400 quoting the key masked", Status: 400, ContentType: "application/json",
			Body:     `{"error":{"message":"Key sk-proj-****...K5oQ may not use model m.","type":"invalid_request_error","param":"model","code":null}}`,
			Category: chat.CategoryInvalidRequest, Message: "Key [redacted] may not use model m.",
		},
		{
			Name: "502 text cut inside the key", Status: 502, ContentType: "text/plain",
			Body:     cut + key + " was refused",
			Category: chat.CategoryUpstreamUnavailable, Message: cut + "[redacted]…",
		},
		{
			Name: "mid-stream error event quoting a header", Status: 200, ContentType: "text/event-stream",
			Body:     chunk + `data: {"error":{"message":"proxy rejected token ` + token + ` mid-stream","type":"server_error"}}` + "\n\n",
			Category: chat.CategoryUpstreamUnavailable, Message: "proxy rejected token [redacted] mid-stream",
		},
		{
			Name: "mid-stream auth error", Status: 200, ContentType: "text/event-stream",
			Body:     chunk + `data: {"error":{"message":"Incorrect API key provided: ` + key + `","type":"invalid_request_error","code":"invalid_api_key"}}` + "\n\n",
			Category: chat.CategoryAuth, Message: `provider "openai" rejected the gateway's credentials: check its api_key_env and headers`,
		},
	})
}
