package anthropic

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// TestSecretsScrubbed: an upstream that quotes the configured key or a
// configured header value has it scrubbed from the error; an auth failure
// gets a generic message naming the provider. The anthropic-beta value is
// public, and stays in the error that rejects it.
func TestSecretsScrubbed(t *testing.T) {
	const (
		key   = "sk-ant-api03-Hq8Zr2Lx5Vb9Nm3Kp7Wt1Ys4Uc6Ie0Og-AbCdEfAA"
		token = "pxa-4Rk8Tn2Wq6Zm9Lc3"
		beta  = "prompt-caching-2024-07-31"
	)
	newProvider := func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "claude", BaseURL: baseURL, APIKey: key, Client: client, Headers: map[string]string{"anthropic-beta": beta, "X-Proxy-Auth": "Bearer " + token}}})
	}
	const authMessage = `provider "claude" rejected the gateway's credentials (HTTP %d): check its api_key_env and headers`
	start := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}` + "\n\n"
	providertest.Secrets(t, []string{key, token}, newProvider, []providertest.SecretCase{
		{
			Name: "401 as Anthropic sends it", Status: 401, ContentType: "application/json",
			Body:     `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			Category: chat.CategoryAuth, Message: fmt.Sprintf(authMessage, 401),
		},
		{
			Name: "401 quoting the key", Status: 401, ContentType: "application/json",
			Body:     `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: ` + key + `"}}`,
			Category: chat.CategoryAuth, Message: fmt.Sprintf(authMessage, 401),
		},
		{
			Name: "403 quoting a header", Status: 403, ContentType: "application/json",
			Body:     `{"type":"error","error":{"type":"permission_error","message":"proxy token ` + token + ` may not call this model"}}`,
			Category: chat.CategoryAuth, Message: fmt.Sprintf(authMessage, 403),
		},
		{
			Name: "500 quoting the key", Status: 500, ContentType: "application/json",
			Body:     `{"type":"error","error":{"type":"api_error","message":"Internal server error for key ` + key + `"}}`,
			Category: chat.CategoryUpstreamUnavailable, Message: "Internal server error for key [redacted]",
		},
		{
			Name: "400 naming the beta", Status: 400, ContentType: "application/json",
			Body:     `{"type":"error","error":{"type":"invalid_request_error","message":"Unexpected value(s) ` + "`" + beta + "`" + ` for the ` + "`anthropic-beta`" + ` header."}}`,
			Category: chat.CategoryInvalidRequest, Message: "Unexpected value(s) `" + beta + "` for the `anthropic-beta` header.",
		},
		{
			Name: "200 JSON error quoting the key", Status: 200, ContentType: "application/json",
			Body:     `{"type":"error","error":{"type":"api_error","message":"key ` + key + ` failed"}}`,
			Category: chat.CategoryUpstreamUnavailable, Message: "key [redacted] failed",
		},
		{
			Name: "mid-stream error event quoting a header", Status: 200, ContentType: "text/event-stream",
			Body:     start + "event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded (proxy Bearer ` + token + `)"}}` + "\n\n",
			Category: chat.CategoryOverloaded, Message: "Overloaded (proxy [redacted])",
		},
		{
			Name: "mid-stream auth error", Status: 200, ContentType: "text/event-stream",
			Body:     start + "event: error\n" + `data: {"type":"error","error":{"type":"authentication_error","message":"key ` + key + ` revoked"}}` + "\n\n",
			Category: chat.CategoryAuth, Message: `provider "claude" rejected the gateway's credentials: check its api_key_env and headers`,
		},
	})
}
