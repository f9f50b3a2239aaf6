package gemini

import (
	"net/http"
	"testing"

	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// TestNormalisation: streamGenerateContent's rendering of every row of
// the shared table (see providertest.Normalisation).
func TestNormalisation(t *testing.T) {
	ev := func(data string) string { return "data: " + data + "\r\n\r\n" }
	text := func(s string) string {
		return ev(`{"candidates": [{"content": {"parts": [{"text": "` + s + `"}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash"}`)
	}
	finish := func(reason, usage string) string {
		return ev(`{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "` + reason + `","index": 0}],"usageMetadata": ` + usage + `,"modelVersion": "gemini-2.5-flash"}`)
	}
	providertest.Normalises(t, func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "gemini", BaseURL: baseURL + "/v1beta", APIKey: "AIza-test-0123456789", Client: client}})
	}, map[string]providertest.Reply{
		"text": {Body: text("Hello,") + text(" world!") + finish("STOP", `{"promptTokenCount": 12,"candidatesTokenCount": 4,"totalTokenCount": 16}`)},
		"tool call": {Body: ev(`{"candidates": [{"content": {"parts": [{"functionCall": {"id": "call_1","name": "get_weather","args": {"city": "Paris"}}}],"role": "model"},"finishReason": "STOP","index": 0}],` +
			`"usageMetadata": {"promptTokenCount": 30,"candidatesTokenCount": 9,"totalTokenCount": 39},"modelVersion": "gemini-2.5-flash"}`)},
		"length cut":     {Body: text("Hello") + finish("MAX_TOKENS", `{"promptTokenCount": 12,"candidatesTokenCount": 1,"totalTokenCount": 13}`)},
		"content filter": {Body: text("Hello") + finish("SAFETY", `{"promptTokenCount": 12,"candidatesTokenCount": 1,"totalTokenCount": 13}`)},
		"usage with cache reads": {Body: text("Hi") +
			finish("STOP", `{"promptTokenCount": 2100,"cachedContentTokenCount": 2048,"candidatesTokenCount": 2,"totalTokenCount": 2102}`)},
		"usage with reasoning": {Body: text("Hi") +
			finish("STOP", `{"promptTokenCount": 12,"candidatesTokenCount": 2,"thoughtsTokenCount": 38,"totalTokenCount": 52}`)},
		"mid-stream error": {Body: text("Hello") + ev(`{"error": {"code": 500,"message": "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status": "INTERNAL"}}`)},
		"cut short":        {Body: text("Hello")},
		"auth error": {Status: 401, ContentType: "application/json; charset=UTF-8",
			Body: `{"error": {"code": 401,"message": "Request had invalid authentication credentials.","status": "UNAUTHENTICATED"}}`},
		"rate limited": {Status: 429, ContentType: "application/json; charset=UTF-8",
			Body: `{"error": {"code": 429,"message": "Resource has been exhausted (e.g. check quota).","status": "RESOURCE_EXHAUSTED"}}`},
	})
}
