package ollama

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
			req:  &chat.Request{Model: "llama3.2", Messages: []chat.Message{{Role: chat.RoleUser, Content: "why is the sky blue?"}}},
			want: `{"model":"llama3.2","messages":[{"role":"user","content":"why is the sky blue?"}],"stream":true}`,
		},
		{
			name: "everything",
			req: &chat.Request{
				Model: "qwen3:8b",
				Messages: []chat.Message{
					{Role: chat.RoleSystem, Content: "Be brief."},
					{Role: chat.RoleUser, Content: "What is this? ", Parts: []chat.Part{
						{Type: chat.PartText, Text: "What is this? "},
						{Type: chat.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo="},
						{Type: chat.PartText, Text: "Be precise."},
						{Type: chat.PartImage, ImageURL: "data:image/jpeg;base64,/9j/4AAQ"},
					}},
					{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_lj18tar0", Name: "read_file", Arguments: `{ "path": "/etc/hostname" }`}}},
					{Role: chat.RoleTool, ToolCallID: "call_lj18tar0", Content: "box-1"},
				},
				Tools: []chat.Tool{
					{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
					{Name: "list"},
				},
				ToolChoice:     &chat.ToolChoice{Mode: "auto"},
				MaxTokens:      64,
				Temperature:    ptr(0.2),
				TopP:           ptr(0.9),
				Stop:           []string{"\n\n"},
				Seed:           ptr(int64(101)),
				ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object","properties":{"age":{"type":"integer"}}}}}`),
			},
			want: `{"model":"qwen3:8b","messages":[
				{"role":"system","content":"Be brief."},
				{"role":"user","content":"What is this? Be precise.","images":["iVBORw0KGgo=","/9j/4AAQ"]},
				{"role":"assistant","content":"","tool_calls":[{"id":"call_lj18tar0","function":{"name":"read_file","arguments":{"path":"/etc/hostname"}}}]},
				{"role":"tool","content":"box-1","tool_name":"read_file","tool_call_id":"call_lj18tar0"}],
				"stream":true,
				"tools":[
					{"type":"function","function":{"name":"read_file","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}},
					{"type":"function","function":{"name":"list"}}],
				"format":{"type":"object","properties":{"age":{"type":"integer"}}},
				"options":{"num_predict":64,"temperature":0.2,"top_p":0.9,"stop":["\n\n"],"seed":101}}`,
		},
		{
			name: "tool choice none drops the tools; json mode",
			req: &chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}},
				Tools: []chat.Tool{{Name: "a"}}, ToolChoice: &chat.ToolChoice{Mode: "none"}, ResponseFormat: json.RawMessage(`{"type":"json_object"}`)},
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"format":"json"}`,
		},
		{
			name: "tool choice tool keeps the named tool",
			req: &chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}},
				Tools: []chat.Tool{{Name: "a"}, {Name: "b"}}, ToolChoice: &chat.ToolChoice{Mode: "tool", Name: "b"}, Temperature: ptr(0.0)},
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"tools":[{"type":"function","function":{"name":"b"}}],"options":{"temperature":0}}`,
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

// TestEncodeRequestThink: think follows the ask (false for "none", a
// level for gpt-oss only), and an assistant turn's thinking is not sent.
func TestEncodeRequestThink(t *testing.T) {
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "q"},
		{Role: chat.RoleAssistant, Content: "a", Thinking: []chat.ThinkingBlock{{Text: "earlier thought"}}}, {Role: chat.RoleUser, Content: "q2"}}
	tests := []struct {
		model string
		ask   *chat.ThinkingAsk
		want  string // the think member, "" when absent
	}{
		{"qwen3:8b", nil, ""},
		{"qwen3:8b", &chat.ThinkingAsk{}, "true"},
		{"qwen3:8b", &chat.ThinkingAsk{Effort: "high"}, "true"},
		{"deepseek-r1", &chat.ThinkingAsk{Effort: "none"}, "false"},
		{"gpt-oss:20b", &chat.ThinkingAsk{Effort: "none"}, "false"},
		{"gpt-oss:20b", &chat.ThinkingAsk{Effort: "high"}, `"high"`},
		{"gpt-oss:120b", &chat.ThinkingAsk{Effort: "minimal"}, `"low"`},
		{"gpt-oss:20b", &chat.ThinkingAsk{BudgetTokens: 10000}, `"medium"`},
		{"gpt-oss:20b", &chat.ThinkingAsk{}, "true"},
	}
	for _, tt := range tests {
		b, err := EncodeRequest(&chat.Request{Model: tt.model, Messages: msgs, Thinking: tt.ask})
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Think json.RawMessage `json:"think"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		if string(body.Think) != tt.want {
			t.Errorf("%s %+v: think = %s, want %s", tt.model, tt.ask, body.Think, tt.want)
		}
		if bytes.Contains(b, []byte("earlier thought")) {
			t.Errorf("an assistant turn's thinking was sent: %s", b)
		}
	}
}

func TestEncodeRequestErrors(t *testing.T) {
	tests := []struct {
		name string
		req  *chat.Request
		want string
	}{
		{"several choices", &chat.Request{N: 2}, "one choice"},
		{"image url", &chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartImage, ImageURL: "https://example.com/a.png"}}}}}, "inline images only"},
		{"arguments not an object", &chat.Request{Messages: []chat.Message{{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{Name: "f", Arguments: `"x"`}}}}}, "JSON object"},
		{"unknown tool", &chat.Request{Tools: []chat.Tool{{Name: "a"}}, ToolChoice: &chat.ToolChoice{Mode: "tool", Name: "b"}}, "no tool named"},
		{"unknown role", &chat.Request{Messages: []chat.Message{{Role: "critic"}}}, "unknown role"},
		{"bad response format", &chat.Request{ResponseFormat: json.RawMessage(`[]`)}, "response_format"},
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
