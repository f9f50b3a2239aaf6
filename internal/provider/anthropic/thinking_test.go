package anthropic

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// sign is the fake upstream's thinking signature: only it can make one
// for a text, as only Anthropic can.
func sign(text string) string {
	h := sha256.Sum256([]byte("fake-anthropic:" + text))
	return base64.StdEncoding.EncodeToString(h[:])
}

// signingUpstream is a fake Messages API that thinks and signs its
// thinking, and checks, as Anthropic does, that a conversation with
// thinking on sends the turn a tool result answers back with its thinking
// first, unchanged: a changed or missing signature is a 400.
func signingUpstream(t *testing.T) http.HandlerFunc {
	const thought = "The user wants Paris. × I'll call get_weather.\n"
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int `json:"max_tokens"`
			Thinking  *struct {
				Type   string `json:"type"`
				Budget int    `json:"budget_tokens"`
			} `json:"thinking"`
			Temperature *float64 `json:"temperature"`
			Messages    []struct {
				Role    string `json:"role"`
				Content []struct {
					Type      string  `json:"type"`
					Thinking  *string `json:"thinking"`
					Signature string  `json:"signature"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		refuse := func(msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%q}}`, msg)
		}
		th := req.Thinking
		switch {
		case th == nil || th.Type != "enabled":
			refuse("thinking: expected enabled")
			return
		case th.Budget < 1024 || th.Budget >= req.MaxTokens:
			refuse("thinking.budget_tokens: must be at least 1024 and less than max_tokens")
			return
		case req.Temperature != nil:
			refuse("temperature may only be set to 1 when thinking is enabled")
			return
		}
		n := len(req.Messages)
		if n >= 2 {
			// The tool result's turn: the assistant turn before it must
			// begin with the signed thinking, as it was.
			a := req.Messages[n-2]
			if len(a.Content) == 0 || a.Content[0].Type != "thinking" || a.Content[0].Thinking == nil {
				refuse("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`.")
				return
			}
			if a.Content[0].Signature != sign(*a.Content[0].Thinking) {
				refuse("messages.1.content.0: Invalid `signature` in `thinking` block")
				return
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(typ, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data) }
		ev("message_start", `{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":1}}}`)
		if n < 2 {
			// The first turn: think, sign, call a tool.
			sig, _ := json.Marshal(sign(thought))
			text, _ := json.Marshal(thought)
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`+string(text)+`}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":`+string(sig)+`}}`)
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}}`)
			ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}`)
			ev("message_stop", `{"type":"message_stop"}`)
			return
		}
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"18°C in Paris."}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":8}}`)
		ev("message_stop", `{"type":"message_stop"}`)
	}
}

// TestThinkingToolTurn runs two Claude turns with thinking and a tool
// against an upstream that checks signatures: the thinking read from the
// first turn goes back in the second unchanged and is accepted; a changed
// text or a lost signature is refused, as Anthropic refuses it.
func TestThinkingToolTurn(t *testing.T) {
	p, _ := setup(t, signingUpstream(t), Config{})
	ask := &chat.ThinkingAsk{Effort: "low"}
	first := &chat.Request{Model: "claude-sonnet-4-5", MaxTokens: 500, Temperature: new(0.2), Thinking: ask,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "Weather in Paris?"}},
		Tools:    []chat.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	resp, err := chat.Collect(p.Stream(context.Background(), first))
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if len(ch.Thinking) != 1 || ch.Thinking[0].Signature != sign(ch.Thinking[0].Text) || !strings.Contains(ch.Thinking[0].Text, "×") || ch.Text != "" {
		t.Fatalf("first turn: thinking %+v, text %q", ch.Thinking, ch.Text)
	}
	second := func(thinking []chat.ThinkingBlock) *chat.Request {
		r := first.Clone()
		r.Messages = append(r.Messages,
			chat.Message{Role: chat.RoleAssistant, ToolCalls: ch.ToolCalls, Thinking: thinking},
			chat.Message{Role: chat.RoleTool, ToolCallID: ch.ToolCalls[0].ID, Content: "18°C"})
		return r
	}
	resp, err = chat.Collect(p.Stream(context.Background(), second(ch.Thinking)))
	if err != nil {
		t.Fatalf("second turn with the thinking as it came: %v", err)
	}
	if got := resp.Choices[0].Text; got != "18°C in Paris." {
		t.Errorf("second turn text = %q", got)
	}

	changed := []chat.ThinkingBlock{ch.Thinking[0]}
	changed[0].Text += " "
	_, err = chat.Collect(p.Stream(context.Background(), second(changed)))
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Category != chat.CategoryInvalidRequest || !strings.Contains(ce.Message, "signature") {
		t.Errorf("changed thinking: error = %v, want the upstream's invalid signature", err)
	}
}
