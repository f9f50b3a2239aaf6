package ollama

import (
	"net/http"
	"testing"

	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// TestNormalisation: /api/chat's rendering of every row of the shared
// table (see providertest.Normalisation).
func TestNormalisation(t *testing.T) {
	line := func(content string) string {
		return `{"model":"llama3.2","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"` + content + `"},"done":false}` + "\n"
	}
	done := func(reason string, in, out string) string {
		return `{"model":"llama3.2","created_at":"2026-01-01T00:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"` + reason +
			`","total_duration":100,"prompt_eval_count":` + in + `,"eval_count":` + out + `,"eval_duration":50}` + "\n"
	}
	const ndjson = "application/x-ndjson"
	providertest.Normalises(t, func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "ollama", BaseURL: baseURL, Headers: map[string]string{"Authorization": "Bearer test-0123456789"}, Client: client}})
	}, map[string]providertest.Reply{
		"text": {ContentType: ndjson, Body: line("Hello,") + line(" world!") + done("stop", "12", "4")},
		"tool call": {ContentType: ndjson, Body: `{"model":"llama3.2","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}` + "\n" +
			done("stop", "30", "9")},
		"length cut":             {ContentType: ndjson, Body: line("Hello") + done("length", "12", "1")},
		"content filter":         {Skip: "Ollama has no content filter"},
		"usage with cache reads": {Skip: "Ollama reports no cached tokens"},
		"usage with reasoning":   {Skip: "Ollama counts thinking in eval_count, without a breakdown"},
		"mid-stream error":       {ContentType: ndjson, Body: line("Hello") + `{"error":"an error was encountered while running the model: unexpected EOF"}` + "\n"},
		"cut short":              {ContentType: ndjson, Body: line("Hello")},
		"auth error":             {Status: 401, ContentType: "application/json", Body: `{"error":"unauthorized"}`},
		"rate limited":           {Status: 429, ContentType: "application/json", Body: `{"error":"too many requests"}`},
	})
}
