package openairesponses

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// events frames Responses API events as OpenAI sends them: each with its
// type as the SSE event name, and a sequence number.
func events(evs ...string) string {
	var b strings.Builder
	for i, e := range evs {
		var m map[string]any
		if err := json.Unmarshal([]byte(e), &m); err != nil {
			panic(e)
		}
		m["sequence_number"] = i
		data, _ := json.Marshal(m)
		b.WriteString("event: " + m["type"].(string) + "\ndata: " + string(data) + "\n\n")
	}
	return b.String()
}

// Pieces of the renderings: a response's start, a message item with text
// deltas, a function call item, and a response object with its status,
// incomplete reason and usage.
const (
	created    = `{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5","output":[],"usage":null}}`
	inProgress = `{"type":"response.in_progress","response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5","output":[],"usage":null}}`
	msgAdded   = `{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`
	partAdded  = `{"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`
)

func delta(text string) string {
	b, _ := json.Marshal(text)
	return `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":` + string(b) + `,"logprobs":[]}`
}

func terminal(typ, status, incomplete, usage string) string {
	return `{"type":"` + typ + `","response":{"id":"resp_1","object":"response","status":"` + status + `","model":"gpt-5","output":[],` +
		`"incomplete_details":` + incomplete + `,"error":null,"usage":` + usage + `}}`
}

func usage(in, cached, out, reasoning string) string {
	return `{"input_tokens":` + in + `,"input_tokens_details":{"cached_tokens":` + cached + `},"output_tokens":` + out +
		`,"output_tokens_details":{"reasoning_tokens":` + reasoning + `},"total_tokens":0}`
}

// TestNormalisation: the Responses API's rendering of every row of the
// shared table normalises as the other adapters' renderings do.
func TestNormalisation(t *testing.T) {
	hello := []string{created, inProgress, msgAdded, partAdded, delta("Hello")}
	providertest.Normalises(t, func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "responses", BaseURL: baseURL + "/v1", APIKey: "sk-test-0123456789", Client: client}})
	}, map[string]providertest.Reply{
		"text": {Body: events(created, inProgress, msgAdded, partAdded, delta("Hello,"), delta(" world!"),
			`{"type":"response.output_text.done","item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello, world!","logprobs":[]}`,
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello, world!"}],"role":"assistant"}}`,
			terminal("response.completed", "completed", "null", usage("12", "0", "4", "0")))},
		"tool call": {Body: events(created, inProgress,
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}`,
			`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"city\":"}`,
			`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"\"Paris\"}"}`,
			`{"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":0,"arguments":"{\"city\":\"Paris\"}"}`,
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"city\":\"Paris\"}","call_id":"call_1","name":"get_weather"}}`,
			terminal("response.completed", "completed", "null", usage("30", "0", "9", "0")))},
		"length cut": {Body: events(append(hello,
			terminal("response.incomplete", "incomplete", `{"reason":"max_output_tokens"}`, usage("12", "0", "1", "0")))...)},
		"content filter": {Body: events(append(hello,
			terminal("response.incomplete", "incomplete", `{"reason":"content_filter"}`, usage("12", "0", "1", "0")))...)},
		"usage with cache reads": {Body: events(created, msgAdded, delta("Hi"),
			terminal("response.completed", "completed", "null", usage("2100", "2048", "2", "0")))},
		// A reasoning item without a summary (none was asked for): the
		// row is about the usage (thinking is TestStream's).
		"usage with reasoning": {Body: events(created,
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
			strings.Replace(msgAdded, `"output_index":0`, `"output_index":1`, 1),
			strings.Replace(delta("Hi"), `"output_index":0`, `"output_index":1`, 1),
			terminal("response.completed", "completed", "null", usage("12", "0", "40", "38")))},
		"mid-stream error": {Body: events(append(hello,
			`{"type":"response.failed","response":{"id":"resp_1","object":"response","status":"failed","model":"gpt-5","output":[],"error":{"code":"server_error","message":"The model failed to generate a response."},"usage":null}}`)...)},
		"cut short": {Body: events(hello...)},
		"auth error": {Status: 401, ContentType: "application/json; charset=utf-8",
			Body: `{"error":{"message":"Incorrect API key provided: sk-test-0123456789. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		"rate limited": {Status: 429, ContentType: "application/json",
			Body: `{"error":{"message":"Rate limit reached for gpt-5 in organization org-1 on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
	})
}
