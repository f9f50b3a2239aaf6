package anthropic

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got, indented, with testdata/name, or rewrites the file
// with -update.
func golden(t *testing.T, name string, got []byte) {
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

func TestEncodeRequestGolden(t *testing.T) {
	tests := []struct {
		name string
		req  chat.Request
		opts EncodeOptions
	}{
		{
			// OpenAI-only fields, Extra and Hints are not sent; the
			// temperature is clamped to Anthropic's maximum, and top_p is
			// not sent with it.
			name: "encode_basic.json",
			req: chat.Request{
				Model: "claude-sonnet-4-5",
				Messages: []chat.Message{
					{Role: chat.RoleSystem, Content: "Be brief & <polite>."},
					{Role: chat.RoleUser, Content: "Hello"},
					{Role: chat.RoleAssistant, Content: "Hi!"},
					{Role: chat.RoleUser, Content: "Weather?"},
				},
				Temperature: ptr(1.5), TopP: ptr(0.9), Stop: []string{"END"}, User: "u-42",
				N: 2, Seed: ptr(int64(7)), ResponseFormat: json.RawMessage(`{"type":"json_object"}`),
				Extra: map[string]json.RawMessage{"logprobs": json.RawMessage("true")},
				Hints: chat.Hints{Sim: "fail"},
			},
		},
		{
			// Tool calls, tool results merged into one user turn with the
			// user's next words, consecutive user turns merged, arguments
			// that are not an object wrapped, empty ones {}.
			name: "encode_tools.json",
			opts: EncodeOptions{DefaultMaxTokens: 1000},
			req: chat.Request{
				Model: "claude-haiku-4-5",
				Messages: []chat.Message{
					{Role: chat.RoleSystem, Content: "You check the weather."},
					{Role: chat.RoleSystem, Content: "Use celsius."},
					{Role: chat.RoleUser, Content: "Paris"},
					{Role: chat.RoleUser, Content: "and Tokyo?"},
					{Role: chat.RoleAssistant, Content: "Checking.", ToolCalls: []chat.ToolCall{
						{ID: "call_1", Name: "get_weather", Arguments: `{ "city": "Paris" }`},
						{ID: "call_2", Name: "get_weather", Arguments: `{"city": "Tok`},
						{ID: "call_3", Name: "now", Arguments: ""},
					}},
					{Role: chat.RoleTool, ToolCallID: "call_1", Content: "18°C"},
					{Role: chat.RoleTool, ToolCallID: "call_2", Content: "see the map", Parts: []chat.Part{
						{Type: chat.PartText, Text: "see the map"},
						{Type: chat.PartImage, MediaType: "image/png", Data: "iVBORw0KGgo=", ImageURL: "data:image/png;base64,iVBORw0KGgo="},
					}},
					{Role: chat.RoleTool, ToolCallID: "call_3"},
					{Role: chat.RoleUser, Content: "Thanks"},
				},
				Tools: []chat.Tool{
					{Name: "get_weather", Description: "Weather in a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
					{Name: "now"},
				},
				ToolChoice:        &chat.ToolChoice{Mode: "required"},
				ParallelToolCalls: ptr(false),
			},
		},
		{
			// With caching, the system prompt is blocks and the marked
			// messages' last blocks carry cache_control: the stable system
			// prompt, not the per-question context after it. So does the
			// last tool, which begins every prefix.
			name: "encode_caching.json",
			opts: EncodeOptions{PromptCaching: true, DefaultMaxTokens: 999},
			req: chat.Request{
				Model:     "claude-opus-4-1",
				MaxTokens: 300,
				Messages: []chat.Message{
					{Role: chat.RoleSystem, Content: "You are firstword's assistant.", CacheBreakpoint: true},
					{Role: chat.RoleSystem, Content: "Context for this question:\n\nreturns.md"},
					{Role: chat.RoleUser, Content: "Look:", CacheBreakpoint: true, Parts: []chat.Part{
						{Type: chat.PartText, Text: "Look:"},
						{Type: chat.PartImage, MediaType: "image/jpeg", Data: "/9j/4AAQ"},
						{Type: chat.PartImage, ImageURL: "https://example.com/cat.png"},
					}},
					{Role: chat.RoleAssistant, Content: "A cat."},
					{Role: chat.RoleUser, Content: "Its name?"},
				},
				Tools:             []chat.Tool{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}},
				ToolChoice:        &chat.ToolChoice{Mode: "tool", Name: "lookup"},
				ParallelToolCalls: ptr(false),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeRequest(&tt.req, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, got)
		})
	}
}

// TestEncodeRequestCacheMarks checks where cache_control goes: the last
// block of each marked message (the last four), and the last tool when a
// message is marked and fewer than four are.
func TestEncodeRequestCacheMarks(t *testing.T) {
	turns := func(n, marked int) []chat.Message {
		var msgs []chat.Message
		for i := range n {
			role := chat.RoleUser
			if i%2 == 1 {
				role = chat.RoleAssistant
			}
			msgs = append(msgs, chat.Message{Role: role, Content: string(rune('a' + i)), CacheBreakpoint: i >= n-marked})
		}
		return msgs
	}
	tools := []chat.Tool{{Name: "first"}, {Name: "last"}}
	tests := []struct {
		name  string
		msgs  []chat.Message
		tools []chat.Tool
		off   bool
		want  []string // the marked blocks' texts and tools' names
	}{
		{name: "the last four of six", msgs: turns(6, 6), want: []string{"c", "d", "e", "f"}},
		{name: "three and the tools", msgs: turns(6, 3), tools: tools, want: []string{"d", "e", "f", "tool last"}},
		{name: "four: no room for the tools", msgs: turns(6, 4), tools: tools, want: []string{"c", "d", "e", "f"}},
		{name: "nothing marked: not the tools either", msgs: turns(3, 0), tools: tools},
		{name: "without PromptCaching nothing", msgs: turns(6, 2), tools: tools, off: true},
		{
			// An empty message has no block: its mark goes on the block
			// before it, which ends the same prefix.
			name: "an empty marked message",
			msgs: []chat.Message{
				{Role: chat.RoleSystem, Content: "sys"}, {Role: chat.RoleUser, Content: "q"},
				{Role: chat.RoleAssistant, CacheBreakpoint: true}, {Role: chat.RoleUser, Content: "q2"},
			},
			want: []string{"q"},
		},
		{
			name: "an empty marked first message",
			msgs: []chat.Message{{Role: chat.RoleSystem, Content: "sys"}, {Role: chat.RoleAssistant, CacheBreakpoint: true}, {Role: chat.RoleUser, Content: "q"}},
			want: []string{"sys"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeRequest(&chat.Request{Model: "m", Messages: tt.msgs, Tools: tt.tools}, EncodeOptions{PromptCaching: !tt.off})
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				System   json.RawMessage
				Messages []MessageParam
				Tools    []Tool
			}
			if err := json.Unmarshal(got, &r); err != nil {
				t.Fatal(err)
			}
			var system []Block
			json.Unmarshal(r.System, &system) // a string has no marks
			var marked []string
			for _, b := range system {
				if b.CacheControl != nil {
					marked = append(marked, b.Text)
				}
			}
			for _, m := range r.Messages {
				for _, b := range m.Content {
					if b.CacheControl != nil {
						marked = append(marked, b.Text)
					}
				}
			}
			for _, tl := range r.Tools {
				if tl.CacheControl != nil {
					marked = append(marked, "tool "+tl.Name)
				}
			}
			if diff := cmp.Diff(tt.want, marked); diff != "" {
				t.Errorf("marked (-want +got):\n%s", diff)
			}
			if n := countMarks(t, got); n != len(tt.want) {
				t.Errorf("%d cache_control in %s", n, got)
			}
		})
	}
}

func TestEncodeRequestToolChoice(t *testing.T) {
	tools := []chat.Tool{{Name: "f"}}
	tests := []struct {
		choice   *chat.ToolChoice
		parallel *bool
		tools    []chat.Tool
		want     string
	}{
		{&chat.ToolChoice{Mode: "auto"}, nil, tools, `{"type":"auto"}`},
		{&chat.ToolChoice{Mode: "required"}, nil, tools, `{"type":"any"}`},
		{&chat.ToolChoice{Mode: "tool", Name: "f"}, nil, tools, `{"type":"tool","name":"f"}`},
		{&chat.ToolChoice{Mode: "none"}, ptr(false), tools, `{"type":"none"}`},
		{nil, ptr(false), tools, `{"type":"auto","disable_parallel_tool_use":true}`},
		{nil, ptr(true), tools, ``},
		{&chat.ToolChoice{Mode: "required"}, nil, nil, ``}, // no tools, no tool_choice
	}
	for _, tt := range tests {
		got, err := EncodeRequest(&chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, Tools: tt.tools, ToolChoice: tt.choice, ParallelToolCalls: tt.parallel}, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		json.Unmarshal(got, &m)
		if string(m["tool_choice"]) != tt.want {
			t.Errorf("%+v, parallel %v: tool_choice = %s, want %s", tt.choice, tt.parallel, m["tool_choice"], tt.want)
		}
	}
}

func TestEncodeRequestErrors(t *testing.T) {
	tests := []struct {
		name string
		req  chat.Request
		want string
	}{
		{"tool message without id", chat.Request{Messages: []chat.Message{{Role: chat.RoleTool, Content: "x"}}}, "messages[0]"},
		{"tool call without id", chat.Request{Messages: []chat.Message{{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{Name: "f"}}}}}, "messages[0].tool_calls[0]"},
		{"unknown role", chat.Request{Messages: []chat.Message{{Role: "developer", Content: "x"}}}, "messages[0]"},
		{"unknown tool choice", chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, Tools: []chat.Tool{{Name: "f"}}, ToolChoice: &chat.ToolChoice{Mode: "sometimes"}}, "tool_choice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EncodeRequest(&tt.req, EncodeOptions{})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("EncodeRequest() error = %v, want one about %s", err, tt.want)
			}
		})
	}
}

func TestToolInput(t *testing.T) {
	for in, want := range map[string]string{
		"":                    `{}`,
		"  ":                  `{}`,
		`{"a": [1, 2]}`:       `{"a":[1,2]}`,
		`{"a":`:               `{"_raw":"{\"a\":"}`,
		`[1]`:                 `{"_raw":"[1]"}`,
		`"just a string"`:     `{"_raw":"\"just a string\""}`,
		`{"html":"<b>&</b>"}`: `{"html":"<b>&</b>"}`,
	} {
		if got := string(toolInput(in)); got != want {
			t.Errorf("toolInput(%q) = %s, want %s", in, got, want)
		}
	}
}
