package gemini

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

func ptr[T any](v T) *T { return &v }

func TestEncodeRequest(t *testing.T) {
	tests := []struct {
		name string
		req  *chat.Request
		want string
	}{
		{
			name: "text only",
			req:  &chat.Request{Model: "gemini-2.5-flash", Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}},
			want: `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`,
		},
		{
			name: "everything",
			req: &chat.Request{
				Model: "gemini-2.5-flash",
				Messages: []chat.Message{
					{Role: chat.RoleSystem, Content: "Be brief."},
					{Role: chat.RoleUser, Content: "What is in these? ", Parts: []chat.Part{
						{Type: chat.PartText, Text: "What is in these? "},
						{Type: chat.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
						{Type: chat.PartImage, ImageURL: "data:image/webp;base64,UklGRg=="},
						{Type: chat.PartImage, ImageURL: "https://example.com/cat.jpg", MediaType: "image/jpeg"},
					}},
					{Role: chat.RoleAssistant, Content: "Checking.", ToolCalls: []chat.ToolCall{
						{ID: "call_0", Name: "lookup", Arguments: `{ "q" : "cat" }`},
						{ID: "call_1", Name: "weather", Arguments: ""},
					}},
					{Role: chat.RoleTool, ToolCallID: "call_0", Content: `{"found": true}`},
					{Role: chat.RoleTool, ToolCallID: "call_1", Content: "sunny, 21 °C"},
					{Role: chat.RoleSystem, Content: "Answer in French."},
					{Role: chat.RoleUser, Content: "And now?"},
				},
				Tools: []chat.Tool{
					{Name: "lookup", Description: "Look a word up.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`)},
					{Name: "weather"},
				},
				ToolChoice:     &chat.ToolChoice{Mode: "tool", Name: "lookup"},
				MaxTokens:      256,
				Temperature:    ptr(0.0),
				TopP:           ptr(0.9),
				Stop:           []string{"END"},
				N:              2,
				Seed:           ptr(int64(7)),
				ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}`),
			},
			want: `{
				"contents":[
					{"role":"user","parts":[
						{"text":"What is in these? "},
						{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
						{"inlineData":{"mimeType":"image/webp","data":"UklGRg=="}},
						{"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/cat.jpg"}}]},
					{"role":"model","parts":[
						{"text":"Checking."},
						{"functionCall":{"name":"lookup","args":{"q":"cat"}},"thoughtSignature":"skip_thought_signature_validator"},
						{"functionCall":{"name":"weather","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},
					{"role":"user","parts":[
						{"functionResponse":{"name":"lookup","response":{"found":true}}},
						{"functionResponse":{"name":"weather","response":{"output":"sunny, 21 °C"}}},
						{"text":"And now?"}]}],
				"systemInstruction":{"parts":[{"text":"Be brief."},{"text":"Answer in French."}]},
				"tools":[{"functionDeclarations":[
					{"name":"lookup","description":"Look a word up.","parametersJsonSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}},
					{"name":"weather"}]}],
				"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["lookup"]}},
				"generationConfig":{"candidateCount":2,"stopSequences":["END"],"maxOutputTokens":256,"temperature":0,"topP":0.9,"seed":7,
					"responseMimeType":"application/json","responseJsonSchema":{"type":"object"}}}`,
		},
		{
			name: "tool call ids repeat across turns: the nearest call names the result",
			req: &chat.Request{Messages: []chat.Message{
				{Role: chat.RoleUser, Content: "a"},
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_0", Name: "first", Arguments: "{}"}}},
				{Role: chat.RoleTool, ToolCallID: "call_0", Content: "1"},
				{Role: chat.RoleAssistant, Content: "ok"},
				{Role: chat.RoleUser, Content: "b"},
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_0", Name: "second", Arguments: "{}"}}},
				{Role: chat.RoleTool, ToolCallID: "call_0", Content: "2"},
			}},
			want: `{"contents":[
				{"role":"user","parts":[{"text":"a"}]},
				{"role":"model","parts":[{"functionCall":{"name":"first","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},
				{"role":"user","parts":[{"functionResponse":{"name":"first","response":{"output":"1"}}}]},
				{"role":"model","parts":[{"text":"ok"}]},
				{"role":"user","parts":[{"text":"b"}]},
				{"role":"model","parts":[{"functionCall":{"name":"second","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},
				{"role":"user","parts":[{"functionResponse":{"name":"second","response":{"output":"2"}}}]}]}`,
		},
		{
			name: "tool choice modes and json mode",
			req: &chat.Request{
				Messages:       []chat.Message{{Role: chat.RoleUser, Content: "x"}, {Role: chat.RoleAssistant}, {Role: chat.RoleUser, Content: "y"}},
				ToolChoice:     &chat.ToolChoice{Mode: "required"},
				ResponseFormat: json.RawMessage(`{"type":"json_object"}`),
			},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"},{"text":"y"}]}],
				"toolConfig":{"functionCallingConfig":{"mode":"ANY"}},
				"generationConfig":{"responseMimeType":"application/json"}}`,
		},
		{
			name: "none",
			req:  &chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, ToolChoice: &chat.ToolChoice{Mode: "none"}, N: 1},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeRequest(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, []byte(tt.want)); err != nil {
				t.Fatal(err)
			}
			if string(got) != want.String() {
				t.Errorf("EncodeRequest() =\n%s\nwant\n%s", got, want.String())
			}
		})
	}
}

func TestEncodeRequestErrors(t *testing.T) {
	tests := []struct {
		name string
		req  *chat.Request
		want string
	}{
		{"tool result without call", &chat.Request{Messages: []chat.Message{{Role: chat.RoleTool, ToolCallID: "x", Content: "1"}}}, "answers no earlier tool call"},
		{"arguments not an object", &chat.Request{Messages: []chat.Message{{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "a", Name: "f", Arguments: "[1]"}}}}}, "JSON object"},
		{"arguments not json", &chat.Request{Messages: []chat.Message{{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "a", Name: "f", Arguments: "{"}}}}}, "JSON object"},
		{"unknown tool choice", &chat.Request{ToolChoice: &chat.ToolChoice{Mode: "sometimes"}}, "tool_choice"},
		{"unknown role", &chat.Request{Messages: []chat.Message{{Role: "critic", Content: "x"}}}, "unknown role"},
		{"image without data", &chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartImage}}}}}, "neither data nor URL"},
		{"bad response format", &chat.Request{ResponseFormat: json.RawMessage(`{"type":"xml"}`)}, "response_format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EncodeRequest(tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("EncodeRequest() error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
