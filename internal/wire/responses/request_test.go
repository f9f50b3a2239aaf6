package responses

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/openai"
	"github.com/google/go-cmp/cmp"
)

func f64(v float64) *float64 { return &v }
func boolp(v bool) *bool     { return &v }

var parseGood = []struct {
	name   string
	body   string
	stream bool
	want   chat.Request
}{
	{
		name: "string input",
		body: `{"model":"m","input":"Hello"}`,
		want: chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hello"}}},
	},
	{
		// What the Vercel AI SDK sends for a prompt with a system message.
		name:   "AI SDK shape",
		body:   `{"model":"m","input":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"input_text","text":"Hi"}]}],"stream":true,"max_output_tokens":50,"temperature":0.5,"top_p":0.9,"store":false,"include":["reasoning.encrypted_content"]}`,
		stream: true,
		want: chat.Request{Model: "m", MaxTokens: 50, Temperature: f64(0.5), TopP: f64(0.9), Messages: []chat.Message{
			{Role: chat.RoleSystem, Content: "Be brief."},
			{Role: chat.RoleUser, Content: "Hi", Parts: nil},
		}},
	},
	{
		name: "tools round trip",
		body: `{"model":"m","instructions":"You help.","input":[
			{"type":"message","role":"user","content":"Weather?"},
			{"role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},
			{"type":"function_call","call_id":"c1","name":"weather","arguments":"{\"city\":\"Oslo\"}"},
			{"type":"function_call","call_id":"c2","name":"time","arguments":"{}"},
			{"type":"reasoning","id":"rs_1","summary":[]},
			{"type":"function_call_output","call_id":"c1","output":"sunny"},
			{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"noon"}]},
			{"role":"developer","content":"Answer in English."}
		],"tools":[{"type":"function","name":"weather","description":"Weather","parameters":{"type":"object"},"strict":true}],
		"tool_choice":{"type":"function","name":"weather"},"parallel_tool_calls":false,"user":"u1"}`,
		want: chat.Request{
			Model: "m", User: "u1", ParallelToolCalls: boolp(false),
			Messages: []chat.Message{
				{Role: chat.RoleSystem, Content: "You help."},
				{Role: chat.RoleUser, Content: "Weather?"},
				{Role: chat.RoleAssistant, Content: "Let me look.", ToolCalls: []chat.ToolCall{
					{ID: "c1", Name: "weather", Arguments: `{"city":"Oslo"}`},
					{ID: "c2", Name: "time", Arguments: `{}`},
				}},
				{Role: chat.RoleTool, ToolCallID: "c1", Content: "sunny"},
				{Role: chat.RoleTool, ToolCallID: "c2", Content: "noon"},
				{Role: chat.RoleSystem, Content: "Answer in English."},
			},
			Tools:      []chat.Tool{{Name: "weather", Description: "Weather", Parameters: json.RawMessage(`{"type":"object"}`)}},
			ToolChoice: &chat.ToolChoice{Mode: "tool", Name: "weather"},
		},
	},
	{
		// A tool that returns an image: it stays on the tool message
		// (the upstream encoders put it where their API takes it).
		name: "image in a function call's output",
		body: `{"model":"m","input":[
			{"type":"function_call","call_id":"c1","name":"shot","arguments":"{}"},
			{"type":"function_call","call_id":"c2","name":"time","arguments":"{}"},
			{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"the screen"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]},
			{"type":"function_call_output","call_id":"c2","output":"noon"},
			{"role":"user","content":"What is on it?"}
		]}`,
		want: chat.Request{Model: "m", Messages: []chat.Message{
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "shot", Arguments: "{}"}, {ID: "c2", Name: "time", Arguments: "{}"}}},
			{Role: chat.RoleTool, ToolCallID: "c1", Content: "the screen", Parts: []chat.Part{
				{Type: chat.PartText, Text: "the screen"},
				{Type: chat.PartImage, ImageURL: "data:image/png;base64,AAAA", MediaType: "image/png", Data: "AAAA"},
			}},
			{Role: chat.RoleTool, ToolCallID: "c2", Content: "noon"},
			{Role: chat.RoleUser, Content: "What is on it?"},
		}},
	},
	{
		// The Vercel AI SDK with store on refers to earlier answers.
		name: "item reference",
		body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"item_reference","id":"msg_0_resp_1"},{"id":"msg_0_resp_1"},{"role":"user","content":[{"type":"input_text","text":"More"}]}]}`,
		want: chat.Request{Model: "m", Messages: []chat.Message{
			{Role: chat.RoleUser, Content: "Hi"},
			{Role: chat.RoleAssistant, Content: "Earlier answer."},
			{Role: chat.RoleAssistant, Content: "Earlier answer."},
			{Role: chat.RoleUser, Content: "More"},
		}},
	},
	{
		name: "image and json schema",
		body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"What is it?"},{"type":"input_image","image_url":"https://example.com/a.png","detail":"auto"}]}],
		"tool_choice":"required","text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object"},"strict":true}}}`,
		want: chat.Request{
			Model: "m",
			Messages: []chat.Message{{Role: chat.RoleUser, Content: "What is it?", Parts: []chat.Part{
				{Type: chat.PartText, Text: "What is it?"}, {Type: chat.PartImage, ImageURL: "https://example.com/a.png"},
			}}},
			ToolChoice:     &chat.ToolChoice{Mode: "required"},
			ResponseFormat: json.RawMessage(`{"json_schema":{"name":"answer","schema":{"type":"object"},"strict":true},"type":"json_schema"}`),
		},
	},
}

// known resolves the one earlier answer the tests know.
func known(id string) (string, bool) {
	if id == "msg_0_resp_1" {
		return "Earlier answer.", true
	}
	return "", false
}

func TestParseRequest(t *testing.T) {
	for _, tt := range parseGood {
		t.Run(tt.name, func(t *testing.T) {
			pr, err := ParseRequest([]byte(tt.body), known)
			if err != nil {
				t.Fatal(err)
			}
			if pr.Stream != tt.stream || pr.Background {
				t.Errorf("stream = %v, background = %v; want %v, false", pr.Stream, pr.Background, tt.stream)
			}
			if d := cmp.Diff(tt.want, *pr.Request); d != "" {
				t.Errorf("request (-want +got):\n%s", d)
			}
		})
	}
}

// TestParseBackground: background is read, with store left out or true;
// the refusal with store false is among parseBad.
func TestParseBackground(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","input":"x","background":true}`,
		`{"model":"m","input":"x","background":true,"store":true,"stream":true}`,
	} {
		pr, err := ParseRequest([]byte(body), nil)
		if err != nil || !pr.Background {
			t.Errorf("%s: %+v, %v; want background", body, pr, err)
		}
	}
}

var parseBad = []struct {
	body, param, msg string
}{
	{`[]`, "", "expected object"},
	{`{"input":"x"}`, "model", "required"},
	{`{"model":"m"}`, "input", "required"},
	{`{"model":"m","input":[]}`, "input", "at least one message"},
	{`{"model":"m","input":[{"role":"system","content":"only system"}]}`, "input", "at least one message"},
	{`{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id", "keeps no responses"},
	{`{"model":"m","input":"x","conversation":"conv_1"}`, "conversation", "not supported"},
	{`{"model":"m","input":"x","max_output_tokens":0}`, "max_output_tokens", "at least 1"},
	{`{"model":"m","input":"x","max_output_tokens":1.5}`, "", "max_output_tokens: expected integer, got number"},
	{`{"model":"m","input":"x","stream":"yes"}`, "", "stream: expected boolean, got string"},
	{`{"model":"m","input":42}`, "input", "must be a string or an array"},
	{`{"model":"m","input":[{"role":"robot","content":"x"}]}`, "input[0].role", "not one of"},
	{`{"model":"m","input":[{"role":"user"}]}`, "input[0].content", "required"},
	{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type", "not supported"},
	{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0]", "needs an image_url"},
	{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].id", "store: false"},
	{`{"model":"m","input":[{"type":"computer_call_output","id":"x"}]}`, "input[0].type", "not supported"},
	{`{"model":"m","input":[{"type":"function_call","name":"f"}]}`, "input[0]", "call_id and name"},
	{`{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", "required"},
	{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].output[0].type", "not supported in a function call's output"},
	{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image"}]}]}`, "input[0].output[0]", "needs an image_url"},
	{`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type", "only function tools"},
	{`{"model":"m","input":"x","tool_choice":"sometimes"}`, "tool_choice", "not one of"},
	{`{"model":"m","input":"x","text":{"format":{"type":"xml"}}}`, "text.format.type", "not one of"},
	{`{"model":"m","input":"x"} {}`, "", "data after"},
	{`{"model":"m","input":"x","background":true,"store":false}`, "background", "requires store=true"},
	{`{"model":"m","input":"x","background":"yes"}`, "", "background: expected boolean, got string"},
}

func TestParseRequestErrors(t *testing.T) {
	for _, tt := range parseBad {
		_, err := ParseRequest([]byte(tt.body), known)
		var re *RequestError
		if !errors.As(err, &re) {
			t.Errorf("%s: error %v, want a *RequestError", tt.body, err)
			continue
		}
		if re.Param != tt.param || !strings.Contains(re.Error(), tt.msg) {
			t.Errorf("%s: got param %q, %q; want param %q, containing %q", tt.body, re.Param, re.Error(), tt.param, tt.msg)
		}
		if strings.Contains(re.Error(), "Go ") || strings.Contains(re.Error(), "*") || strings.Contains(re.Error(), "json.RawMessage") {
			t.Errorf("%s: message leaks Go types: %q", tt.body, re.Error())
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, tt := range parseGood {
		f.Add([]byte(tt.body))
	}
	for _, tt := range parseBad {
		f.Add([]byte(tt.body))
	}
	f.Add([]byte(`{"model":"m","reasoning":{"effort":"low","summary":"auto"},"include":["reasoning.encrypted_content"],"input":[` +
		`{"type":"reasoning","id":"rs_1","encrypted_content":"e","summary":[{"type":"summary_text","text":"s"}]},` +
		`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"reasoning","id":"rs_2"},{"role":"user","content":"x"}]}`))
	f.Add([]byte(`{"model":"m","reasoning":{"effort":7,"summary":null},"include":"x","input":[{"type":"reasoning","summary":"s"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		pr, err := ParseRequest(b, known)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RequestError", err)
			}
			return
		}
		r := pr.Request
		if r.Model == "" || !hasNonSystem(r.Messages) {
			t.Fatalf("accepted a request without model or messages: %s", b)
		}
		// Whatever was accepted can be sent to an OpenAI-compatible upstream.
		if _, err := openai.EncodeRequest(r, ""); err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
	})
}
