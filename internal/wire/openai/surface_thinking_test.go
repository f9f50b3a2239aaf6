package openai

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// TestParseRequestThinking: reasoning_effort and LiteLLM's thinking object
// are the request's ThinkingAsk; an assistant turn's thinking_blocks are
// its Anthropic blocks, kept byte for byte, and its reasoning_content is
// accepted and dropped.
func TestParseRequestThinking(t *testing.T) {
	tests := []struct {
		name, body string
		ask        *chat.ThinkingAsk
		thinking   []chat.ThinkingBlock // of messages[1]
		err        string
	}{
		{name: "none asked", body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{name: "effort", body: `{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`,
			ask: &chat.ThinkingAsk{Effort: "low"}},
		{name: "xhigh, OpenAI's highest", body: `{"model":"m","reasoning_effort":"xhigh","messages":[{"role":"user","content":"hi"}]}`,
			ask: &chat.ThinkingAsk{Effort: "xhigh"}},
		{name: "litellm budget", body: `{"model":"m","reasoning_effort":"high","thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"hi"}]}`,
			ask: &chat.ThinkingAsk{Effort: "high", BudgetTokens: 2048}},
		{name: "disabled", body: `{"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`,
			ask: &chat.ThinkingAsk{Effort: "none"}},
		{name: "blocks", body: `{"model":"m","messages":[{"role":"user","content":"weather?"},
			{"role":"assistant","content":null,"reasoning_content":"I should call the tool.",
			 "thinking_blocks":[{"type":"thinking","thinking":"I should call the tool.","signature":"EqQBCgIYAhIM+/=="},{"type":"redacted_thinking","data":"EmwKAhgBEgy3va"}],
			 "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"weather","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"toolu_1","content":"sunny"}]}`,
			thinking: []chat.ThinkingBlock{
				{Text: "I should call the tool.", Signature: "EqQBCgIYAhIM+/==", Format: chat.ThinkingAnthropic},
				{Redacted: "EmwKAhgBEgy3va", Format: chat.ThinkingAnthropic},
			}},
		{name: "unknown effort", body: `{"model":"m","reasoning_effort":"max","messages":[{"role":"user","content":"hi"}]}`,
			err: "reasoning_effort: must be one of none, minimal, low, medium, high, xhigh"},
		{name: "budget missing", body: `{"model":"m","thinking":{"type":"enabled"},"messages":[{"role":"user","content":"hi"}]}`,
			err: "thinking.budget_tokens: required, at least 1, when type is enabled"},
		{name: "disabled and effort", body: `{"model":"m","reasoning_effort":"low","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`,
			err: `thinking: disabled contradicts reasoning_effort "low"`},
		{name: "bad block", body: `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","thinking_blocks":[{"type":"text"}]}]}`,
			err: `messages[1]: thinking_blocks[0].type: must be thinking or redacted_thinking, not "text"`},
		{name: "user blocks", body: `{"model":"m","messages":[{"role":"user","content":"hi","thinking_blocks":[{"type":"thinking","thinking":""}]}]}`,
			err: "messages[0]: thinking_blocks: allowed only on assistant messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, err := ParseRequest([]byte(tt.body))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("ParseRequest() error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.ask, pr.Request.Thinking); d != "" {
				t.Errorf("Thinking (-want +got):\n%s", d)
			}
			if tt.thinking != nil {
				if d := cmp.Diff(tt.thinking, pr.Request.Messages[1].Thinking); d != "" {
					t.Errorf("messages[1].Thinking (-want +got):\n%s", d)
				}
			}
			if len(pr.Request.Extra) != 0 {
				t.Errorf("Extra = %v, want the thinking fields modelled, not passed on", pr.Request.Extra)
			}
		})
	}
}

// TestEncodeCompletionThinking: a non-streamed answer has all its thinking
// in reasoning_content and its Anthropic blocks whole in thinking_blocks,
// which parse back into the same blocks.
func TestEncodeCompletionThinking(t *testing.T) {
	blocks := []chat.ThinkingBlock{
		{Text: "First, ", Signature: "sig1", Format: chat.ThinkingAnthropic},
		{Redacted: "opaque", Format: chat.ThinkingAnthropic},
		{Text: "then."},
	}
	r := &chat.Response{Choices: []chat.Choice{{Text: "42", Thinking: blocks, FinishReason: chat.FinishStop}}}
	b, err := json.Marshal(EncodeCompletion("chatcmpl-1", 1, "m", r))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"42",` +
		`"reasoning_content":"First, then.","thinking_blocks":[{"type":"thinking","thinking":"First, ","signature":"sig1"},{"type":"redacted_thinking","data":"opaque"}]},` +
		`"logprobs":null,"finish_reason":"stop"}],"system_fingerprint":null}`
	if string(b) != want {
		t.Fatalf("EncodeCompletion =\n%s\nwant\n%s", b, want)
	}
	var c struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	json.Unmarshal(b, &c)
	body := `{"model":"m","messages":[{"role":"user","content":"q"},` + string(c.Choices[0].Message) + `]}`
	pr, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(blocks[:2], pr.Request.Messages[1].Thinking); d != "" {
		t.Errorf("the blocks sent back (-want +got):\n%s", d)
	}
}

// TestAppendChunkThinkingAllocs: a thinking delta costs no allocation,
// as a text delta does not (the open block's text is kept for its
// signature in a buffer that grows by doubling).
func TestAppendChunkThinkingAllocs(t *testing.T) {
	e := ChunkEncoder{ID: "c", Model: "m"}
	b := make([]byte, 0, 4096)
	c := chat.Chunk{Thinking: "a thinking delta of some words"}
	if n := testing.AllocsPerRun(1000, func() { b = e.AppendChunk(b[:0], &c) }); n != 0 {
		t.Errorf("AppendChunk(thinking) allocates %v times per delta", n)
	}
}
