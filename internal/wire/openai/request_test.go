package openai

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

func TestParseRequest(t *testing.T) {
	body := `{"model":"chat","stream":true,"stream_options":{"include_usage":true},
		"messages":[
			{"role":"system","content":"be brief"},
			{"role":"user","content":[{"type":"text","text":"look: "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"42"}],
		"max_completion_tokens":50,"temperature":0,"n":2,"stop":"END","seed":7,
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
		"tool_choice":{"type":"function","function":{"name":"f"}},
		"logprobs":true,"metadata":{"k":"v"}}`
	pr, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := pr.Request
	if !pr.Stream || !pr.IncludeUsage || r.Model != "chat" || r.MaxTokens != 50 || *r.Temperature != 0 || r.N != 2 || *r.Seed != 7 {
		t.Errorf("scalars: %+v %+v", pr, r)
	}
	if diff := cmp.Diff([]string{"END"}, r.Stop); diff != "" {
		t.Error(diff)
	}
	if len(r.Messages) != 4 || r.Messages[0].Role != chat.RoleSystem || r.Messages[1].Content != "look: " || r.Messages[1].Parts[1].MediaType != "image/png" || r.Messages[1].Parts[1].Data != "AAAA" {
		t.Errorf("messages: %+v", r.Messages)
	}
	if tc := r.Messages[2].ToolCalls; len(tc) != 1 || tc[0].Name != "f" || r.Messages[3].ToolCallID != "c1" {
		t.Errorf("tool turns: %+v", r.Messages[2:])
	}
	if r.ToolChoice == nil || r.ToolChoice.Mode != "tool" || r.ToolChoice.Name != "f" || len(r.Tools) != 1 {
		t.Errorf("tools: %+v %+v", r.Tools, r.ToolChoice)
	}
	if string(r.Extra["logprobs"]) != "true" || len(r.Extra) != 2 {
		t.Errorf("extra: %v", r.Extra)
	}
	// Round trip to an upstream keeps the extras and asks for usage.
	enc, err := EncodeRequest(r, "")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	json.Unmarshal(enc, &m)
	if string(m["stream_options"]) != `{"include_usage":true}` || string(m["logprobs"]) != "true" || string(m["max_tokens"]) != "50" {
		t.Errorf("encoded: %s", enc)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","function":{"name":"f","arguments":"{}"}}]}],"stop":["a"],"n":3}`,
		`{"model":"m","reasoning_effort":"low","thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"assistant","content":null,"reasoning_content":"r","thinking_blocks":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"}]}]}`,
	} {
		f.Add([]byte(s))
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
		if pr.Request.Model == "" || len(pr.Request.Messages) == 0 {
			t.Fatalf("accepted a request without model or messages: %s", b)
		}
		if _, err := EncodeRequest(pr.Request, ""); err != nil {
			t.Fatalf("cannot re-encode an accepted request: %v", err)
		}
	})
}

// TestEncodeToolImages: a tool message takes text only, so the images of
// a run of tool results (from an Anthropic client's tool_result, or a
// Responses function_call_output) follow the run as one user message.
func TestEncodeToolImages(t *testing.T) {
	img := chat.ImagePart("data:image/png;base64,AAAA")
	req := &chat.Request{Model: "m", Messages: []chat.Message{
		{Role: chat.RoleUser, Content: "shoot"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "shot", Arguments: "{}"}, {ID: "c2", Name: "time", Arguments: "{}"}}},
		{Role: chat.RoleTool, ToolCallID: "c1", Content: "the screen", Parts: []chat.Part{{Type: chat.PartText, Text: "the screen"}, img}},
		{Role: chat.RoleTool, ToolCallID: "c2", Content: "noon"},
		{Role: chat.RoleUser, Content: "what is on it?"},
	}}
	b, err := EncodeRequest(req, "")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Messages []struct {
			Role       string          `json:"role"`
			ToolCallID string          `json:"tool_call_id"`
			Content    json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range got.Messages {
		roles = append(roles, m.Role)
	}
	if d := cmp.Diff([]string{"user", "assistant", "tool", "tool", "user", "user"}, roles); d != "" {
		t.Fatalf("roles (-want +got):\n%s\n%s", d, b)
	}
	if c := string(got.Messages[2].Content); c != `"the screen"` {
		t.Errorf("the tool message's content is %s, want its text only", c)
	}
	if c := string(got.Messages[4].Content); c != `[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]` {
		t.Errorf("the images' message is %s", c)
	}
}
