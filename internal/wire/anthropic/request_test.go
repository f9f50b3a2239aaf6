package anthropic

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

var parseGood = []struct {
	name   string
	body   string
	stream bool
	want   chat.Request
}{
	{
		name: "minimal",
		body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Hello"}]}`,
		want: chat.Request{Model: "claude-sonnet-4-5", MaxTokens: 1024, Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hello"}}},
	},
	{
		name: "everything",
		body: `{
			"model": "claude-opus-4-1", "max_tokens": 2048, "stream": true,
			"system": [
				{"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}},
				{"type": "text", "text": "Today is Monday."}
			],
			"messages": [
				{"role": "user", "content": [
					{"type": "text", "text": "What is this?"},
					{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
					{"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}, "cache_control": {"type": "ephemeral"}}
				]},
				{"role": "assistant", "content": [
					{"type": "thinking", "thinking": "Let me look.", "signature": "EqQB"},
					{"type": "text", "text": "Let me check."},
					{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "cat"}},
					{"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}}
				]},
				{"role": "user", "content": [
					{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a cat", "is_error": false},
					{"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "noon"}, {"type": "text", "text": " UTC"}]},
					{"type": "tool_result", "tool_use_id": "toolu_3"},
					{"type": "text", "text": "Thanks."}
				]},
				{"role": "assistant", "content": "You're welcome"}
			],
			"tools": [
				{"name": "lookup", "description": "Look things up", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
				{"type": "custom", "name": "now", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}
			],
			"tool_choice": {"type": "any", "disable_parallel_tool_use": true},
			"temperature": 0.2, "top_p": 0.95, "top_k": 40, "stop_sequences": ["\n\nHuman:"],
			"metadata": {"user_id": "user-7"},
			"thinking": {"type": "enabled", "budget_tokens": 1024}, "service_tier": "auto"
		}`,
		stream: true,
		want: chat.Request{
			Model:     "claude-opus-4-1",
			MaxTokens: 2048,
			Messages: []chat.Message{
				{Role: chat.RoleSystem, Content: "You are helpful.", CacheBreakpoint: true},
				{Role: chat.RoleSystem, Content: "Today is Monday."},
				{Role: chat.RoleUser, Content: "What is this?", CacheBreakpoint: true, Parts: []chat.Part{
					{Type: chat.PartText, Text: "What is this?"},
					{Type: chat.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo=", ImageURL: "data:image/png;base64,iVBORw0KGgo="},
					{Type: chat.PartImage, ImageURL: "https://example.com/a.jpg"},
				}},
				{Role: chat.RoleAssistant, Content: "Let me check.", ToolCalls: []chat.ToolCall{
					{ID: "toolu_1", Name: "lookup", Arguments: `{"q": "cat"}`},
					{ID: "toolu_2", Name: "now", Arguments: `{}`},
				}, Thinking: []chat.ThinkingBlock{{Text: "Let me look.", Signature: "EqQB", Format: chat.ThinkingAnthropic}}},
				{Role: chat.RoleTool, ToolCallID: "toolu_1", Content: "a cat"},
				{Role: chat.RoleTool, ToolCallID: "toolu_2", Content: "noon UTC", Parts: []chat.Part{{Type: chat.PartText, Text: "noon"}, {Type: chat.PartText, Text: " UTC"}}},
				{Role: chat.RoleTool, ToolCallID: "toolu_3"},
				{Role: chat.RoleUser, Content: "Thanks."},
				{Role: chat.RoleAssistant, Content: "You're welcome"},
			},
			Tools: []chat.Tool{
				{Name: "lookup", Description: "Look things up", Parameters: json.RawMessage(`{"type": "object", "properties": {"q": {"type": "string"}}}`)},
				{Name: "now", Parameters: json.RawMessage(`{"type": "object"}`)},
			},
			ToolChoice:        &chat.ToolChoice{Mode: "required"},
			ParallelToolCalls: ptr(false),
			Temperature:       ptr(0.2),
			TopP:              ptr(0.95),
			Stop:              []string{"\n\nHuman:"},
			User:              "user-7",
			Thinking:          &chat.ThinkingAsk{BudgetTokens: 1024},
		},
	},
	{
		name: "system string and tool choice by name",
		body: `{"model":"m","max_tokens":1,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"metadata":{}}`,
		want: chat.Request{
			Model: "m", MaxTokens: 1,
			Messages: []chat.Message{
				{Role: chat.RoleSystem, Content: "Be brief."},
				{Role: chat.RoleUser, Content: "ab", Parts: []chat.Part{{Type: chat.PartText, Text: "a"}, {Type: chat.PartText, Text: "b"}}},
			},
			Tools:      []chat.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}},
			ToolChoice: &chat.ToolChoice{Mode: "tool", Name: "f"},
		},
	},
}

var parseBad = []struct {
	name  string
	body  string
	param string
}{
	{"not JSON", `{"model":`, ""},
	{"not an object", `[1]`, ""},
	{"null", `null`, ""},
	{"trailing data", `{"model":"m"} {}`, ""},
	{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "model"},
	{"model not a string", `{"model":5,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "model"},
	{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
	{"max_tokens zero", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
	{"max_tokens a string", `{"model":"m","max_tokens":"5","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
	{"stream not a boolean", `{"model":"m","max_tokens":5,"stream":"yes","messages":[{"role":"user","content":"hi"}]}`, "stream"},
	{"no messages", `{"model":"m","max_tokens":5}`, "messages"},
	{"empty messages", `{"model":"m","max_tokens":5,"messages":[]}`, "messages"},
	{"messages not an array", `{"model":"m","max_tokens":5,"messages":"hi"}`, "messages"},
	{"only thinking", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s"},{"type":"redacted_thinking","data":"d"}]}]}`, "messages"},
	{"thinking without signature", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"y"}]}]}`, "messages.0.content.0.signature"},
	{"redacted without data", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"redacted_thinking"},{"type":"text","text":"y"}]}]}`, "messages.0.content.0.data"},
	{"thinking type", `{"model":"m","max_tokens":5,"thinking":{"type":"on"},"messages":[{"role":"user","content":"x"}]}`, "thinking.type"},
	{"thinking without type", `{"model":"m","max_tokens":5,"thinking":{"budget_tokens":2048},"messages":[{"role":"user","content":"x"}]}`, "thinking.type"},
	{"budget missing", `{"model":"m","max_tokens":5,"thinking":{"type":"enabled"},"messages":[{"role":"user","content":"x"}]}`, "thinking.budget_tokens"},
	{"budget small", `{"model":"m","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1000},"messages":[{"role":"user","content":"x"}]}`, "thinking.budget_tokens"},
	{"display", `{"model":"m","max_tokens":5,"thinking":{"type":"adaptive","display":"full"},"messages":[{"role":"user","content":"x"}]}`, "thinking.display"},
	{"effort", `{"model":"m","max_tokens":5,"output_config":{"effort":"extreme"},"messages":[{"role":"user","content":"x"}]}`, "output_config.effort"},
	{"thinking not an object", `{"model":"m","max_tokens":5,"thinking":true,"messages":[{"role":"user","content":"x"}]}`, "thinking"},
	{"system role", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`, "messages.0.role"},
	{"tool role", `{"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"hi"}]}`, "messages.0.role"},
	{"no role", `{"model":"m","max_tokens":5,"messages":[{"content":"hi"}]}`, "messages.0.role"},
	{"no content", `{"model":"m","max_tokens":5,"messages":[{"role":"user"}]}`, "messages.0.content"},
	{"content a number", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":5}]}`, "messages.0.content"},
	{"no blocks", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[]}]}`, "messages.0.content"},
	{"unknown block type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0"}}]}]}`, "messages.0.content.0.type"},
	{"block without type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "messages.0.content.0.type"},
	{"text without text", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages.0.content.0.text"},
	{"image in an assistant turn", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}`, "messages.1.content.0.type"},
	{"image without source", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "messages.0.content.0.source"},
	{"image without media type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AAAA"}}]}]}`, "messages.0.content.0.source.media_type"},
	{"image from the files API", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"file_1"}}]}]}`, "messages.0.content.0.source.type"},
	{"tool_use in a user turn", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`, "messages.0.content.0.type"},
	{"tool_use without id", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, "messages.1.content.0.id"},
	{"tool_use without name", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","input":{}}]}]}`, "messages.1.content.0.name"},
	{"tool_use input not an object", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]}`, "messages.1.content.0.input"},
	{"tool_result in an assistant turn", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`, "messages.0.content.0.type"},
	{"tool_result without tool_use_id", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages.0.content.0.tool_use_id"},
	{"tool_result with a document", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document"}]}]}]}`, "messages.0.content.0.content.0.type"},
	{"tool_result content a number", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":5}]}]}`, "messages.0.content.0.content"},
	{"thinking in a user turn", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"thinking","thinking":"x"}]}]}`, "messages.0.content.0.type"},
	{"system a number", `{"model":"m","max_tokens":5,"system":5,"messages":[{"role":"user","content":"hi"}]}`, "system"},
	{"system image block", `{"model":"m","max_tokens":5,"system":[{"type":"image"}],"messages":[{"role":"user","content":"hi"}]}`, "system.0.type"},
	{"system block without text", `{"model":"m","max_tokens":5,"system":[{"type":"text"}],"messages":[{"role":"user","content":"hi"}]}`, "system.0.text"},
	{"temperature above 1", `{"model":"m","max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`, "temperature"},
	{"top_p above 1", `{"model":"m","max_tokens":5,"top_p":2,"messages":[{"role":"user","content":"hi"}]}`, "top_p"},
	{"stop_sequences a string", `{"model":"m","max_tokens":5,"stop_sequences":"x","messages":[{"role":"user","content":"hi"}]}`, "stop_sequences"},
	{"metadata a string", `{"model":"m","max_tokens":5,"metadata":"x","messages":[{"role":"user","content":"hi"}]}`, "metadata"},
	{"server tool", `{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, "tools.0.type"},
	{"tool without name", `{"model":"m","max_tokens":5,"tools":[{"input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`, "tools.0.name"},
	{"tool schema not an object", `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":"x"}],"messages":[{"role":"user","content":"hi"}]}`, "tools.0.input_schema"},
	{"tools not an array", `{"model":"m","max_tokens":5,"tools":{},"messages":[{"role":"user","content":"hi"}]}`, "tools"},
	{"tool_choice a string", `{"model":"m","max_tokens":5,"tool_choice":"auto","messages":[{"role":"user","content":"hi"}]}`, "tool_choice"},
	{"tool_choice OpenAI's required", `{"model":"m","max_tokens":5,"tool_choice":{"type":"required"},"messages":[{"role":"user","content":"hi"}]}`, "tool_choice.type"},
	{"tool_choice tool without name", `{"model":"m","max_tokens":5,"tool_choice":{"type":"tool"},"messages":[{"role":"user","content":"hi"}]}`, "tool_choice.name"},
}

func TestParseRequest(t *testing.T) {
	for _, tt := range parseGood {
		t.Run(tt.name, func(t *testing.T) {
			pr, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatalf("ParseRequest() error = %v", err)
			}
			if pr.Stream != tt.stream {
				t.Errorf("Stream = %v, want %v", pr.Stream, tt.stream)
			}
			if diff := cmp.Diff(&tt.want, pr.Request); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseRequestThinking: thinking and output_config.effort are the
// request's ThinkingAsk, and say what the client is sent of the thinking.
func TestParseRequestThinking(t *testing.T) {
	tests := []struct {
		name, fields string
		ask          *chat.ThinkingAsk
		show         Show
	}{
		{"absent", ``, nil, ShowNone},
		{"effort alone", `"output_config":{"effort":"low"},`, nil, ShowNone},
		{"disabled", `"thinking":{"type":"disabled"},`, &chat.ThinkingAsk{Effort: "none"}, ShowNone},
		{"enabled", `"thinking":{"type":"enabled","budget_tokens":4096},`, &chat.ThinkingAsk{BudgetTokens: 4096}, ShowAll},
		{"enabled with effort", `"thinking":{"type":"enabled","budget_tokens":4096},"output_config":{"effort":"medium"},`, &chat.ThinkingAsk{Effort: "medium", BudgetTokens: 4096}, ShowAll},
		{"adaptive", `"thinking":{"type":"adaptive"},`, &chat.ThinkingAsk{Effort: "high"}, ShowAll},
		{"adaptive low", `"thinking":{"type":"adaptive","display":"summarized"},"output_config":{"effort":"low"},`, &chat.ThinkingAsk{Effort: "low"}, ShowAll},
		{"adaptive max", `"thinking":{"type":"adaptive"},"output_config":{"effort":"max"},`, &chat.ThinkingAsk{Effort: "high"}, ShowAll},
		{"omitted", `"thinking":{"type":"adaptive","display":"omitted"},`, &chat.ThinkingAsk{Effort: "high", Hide: true}, ShowSigned},
		{"null", `"thinking":null,`, nil, ShowNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, err := ParseRequest([]byte(`{"model":"m","max_tokens":8000,` + tt.fields + `"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.ask, pr.Request.Thinking); d != "" || pr.Thinking != tt.show {
				t.Errorf("Thinking = %d, want %d; ask (-want +got):\n%s", pr.Thinking, tt.show, d)
			}
		})
	}
}

// TestParseRequestSDK parses a request the official Go SDK sent (recorded
// in its test cassettes): a tool result answering a tool call.
func TestParseRequestSDK(t *testing.T) {
	body, err := os.ReadFile("testdata/sdk_go_request_tool_result.json")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	want := &chat.Request{
		Model:     "claude-3-7-sonnet-latest",
		MaxTokens: 512,
		Messages: []chat.Message{
			{Role: chat.RoleUser, Content: "Weather in SF in fahrenheit?"},
			{Role: chat.RoleAssistant, Content: "I'll get the current weather in San Francisco for you in Fahrenheit.", ToolCalls: []chat.ToolCall{
				{ID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Name: "get_weather", Arguments: `{"city":"San Francisco","units":"fahrenheit"}`},
			}},
			{Role: chat.RoleTool, ToolCallID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Content: "The weather in San Francisco is 68 degrees fahrenheit."},
		},
		Tools: []chat.Tool{{Name: "get_weather", Description: "Get weather", Parameters: json.RawMessage(`{"properties":{"city":{"type":"string"},"units":{"enum":["celsius","fahrenheit"],"type":"string"}},"required":["city"],"type":"object"}`)}},
	}
	if !pr.Stream {
		t.Error("Stream = false")
	}
	if diff := cmp.Diff(want, pr.Request); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestParseRequestErrors(t *testing.T) {
	for _, tt := range parseBad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tt.body))
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("ParseRequest() error = %v, want a *RequestError", err)
			}
			if re.Param != tt.param {
				t.Errorf("Param = %q, want %q (%v)", re.Param, tt.param, err)
			}
			if re.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, tt := range parseGood {
		f.Add([]byte(tt.body))
	}
	for _, tt := range parseBad {
		f.Add([]byte(tt.body))
	}
	if b, err := os.ReadFile("testdata/sdk_go_request_tool_result.json"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pr, err := ParseRequest(b)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RequestError", err)
			}
			return
		}
		r := pr.Request
		if r.Model == "" || r.MaxTokens < 1 || len(r.Messages) == 0 {
			t.Fatalf("accepted a request without model, max_tokens or messages: %s", b)
		}
		for _, caching := range []bool{false, true} {
			enc, err := EncodeRequest(r, EncodeOptions{PromptCaching: caching})
			if err != nil {
				t.Fatalf("cannot encode an accepted request: %v", err)
			}
			if !json.Valid(enc) {
				t.Fatalf("encoded invalid JSON: %s", enc)
			}
			if n := countMarks(t, enc); n > 4 {
				t.Fatalf("%d cache_control marks, Anthropic takes at most 4: %s", n, enc)
			}
		}
	})
}

// countMarks counts the cache_control marks of an encoded request.
func countMarks(t *testing.T, enc []byte) int {
	t.Helper()
	var r struct {
		System   json.RawMessage
		Messages []MessageParam
		Tools    []Tool
	}
	if err := json.Unmarshal(enc, &r); err != nil {
		t.Fatal(err)
	}
	var system []Block
	json.Unmarshal(r.System, &system) // a string has none
	n := 0
	for _, b := range system {
		if b.CacheControl != nil {
			n++
		}
	}
	for _, m := range r.Messages {
		for _, b := range m.Content {
			if b.CacheControl != nil {
				n++
			}
		}
	}
	for _, tl := range r.Tools {
		if tl.CacheControl != nil {
			n++
		}
	}
	return n
}
