package anthropic

import (
	"net/http"
	"testing"

	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// TestNormalisation: the Messages API's rendering of every row of the
// shared table (see providertest.Normalisation).
func TestNormalisation(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	start := func(usage string) string {
		return ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":`+usage+`}}`)
	}
	text := func(deltas ...string) string {
		s := ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for _, d := range deltas {
			s += ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+d+`"}}`)
		}
		return s
	}
	stop := ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	end := func(reason string, out string) string {
		return ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+reason+`","stop_sequence":null},"usage":{"output_tokens":`+out+`}}`) +
			ev("message_stop", `{"type":"message_stop"}`)
	}
	in12 := `{"input_tokens":12,"output_tokens":1}`
	hello := start(in12) + text("Hello")
	providertest.Normalises(t, func(baseURL string, client *http.Client) provider.Provider {
		return New(Config{HTTPConfig: provider.HTTPConfig{Name: "claude", BaseURL: baseURL + "/v1", APIKey: "sk-ant-test-0123456789", Client: client}})
	}, map[string]providertest.Reply{
		"text": {Body: start(in12) + text("Hello,", " world!") + stop + end("end_turn", "4")},
		"tool call": {Body: start(`{"input_tokens":30,"output_tokens":1}`) +
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"call_1","name":"get_weather","input":{}}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`) +
			stop + end("tool_use", "9")},
		"length cut":     {Body: hello + stop + end("max_tokens", "1")},
		"content filter": {Body: hello + stop + end("refusal", "1")},
		"usage with cache reads": {Body: start(`{"input_tokens":52,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":1}`) +
			text("Hi") + stop + end("end_turn", "2")},
		"usage with reasoning": {Skip: "the Messages API counts thinking in output_tokens, without a breakdown"},
		"mid-stream error":     {Body: hello + ev("error", `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)},
		"cut short":            {Body: hello},
		"auth error": {Status: 401, ContentType: "application/json",
			Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		"rate limited": {Status: 429, ContentType: "application/json",
			Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`},
	})
}
