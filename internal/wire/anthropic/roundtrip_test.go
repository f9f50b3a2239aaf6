package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

// TestRequestRoundTrip checks that what EncodeRequest sends, ParseRequest
// reads back whole: messages, cache breakpoints, tool calls, tool results,
// images, tools and settings. (Arguments and schemas are compact JSON, as
// the encoder compacts them; several system messages survive as blocks,
// with prompt caching.)
func TestRequestRoundTrip(t *testing.T) {
	img := chat.Part{Type: chat.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo=", ImageURL: "data:image/png;base64,iVBORw0KGgo="}
	req := &chat.Request{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages: []chat.Message{
			{Role: chat.RoleSystem, Content: "You are helpful.", CacheBreakpoint: true},
			{Role: chat.RoleSystem, Content: "Today is Monday."},
			{Role: chat.RoleUser, Content: "Weather in Paris and the time?"},
			{Role: chat.RoleAssistant, Content: "Let me check.", ToolCalls: []chat.ToolCall{
				{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris","units":["c"]}`},
				{ID: "toolu_2", Name: "now", Arguments: `{}`},
			}},
			{Role: chat.RoleTool, ToolCallID: "toolu_1", Content: "18°C <sunny> & dry"},
			{Role: chat.RoleTool, ToolCallID: "toolu_2", Content: "noon", Parts: []chat.Part{{Type: chat.PartText, Text: "noon"}, img}},
			{Role: chat.RoleUser, Content: "And this?", CacheBreakpoint: true, Parts: []chat.Part{
				{Type: chat.PartText, Text: "And this?"},
				{Type: chat.PartImage, ImageURL: "https://example.com/a.jpg"},
			}},
			{Role: chat.RoleAssistant, Content: "A map of 東京."},
			{Role: chat.RoleUser, Content: "Thanks"},
		},
		Tools: []chat.Tool{
			{Name: "get_weather", Description: "Weather in a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
			{Name: "now", Parameters: json.RawMessage(`{"type":"object"}`)},
		},
		ToolChoice:        &chat.ToolChoice{Mode: "tool", Name: "get_weather"},
		ParallelToolCalls: ptr(false),
		Temperature:       ptr(0.5),
		Stop:              []string{"END"},
		User:              "user-1",
	}
	topP := req.Clone()
	topP.Temperature, topP.TopP = nil, ptr(0.9)
	for i, choice := range []*chat.ToolChoice{req.ToolChoice, {Mode: "auto"}, {Mode: "required"}, {Mode: "none"}} {
		in := req.Clone()
		if i == 1 {
			in = topP.Clone()
		}
		in.ToolChoice = choice
		if choice.Mode == "none" {
			in.ParallelToolCalls = nil // none allows no calls, parallel or not
		}
		body, err := EncodeRequest(in, EncodeOptions{PromptCaching: true})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := ParseRequest(body)
		if err != nil {
			t.Fatalf("ParseRequest(EncodeRequest()) error = %v\n%s", err, body)
		}
		if !pr.Stream {
			t.Error("an upstream request must stream")
		}
		if diff := cmp.Diff(in, pr.Request); diff != "" {
			t.Errorf("tool choice %s: round trip (-want +got):\n%s", choice.Mode, diff)
		}
	}
}

// TestRequestRoundTripFromClient checks the other direction on a client's
// request: parsed, encoded for an upstream and parsed again, it says the
// same.
func TestRequestRoundTripFromClient(t *testing.T) {
	for _, tt := range parseGood {
		pr, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		body, err := EncodeRequest(pr.Request, EncodeOptions{PromptCaching: true})
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		if pr.Request.Temperature != nil {
			pr.Request.TopP = nil // not sent with a temperature
		}
		// How a thinking ask is sent depends on the model (a budget or
		// an effort): its round trip is the upstream encoder's test.
		pr.Request.Thinking, again.Request.Thinking = nil, nil
		// JSON the encoder compacted is compared as values.
		if diff := cmp.Diff(pr.Request, again.Request, cmp.Comparer(jsonEqual), cmp.Comparer(rawEqual)); diff != "" {
			t.Errorf("%s: (-first +second):\n%s", tt.name, diff)
		}
	}
}

func rawEqual(a, b json.RawMessage) bool { return jsonEqual(string(a), string(b)) }

// jsonEqual compares JSON texts (arguments, schemas) as values.
func jsonEqual(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return a == b
	}
	return cmp.Equal(va, vb)
}
