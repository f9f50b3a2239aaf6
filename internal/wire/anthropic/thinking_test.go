package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// A signed block, a signed block whose text is empty (display omitted), a
// redacted block, and blocks that cannot go back to Anthropic: unsigned
// thinking and another provider's signature.
var assistantThinking = []chat.ThinkingBlock{
	{Text: "The user wants Paris.\n", Signature: "EqQBCgIYAhIM1gbc", Format: chat.ThinkingAnthropic},
	{Signature: "EuYBCkQYAiJAk3s0", Format: chat.ThinkingAnthropic},
	{Redacted: "EmwKAhgBEgy3va3p", Format: chat.ThinkingAnthropic},
	{Text: "unsigned, from a failed attempt"},
	{Text: "Gemini's", Signature: "CiQB0e2Kb", Format: chat.ThinkingGemini},
}

func TestEncodeRequestThinkingGolden(t *testing.T) {
	turns := []chat.Message{
		{Role: chat.RoleUser, Content: "Weather in Paris?"},
		{Role: chat.RoleAssistant, Content: "Checking.", Thinking: assistantThinking, ToolCalls: []chat.ToolCall{
			{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		}},
		{Role: chat.RoleTool, ToolCallID: "toolu_1", Content: "18°C"},
	}
	tools := []chat.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
	tests := []struct {
		name string
		req  chat.Request
	}{
		{
			// An older model: enabled with a budget, max_tokens the answer
			// cap plus the budget, the temperature and a low top_p not
			// sent; the signed blocks first in the assistant turn, as
			// they came.
			name: "encode_thinking_budget.json",
			req: chat.Request{
				Model: "claude-sonnet-4-5", MaxTokens: 1000, Messages: turns, Tools: tools,
				Temperature: ptr(0.3), TopP: ptr(0.5),
				Thinking: &chat.ThinkingAsk{Effort: "medium"},
			},
		},
		{
			// A newer model: adaptive with an effort and summarised
			// display; max_tokens leaves room for what the effort buys.
			name: "encode_thinking_adaptive.json",
			req: chat.Request{
				Model: "claude-opus-4-6", MaxTokens: 1000, Messages: turns, Tools: tools, TopP: ptr(0.97),
				Thinking: &chat.ThinkingAsk{Effort: "high"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeRequest(&tt.req, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, got)
		})
	}
}

// TestAskThinking checks the per-model mapping of a thinking ask.
func TestAskThinking(t *testing.T) {
	type want struct {
		Thinking  *ThinkingParam
		Output    *OutputConfig
		MaxTokens int
	}
	user := []chat.Message{{Role: chat.RoleUser, Content: "hi"}}
	tests := []struct {
		name      string
		model     string
		maxTokens int
		ask       *chat.ThinkingAsk
		choice    *chat.ToolChoice
		want      want
	}{
		{"no ask", "claude-sonnet-4-5", 0, nil, nil, want{MaxTokens: DefaultMaxTokens}},
		{"effort none", "claude-sonnet-4-5", 0, &chat.ThinkingAsk{Effort: "none"}, nil, want{MaxTokens: DefaultMaxTokens}},
		{"a model that cannot think", "claude-3-5-sonnet-20241022", 500, &chat.ThinkingAsk{Effort: "high"}, nil, want{MaxTokens: 500}},
		{"budget from the effort", "claude-3-7-sonnet-20250219", 500, &chat.ThinkingAsk{Effort: "low"},
			nil, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 2048}, MaxTokens: 2548}},
		{"the client's budget, raised to the least", "claude-sonnet-4-20250514", 500, &chat.ThinkingAsk{BudgetTokens: 300},
			nil, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 1024}, MaxTokens: 1524}},
		{"no effort nor budget: a medium budget", "claude-haiku-4-5-20251001", 100, &chat.ThinkingAsk{},
			nil, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 8192}, MaxTokens: 8292}},
		{"the model's output limit shrinks the budget", "claude-opus-4-1-20250805", 30000, &chat.ThinkingAsk{Effort: "high"},
			nil, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 2000}, MaxTokens: 32000}},
		{"then the answer cap", "claude-opus-4-1-20250805", 32000, &chat.ThinkingAsk{Effort: "high"},
			nil, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 1024}, MaxTokens: 32000}},
		{"adaptive, minimal is low", "claude-sonnet-4-6", 500, &chat.ThinkingAsk{Effort: "minimal"},
			nil, want{Thinking: &ThinkingParam{Type: "adaptive", Display: "summarized"}, Output: &OutputConfig{Effort: "low"}, MaxTokens: 1524}},
		{"adaptive from a budget", "anthropic.claude-opus-4-6-v1", 500, &chat.ThinkingAsk{BudgetTokens: 10000},
			nil, want{Thinking: &ThinkingParam{Type: "adaptive", Display: "summarized"}, Output: &OutputConfig{Effort: "medium"}, MaxTokens: 10500}},
		{"hidden thinking is not asked to be displayed", "claude-opus-4-7", 500, &chat.ThinkingAsk{Effort: "low", Hide: true},
			nil, want{Thinking: &ThinkingParam{Type: "adaptive"}, Output: &OutputConfig{Effort: "low"}, MaxTokens: 2548}},
		{"a Claude of no row, from 4.6 on, is adaptive", "claude-fable-5-1-20260301", 500, &chat.ThinkingAsk{Effort: "high"},
			nil, want{Thinking: &ThinkingParam{Type: "adaptive", Display: "summarized"}, Output: &OutputConfig{Effort: "high"}, MaxTokens: 25076}},
		{"a Claude of no row before 4.6 takes a budget", "claude-opus-4-5-20251101", 500, &chat.ThinkingAsk{Effort: "minimal"},
			nil, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 1024}, MaxTokens: 1524}},
		{"Claude 4.0 on Vertex", "claude-opus-4@20250514", 500, &chat.ThinkingAsk{Effort: "minimal"},
			nil, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 1024}, MaxTokens: 1524}},
		{"a later Claude 4 is not 4.0", "claude-sonnet-4-8", 500, &chat.ThinkingAsk{Effort: "minimal"},
			nil, want{Thinking: &ThinkingParam{Type: "adaptive", Display: "summarized"}, Output: &OutputConfig{Effort: "low"}, MaxTokens: 1524}},
		{"another server's model takes a budget", "deepseek-reasoner", 500, &chat.ThinkingAsk{Effort: "minimal"},
			nil, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 1024}, MaxTokens: 1524}},
		{"a forced tool call wins", "claude-sonnet-4-5", 500, &chat.ThinkingAsk{Effort: "low"},
			&chat.ToolChoice{Mode: "required"}, want{MaxTokens: 500}},
		{"tool choice auto thinks", "claude-sonnet-4-5", 500, &chat.ThinkingAsk{Effort: "low"},
			&chat.ToolChoice{Mode: "auto"}, want{Thinking: &ThinkingParam{Type: "enabled", BudgetTokens: 2048}, MaxTokens: 2548}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &chat.Request{Model: tt.model, MaxTokens: tt.maxTokens, Messages: user, Thinking: tt.ask,
				Temperature: ptr(0.5), ToolChoice: tt.choice}
			if tt.choice != nil {
				req.Tools = []chat.Tool{{Name: "f"}}
			}
			out, err := buildRequest(req, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := want{out.Thinking, out.OutputConfig, out.MaxTokens}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if (out.Thinking != nil) == (out.Temperature != nil) {
				t.Errorf("thinking %v with temperature %v: one, not both", out.Thinking, out.Temperature)
			}
		})
	}
}

// TestEncodeRequestThinkingTurns: a tool result answering a turn whose
// thinking was not kept (it came from another provider) is asked without
// thinking, as the API refuses it with; a final assistant turn (a
// prefill) keeps no thinking blocks when thinking is off.
func TestEncodeRequestThinkingTurns(t *testing.T) {
	call := []chat.ToolCall{{ID: "t1", Name: "f", Arguments: "{}"}}
	ask := &chat.ThinkingAsk{Effort: "low"}
	tests := []struct {
		name     string
		msgs     []chat.Message
		ask      *chat.ThinkingAsk
		thinking bool
		last     []string // the block types of the last turn
	}{
		{"tool result after a signed turn thinks", []chat.Message{
			{Role: chat.RoleUser, Content: "go"},
			{Role: chat.RoleAssistant, ToolCalls: call, Thinking: assistantThinking[:1]},
			{Role: chat.RoleTool, ToolCallID: "t1", Content: "ok"},
		}, ask, true, []string{"tool_result"}},
		{"tool result after an unsigned turn does not", []chat.Message{
			{Role: chat.RoleUser, Content: "go"},
			{Role: chat.RoleAssistant, ToolCalls: call, Thinking: assistantThinking[3:]},
			{Role: chat.RoleTool, ToolCallID: "t1", Content: "ok"},
		}, ask, false, []string{"tool_result"}},
		{"a new question after an unsigned tool turn thinks", []chat.Message{
			{Role: chat.RoleUser, Content: "go"},
			{Role: chat.RoleAssistant, ToolCalls: call},
			{Role: chat.RoleTool, ToolCallID: "t1", Content: "ok"},
			{Role: chat.RoleAssistant, Content: "done"},
			{Role: chat.RoleUser, Content: "again"},
		}, ask, true, []string{"text"}},
		{"a prefill without thinking drops its thinking", []chat.Message{
			{Role: chat.RoleUser, Content: "go"},
			{Role: chat.RoleAssistant, Content: "Sure", Thinking: assistantThinking},
		}, nil, false, []string{"text"}},
		{"a prefill with thinking keeps it", []chat.Message{
			{Role: chat.RoleUser, Content: "go"},
			{Role: chat.RoleAssistant, Content: "Sure", Thinking: assistantThinking},
		}, ask, true, []string{"thinking", "thinking", "redacted_thinking", "text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := buildRequest(&chat.Request{Model: "claude-sonnet-4-5", Messages: tt.msgs, Thinking: tt.ask}, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Thinking != nil; got != tt.thinking {
				t.Errorf("thinking asked = %v, want %v", got, tt.thinking)
			}
			var types []string
			for _, b := range out.Messages[len(out.Messages)-1].Content {
				types = append(types, b.Type)
			}
			if diff := cmp.Diff(tt.last, types); diff != "" {
				t.Errorf("last turn's blocks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestThinkingRoundTrip reads recorded thinking streams as the router
// does, keeps the collected blocks with the assistant message, and checks
// that the next request sends them back exactly as the stream carried
// them: the same text, the same signature, a redacted block's data, and
// an empty signed block with its empty "thinking".
func TestThinkingRoundTrip(t *testing.T) {
	tests := []struct {
		file string
		want string // the assistant turn's thinking blocks, as sent
	}{
		{"docs_thinking_stream.sse", `[{"type":"thinking","thinking":"I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\nThe remainder is 0, so GCD(1071, 462) = 21.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."}]`},
		{"constructed_omitted_thinking_tool.sse", `[{"type":"thinking","thinking":"","signature":"EuYBCkQYAiJAk3s0bW9pdHRlZC10aGlua2luZy1jb25zdHJ1Y3RlZC1zaWduYXR1cmU="},{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pabVS5xuX4jSrmhIBGgw="}]`},
		{"sdk_go_interleaved_thinking.sse", `[{"type":"thinking","thinking":"Let me think.","signature":"sig123"}]`},
		{"sdk_go_redacted_thinking_block.sse", `[{"type":"redacted_thinking","data":"Redacted"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var col chat.Collector
			for c, err := range pull(bytes.NewReader(readFixture(t, tt.file, false)), 0) {
				if err != nil {
					t.Fatal(err)
				}
				col.Add(c)
			}
			choice := col.Response().Choices[0]
			msgs := []chat.Message{
				{Role: chat.RoleUser, Content: "q"},
				{Role: chat.RoleAssistant, Content: choice.Text, ToolCalls: choice.ToolCalls, Thinking: choice.Thinking},
				{Role: chat.RoleUser, Content: "next"},
			}
			for _, tc := range choice.ToolCalls {
				msgs = append(msgs, chat.Message{Role: chat.RoleTool, ToolCallID: tc.ID, Content: "ok"})
			}
			body, err := EncodeRequest(&chat.Request{Model: "claude-sonnet-4-5", Messages: msgs, Thinking: &chat.ThinkingAsk{Effort: "low"}}, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var sent struct {
				Messages []struct {
					Content []json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &sent); err != nil {
				t.Fatal(err)
			}
			var blocks []json.RawMessage
			for _, b := range sent.Messages[1].Content {
				if bytes.Contains(b, []byte(`"type":"thinking"`)) || bytes.Contains(b, []byte(`"type":"redacted_thinking"`)) {
					blocks = append(blocks, b)
				}
			}
			got, _ := json.Marshal(blocks)
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("thinking sent back (-want +got):\n%s", diff)
			}
			if first := sent.Messages[1].Content[0]; !bytes.Equal(first, blocks[0]) {
				t.Errorf("the turn begins with %s, want its thinking", first)
			}
		})
	}
}
