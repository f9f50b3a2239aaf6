package openai

import (
	"net/http"
	"testing"

	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// TestNormalisation: Chat Completions' rendering of every row of the
// shared table (see providertest.Normalisation).
func TestNormalisation(t *testing.T) {
	chunk := func(delta, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}` + "\n\n"
	}
	usage := func(u string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":` + u + `}` + "\n\ndata: [DONE]\n\n"
	}
	hello := chunk(`{"role":"assistant","content":""}`, "") + chunk(`{"content":"Hello"}`, "")
	providertest.Normalises(t, func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "openai", BaseURL: baseURL + "/v1", APIKey: "sk-test-0123456789", Client: client}})
	}, map[string]providertest.Reply{
		"text": {Body: chunk(`{"role":"assistant","content":""}`, "") + chunk(`{"content":"Hello,"}`, "") + chunk(`{"content":" world!"}`, "") +
			chunk(`{}`, "stop") + usage(`{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}`)},
		"tool call": {Body: chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "") +
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "") +
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "") +
			chunk(`{}`, "tool_calls") + usage(`{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}`)},
		"length cut":     {Body: hello + chunk(`{}`, "length") + usage(`{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}`)},
		"content filter": {Body: hello + chunk(`{}`, "content_filter") + usage(`{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}`)},
		"usage with cache reads": {Body: chunk(`{"content":"Hi"}`, "") + chunk(`{}`, "stop") +
			usage(`{"prompt_tokens":2100,"completion_tokens":2,"total_tokens":2102,"prompt_tokens_details":{"cached_tokens":2048}}`)},
		"usage with reasoning": {Body: chunk(`{"content":"Hi"}`, "") + chunk(`{}`, "stop") +
			usage(`{"prompt_tokens":12,"completion_tokens":40,"total_tokens":52,"completion_tokens_details":{"reasoning_tokens":38}}`)},
		"mid-stream error": {Body: hello + `data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}` + "\n\n"},
		"cut short":        {Body: hello},
		"auth error": {Status: 401, ContentType: "application/json; charset=utf-8",
			Body: `{"error":{"message":"Incorrect API key provided: sk-test-0123456789.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		"rate limited": {Status: 429, ContentType: "application/json",
			Body: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-1 on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
	})
}
