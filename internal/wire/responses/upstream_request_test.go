package responses

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

// goldenJSON compares got, indented, with testdata/name, or rewrites the
// file with -update.
func goldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	if !json.Valid(got) {
		t.Fatalf("invalid JSON: %s", got)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), pretty.String()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func ptr[T any](v T) *T { return &v }

func TestEncodeUpstreamRequestGolden(t *testing.T) {
	tests := []struct {
		name string
		req  chat.Request
	}{
		{
			// The leading system messages become instructions, a later one
			// a developer message; store is false and stream true; a small
			// max_tokens is raised to the API's minimum; seed is dropped,
			// Hints never sent; of Extra, reasoning_effort, verbosity and
			// the shared fields are mapped and the rest dropped.
			name: "upstream_request_basic.json",
			req: chat.Request{
				Model: "gpt-5-mini",
				Messages: []chat.Message{
					{Role: chat.RoleSystem, Content: "Be brief & <polite>."},
					{Role: chat.RoleSystem, Content: "Answer in English."},
					{Role: chat.RoleUser, Content: "Hello"},
					{Role: chat.RoleAssistant, Content: "Hi! How can I help?"},
					{Role: chat.RoleSystem, Content: "The user is on the free plan."},
					{Role: chat.RoleUser, Content: "Weather?", Name: "ann"},
				},
				MaxTokens: 5, Temperature: ptr(0.2), TopP: ptr(0.9), User: "u-42", Seed: ptr(int64(7)),
				Extra: map[string]json.RawMessage{
					"reasoning_effort": json.RawMessage(`"low"`), "verbosity": json.RawMessage(`"low"`),
					"service_tier": json.RawMessage(`"flex"`), "prompt_cache_key": json.RawMessage(`"tenant-7"`),
					"metadata": json.RawMessage(`{"trace": "t-1"}`), "store": json.RawMessage(`true`),
					"logprobs": json.RawMessage(`true`), "frequency_penalty": json.RawMessage(`0.5`),
				},
				Hints: chat.Hints{Sim: "fail"},
			},
		},
		{
			// Tool calls as function_call items after the assistant's
			// text (none when it had none), their outputs as
			// function_call_output items (parts when the tool returned an
			// image), tools with strict false and a default schema, a
			// named tool choice, images as input_image parts.
			name: "upstream_request_tools.json",
			req: chat.Request{
				Model: "gpt-4.1",
				Messages: []chat.Message{
					{Role: chat.RoleUser, Content: "What is this, and the weather in Paris?", Parts: []chat.Part{
						{Type: chat.PartText, Text: "What is this, and the weather in Paris?"},
						chat.ImagePart("data:image/png;base64,iVBORw0KGgo="),
						{Type: chat.PartImage, MediaType: "image/jpeg", Data: "/9j/4AAQ"},
					}},
					{Role: chat.RoleAssistant, Content: "Checking.", ToolCalls: []chat.ToolCall{
						{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
						{ID: "call_2", Name: "screenshot"},
					}},
					{Role: chat.RoleTool, ToolCallID: "call_1", Content: "18°C"},
					{Role: chat.RoleTool, ToolCallID: "call_2", Content: "the map", Parts: []chat.Part{
						{Type: chat.PartText, Text: "the map"},
						chat.ImagePart("https://example.com/map.png"),
					}},
					{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_3", Name: "now", Arguments: "{}"}}},
					{Role: chat.RoleTool, ToolCallID: "call_3", Content: ""},
				},
				Tools: []chat.Tool{
					{Name: "get_weather", Description: "Weather in a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
					{Name: "screenshot"},
					{Name: "now", Parameters: json.RawMessage(`null`)},
				},
				ToolChoice:        &chat.ToolChoice{Mode: "tool", Name: "get_weather"},
				ParallelToolCalls: ptr(false),
				MaxTokens:         1000,
			},
		},
		{
			// A thinking ask: reasoning with its effort and summary
			// "auto", and the items' encrypted_content included. The
			// assistant turn's blocks signed by a Responses API go back as
			// reasoning items before its message and calls, summary []
			// when the block had no text; an Anthropic block and an
			// unsigned one are dropped.
			name: "upstream_request_thinking.json",
			req: chat.Request{
				Model: "gpt-5.1",
				Messages: []chat.Message{
					{Role: chat.RoleUser, Content: "12 + 7?"},
					{Role: chat.RoleAssistant, Thinking: []chat.ThinkingBlock{
						{Text: "**Adding**\n\nUse the tool.", Signature: "gAAAAABp+enc/1==", Format: chat.ThinkingResponses, ID: "rs_01"},
						{Signature: "gAAAAABp+enc/2==", Format: chat.ThinkingResponses, ID: "rs_02"},
						{Text: "claude's", Signature: "EqQBCkYI", Format: chat.ThinkingAnthropic},
						{Text: "unsigned"},
					}, ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"a":12,"b":7}`}}},
					{Role: chat.RoleTool, ToolCallID: "call_1", Content: "19"},
				},
				Thinking: &chat.ThinkingAsk{Effort: "high"},
			},
		},
		{
			// response_format json_schema becomes text.format, flattened.
			name: "upstream_request_json_schema.json",
			req: chat.Request{
				Model:      "gpt-4o-mini",
				Messages:   []chat.Message{{Role: chat.RoleUser, Content: "Two colours."}},
				ToolChoice: &chat.ToolChoice{Mode: "none"},
				ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"colours","description":"A list","strict":true,` +
					`"schema":{"type":"object","properties":{"colours":{"type":"array","items":{"type":"string"}}},"required":["colours"],"additionalProperties":false}}}`),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeUpstreamRequest(&tt.req)
			if err != nil {
				t.Fatal(err)
			}
			goldenJSON(t, tt.name, got)
		})
	}
}

// TestReasoningRoundTrip: the recorded stream's reasoning item, collected
// as a thinking block, goes back in the next turn's request as the same
// item: its id and encrypted_content byte for byte, its summary text.
func TestReasoningRoundTrip(t *testing.T) {
	raw, err := os.ReadFile("testdata/upstream_reasoning_tool_call.sse")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := chat.Collect(pullUpstream(bytes.NewReader(raw), 0))
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if len(ch.Thinking) != 1 || ch.Thinking[0].Signature == "" {
		t.Fatalf("thinking = %+v, want one signed block", ch.Thinking)
	}
	b, err := EncodeUpstreamRequest(&chat.Request{Model: "m", Thinking: &chat.ThinkingAsk{Effort: "low"}, Messages: []chat.Message{
		{Role: chat.RoleUser, Content: "12+7"},
		{Role: chat.RoleAssistant, Thinking: ch.Thinking, ToolCalls: ch.ToolCalls},
		{Role: chat.RoleTool, ToolCallID: ch.ToolCalls[0].ID, Content: "19"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Input []struct {
			Type             string
			ID               string
			EncryptedContent string `json:"encrypted_content"`
			Summary          []upTextPart
		}
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	in := body.Input[1]
	if in.Type != "reasoning" || in.ID != "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9" || in.EncryptedContent != ch.Thinking[0].Signature ||
		!bytes.Contains(raw, []byte(`"encrypted_content":"`+in.EncryptedContent+`"`)) ||
		len(in.Summary) != 1 || in.Summary[0] != (upTextPart{Type: "summary_text", Text: ch.Thinking[0].Text}) {
		t.Errorf("input[1] = %+v, want the recorded reasoning item", in)
	}
	if body.Input[2].Type != "function_call" {
		t.Errorf("input[2] is %s, want the function call after its reasoning", body.Input[2].Type)
	}
}

// TestEncodeUpstreamRequestReasoning: the thinking ask wins over
// reasoning_effort in Extra, a budget is sent as the nearest effort,
// "none" leaves what Extra says, and no ask sends no summary.
func TestEncodeUpstreamRequestReasoning(t *testing.T) {
	extra := map[string]json.RawMessage{"reasoning_effort": json.RawMessage(`"low"`)}
	tests := []struct {
		name      string
		ask       *chat.ThinkingAsk
		extra     map[string]json.RawMessage
		reasoning string // the reasoning member, "" when absent
		include   bool
	}{
		{"no ask", nil, nil, "", false},
		{"no ask, extra", nil, extra, `{"effort":"low"}`, false},
		{"effort over extra", &chat.ThinkingAsk{Effort: "medium"}, extra, `{"effort":"medium","summary":"auto"}`, true},
		{"budget", &chat.ThinkingAsk{BudgetTokens: 1024}, nil, `{"effort":"minimal","summary":"auto"}`, true},
		{"default effort, extra's", &chat.ThinkingAsk{}, extra, `{"effort":"low","summary":"auto"}`, true},
		{"default effort, hidden: no summary asked", &chat.ThinkingAsk{Hide: true}, nil, `{}`, true},
		{"effort, hidden", &chat.ThinkingAsk{Effort: "high", Hide: true}, nil, `{"effort":"high"}`, true},
		{"none", &chat.ThinkingAsk{Effort: "none"}, nil, "", false},
		{"none, extra", &chat.ThinkingAsk{Effort: "none"}, extra, `{"effort":"low"}`, false},
	}
	for _, tt := range tests {
		b, err := EncodeUpstreamRequest(&chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, Thinking: tt.ask, Extra: tt.extra})
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Reasoning json.RawMessage `json:"reasoning"`
			Include   []string        `json:"include"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		if string(body.Reasoning) != tt.reasoning {
			t.Errorf("%s: reasoning = %s, want %s", tt.name, body.Reasoning, tt.reasoning)
		}
		if got := len(body.Include) == 1 && body.Include[0] == "reasoning.encrypted_content"; got != tt.include || len(body.Include) > 1 {
			t.Errorf("%s: include = %q, want encrypted content %v", tt.name, body.Include, tt.include)
		}
	}
}

// The Responses API's own request decoder (the client-facing one) reads
// what the upstream encoder writes back into the same conversation: the
// two directions agree on every item's shape.
func TestEncodeUpstreamRequestRoundTrip(t *testing.T) {
	req := &chat.Request{
		Model: "gpt-5",
		Messages: []chat.Message{
			{Role: chat.RoleSystem, Content: "Be brief."},
			{Role: chat.RoleUser, Content: "Look", Parts: []chat.Part{{Type: chat.PartText, Text: "Look"}, chat.ImagePart("https://example.com/a.png")}},
			{Role: chat.RoleAssistant, Content: "A cat. Checking its name.", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"cat"}`}}},
			{Role: chat.RoleTool, ToolCallID: "call_1", Content: "Tom"},
			{Role: chat.RoleUser, Content: "Thanks"},
		},
		Tools:       []chat.Tool{{Name: "lookup", Description: "Look up", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ToolChoice:  &chat.ToolChoice{Mode: "required"},
		MaxTokens:   300,
		Temperature: ptr(0.5),
	}
	body, err := EncodeUpstreamRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseRequest(body, nil)
	if err != nil {
		t.Fatalf("ParseRequest(EncodeUpstreamRequest()) error = %v\n%s", err, body)
	}
	if !back.Stream {
		t.Error("stream = false")
	}
	if diff := cmp.Diff(req, back.Request); diff != "" {
		t.Errorf("round trip (-sent +read back):\n%s", diff)
	}
}

func TestEncodeUpstreamRequestErrors(t *testing.T) {
	user := []chat.Message{{Role: chat.RoleUser, Content: "hi"}}
	tests := []struct {
		name string
		req  chat.Request
		want string
	}{
		{"several choices", chat.Request{Model: "m", Messages: user, N: 2}, "n:"},
		{"stop sequences", chat.Request{Model: "m", Messages: user, Stop: []string{"END"}}, "stop:"},
		{"tool call without id", chat.Request{Model: "m", Messages: append(user, chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{Name: "f"}}})}, "messages[1].tool_calls[0]"},
		{"tool message without call id", chat.Request{Model: "m", Messages: append(user, chat.Message{Role: chat.RoleTool, Content: "x"})}, "messages[1]"},
		{"unknown role", chat.Request{Model: "m", Messages: []chat.Message{{Role: "wizard", Content: "x"}}}, "messages[0]"},
		{"tool choice mode", chat.Request{Model: "m", Messages: user, ToolChoice: &chat.ToolChoice{Mode: "any"}}, "tool_choice"},
		{"json_schema without a schema", chat.Request{Model: "m", Messages: user, ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x"}}`)}, "response_format"},
		{"unknown response format", chat.Request{Model: "m", Messages: user, ResponseFormat: json.RawMessage(`{"type":"yaml"}`)}, "response_format"},
		{"reasoning effort not a string", chat.Request{Model: "m", Messages: user, Extra: map[string]json.RawMessage{"reasoning_effort": json.RawMessage(`3`)}}, "reasoning_effort"},
		{"metadata not an object", chat.Request{Model: "m", Messages: user, Extra: map[string]json.RawMessage{"metadata": json.RawMessage(`"x"`)}}, "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EncodeUpstreamRequest(&tt.req)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("EncodeUpstreamRequest() error = %v, want one starting %q", err, tt.want)
			}
		})
	}
}

// A minimal request sends only what it must; one choice and a text
// response_format are the defaults, and are not sent.
func TestEncodeUpstreamRequestOmits(t *testing.T) {
	got, err := EncodeUpstreamRequest(&chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}},
		ResponseFormat: json.RawMessage(`{"type":"text"}`), N: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","stream":true,"store":false,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`
	if string(got) != want {
		t.Errorf("EncodeUpstreamRequest() = %s, want %s", got, want)
	}
}
