package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// The thinking of Anthropic's documented streaming example
// (internal/wire/anthropic/testdata/docs_thinking_stream.sse), its deltas
// joined, and its signature.
const (
	docsThinking = "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147" +
		"\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\nThe remainder is 0, so GCD(1071, 462) = 21."
	docsSignature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."
	docsAnswer    = "The greatest common divisor of 1071 and 462 is **21**."
)

// TestThinkingSDKsFromAnthropic: a recorded Claude stream with thinking,
// through the gateway, as each official SDK reads it: the Anthropic SDK
// accumulates the thinking block with its exact signature before the
// text; the OpenAI SDK reads reasoning_content and the signed block in
// thinking_blocks through its extra fields, then the answer.
func TestThinkingSDKsFromAnthropic(t *testing.T) {
	up := replay(t, "../../wire/anthropic/testdata/docs_thinking_stream.sse")
	gw := gatewaytest.StartYAML(t, anthropicUpstream, up.URL)
	ctx := context.Background()

	ac := anthropicClient(gw.URL)
	stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "chat", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("GCD of 1071 and 462?"))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != docsThinking ||
		msg.Content[0].Signature != docsSignature || msg.Content[1].Type != "text" || msg.Content[1].Text != docsAnswer {
		t.Errorf("Anthropic SDK: content %+v", msg.Content)
	}
	if reqs := up.Requests(); !strings.Contains(reqs[0], `"thinking":{`) {
		t.Errorf("the upstream was not asked to think: %s", reqs[0])
	}

	oc := sdkClient(gw.URL)
	cs := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "chat", ReasoningEffort: shared.ReasoningEffortLow,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("GCD of 1071 and 462?")},
	})
	var thinking, answer strings.Builder
	var blocks []string
	for cs.Next() {
		c := cs.Current()
		if len(c.Choices) == 0 {
			continue
		}
		d := c.Choices[0].Delta
		if f, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
			var s string
			json.Unmarshal([]byte(f.Raw()), &s)
			if answer.Len() > 0 {
				t.Errorf("thinking %q after the answer began", s)
			}
			thinking.WriteString(s)
		}
		if f, ok := d.JSON.ExtraFields["thinking_blocks"]; ok {
			blocks = append(blocks, f.Raw())
		}
		answer.WriteString(d.Content)
	}
	if err := cs.Err(); err != nil {
		t.Fatal(err)
	}
	block, _ := json.Marshal([]map[string]string{{"type": "thinking", "thinking": docsThinking, "signature": docsSignature}})
	if thinking.String() != docsThinking || answer.String() != docsAnswer || len(blocks) != 1 || !jsonEqual(blocks[0], string(block)) {
		t.Errorf("OpenAI SDK: thinking %q, answer %q, thinking_blocks %v", thinking.String(), answer.String(), blocks)
	}
}

// TestThinkingSDKFromResponses: a recorded Responses stream (a reasoning
// item with a summary and encrypted content, then a function call),
// through the gateway to the OpenAI SDK's Responses client that asked
// for summaries and the encrypted content: the summary, streamed, then
// the call; the final response lists the reasoning first, its encrypted
// content with the upstream's item id.
func TestThinkingSDKFromResponses(t *testing.T) {
	up := replay(t, "../../wire/responses/testdata/upstream_reasoning_tool_call.sse")
	gw := gatewaytest.StartYAML(t, `
providers:
  oa: {type: openai-responses, base_url: "{{UP}}/v1"}
models:
  chat:
    deployments: [{provider: oa, model: gpt-5.1-codex-max}]
`, up.URL)
	client := sdkClient(gw.URL)
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "chat", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("(12+7)*3*10 with the calculator")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortHigh, Summary: shared.ReasoningSummaryDetailed},
		Include:   []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
	})
	var summary strings.Builder
	var final responses.Response
	sawCall := false
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.reasoning_summary_text.delta":
			if sawCall {
				t.Error("reasoning after the function call")
			}
			summary.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			sawCall = true
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	const want = "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the result by 3, and finally multiply that by 10, reporting the final product."
	if summary.String() != want || !sawCall {
		t.Errorf("summary %q, call %v", summary.String(), sawCall)
	}
	// The summary's item, then the encrypted content in an item with the
	// upstream's id (known when its item ends), then the call.
	if len(final.Output) != 3 || final.Output[2].Type != "function_call" {
		t.Fatalf("output %+v", final.Output)
	}
	item, encrypted := final.Output[0].AsReasoning(), final.Output[1].AsReasoning()
	if len(item.Summary) != 1 || item.Summary[0].Text != want ||
		encrypted.ID != "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9" || !strings.HasPrefix(encrypted.EncryptedContent, "gAAAAABpPDIV") {
		t.Errorf("reasoning items %s and %s", item.RawJSON(), encrypted.RawJSON())
	}
}

// signingClaude is a fake Messages API that thinks, signs its thinking
// and calls a tool, and, as Anthropic does, refuses the turn that answers
// the call unless the call's turn comes back with its thinking block
// first and unchanged.
func signingClaude(t *testing.T) *gatewaytest.Upstream {
	const thought, signature = "Paris: I'll call get_weather. ×", "EqQBsigned/by+the=fake"
	var up *gatewaytest.Upstream
	up = gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Thinking json.RawMessage `json:"thinking"`
			Messages []struct {
				Role    string            `json:"role"`
				Content []json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		reqs := up.Requests() // the body, which NewUpstream read
		json.Unmarshal([]byte(reqs[len(reqs)-1]), &req)
		if len(req.Thinking) == 0 {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"thinking is off"}}`, http.StatusBadRequest)
			return
		}
		gatewaytest.SSEHeaders(w)
		ev := func(typ, data string) { gatewaytest.SSEWrite(w, "event: "+typ+"\ndata: "+data+"\n\n") }
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-3-7-sonnet-20250219","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":1}}}`)
		if len(req.Messages) == 1 {
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":%q}}`, thought))
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":%q}}`, signature))
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}}`)
			ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}`)
			ev("message_stop", `{"type":"message_stop"}`)
			return
		}
		want, _ := json.Marshal(map[string]string{"type": "thinking", "thinking": thought, "signature": signature})
		if m := req.Messages[1]; m.Role != "assistant" || len(m.Content) == 0 || !jsonEqual(string(m.Content[0]), string(want)) {
			ev("error", `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: invalid signature in thinking block"}}`)
			return
		}
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Sunny in Paris."}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`)
		ev("message_stop", `{"type":"message_stop"}`)
	})
	return up
}

// TestThinkingToolTurnThroughSurfaces: Claude thinks and calls a tool;
// the tool's result goes back in a second turn that an upstream checking
// the signature accepts, from an Anthropic SDK client (its turn as the
// SDK gives it back) and from a Chat Completions client (the blocks sent
// back in thinking_blocks, as LiteLLM's users do); a changed thinking text
// is refused.
func TestThinkingToolTurnThroughSurfaces(t *testing.T) {
	gw := gatewaytest.StartYAML(t, anthropicUpstream, signingClaude(t).URL)
	ctx := context.Background()

	t.Run("anthropic", func(t *testing.T) {
		client := anthropicClient(gw.URL)
		user := anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))
		params := anthropic.MessageNewParams{Model: "chat", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
			Tools: []anthropic.ToolUnionParam{weatherTool}, Messages: []anthropic.MessageParam{user}}
		first, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if first.StopReason != "tool_use" || len(first.Content) != 2 || first.Content[0].Type != "thinking" {
			t.Fatalf("first turn %+v", first.Content)
		}
		params.Messages = append(params.Messages, first.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "sunny", false)))
		second, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if textOf(*second) != "Sunny in Paris." {
			t.Errorf("second turn %+v", second.Content)
		}
	})

	t.Run("chat completions", func(t *testing.T) {
		client := sdkClient(gw.URL)
		tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object"},
		})}
		params := openai.ChatCompletionNewParams{Model: "chat", ReasoningEffort: shared.ReasoningEffortLow, Tools: tools,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}}
		first, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		m := first.Choices[0].Message
		blocks := m.JSON.ExtraFields["thinking_blocks"].Raw()
		if len(m.ToolCalls) != 1 || !strings.Contains(blocks, "EqQBsigned/by+the=fake") {
			t.Fatalf("first turn: tool calls %+v, thinking_blocks %s", m.ToolCalls, blocks)
		}
		turn := func(blocks string) []openai.ChatCompletionMessageParamUnion {
			back := m.ToParam()
			back.OfAssistant.SetExtraFields(map[string]any{"thinking_blocks": json.RawMessage(blocks)})
			return []openai.ChatCompletionMessageParamUnion{params.Messages[0], back, openai.ToolMessage("sunny", m.ToolCalls[0].ID)}
		}
		params.Messages = turn(blocks)
		second, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got := second.Choices[0].Message.Content; got != "Sunny in Paris." {
			t.Errorf("second turn %q", got)
		}
		params.Messages = turn(strings.Replace(blocks, "Paris", "Rome", 1))
		_, err = client.Chat.Completions.New(ctx, params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "invalid signature") {
			t.Errorf("a changed thinking text: err = %v, want the upstream's refusal", err)
		}
	})
}

// jsonEqual compares JSON texts as values.
func jsonEqual(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return fmt.Sprint(va) == fmt.Sprint(vb)
}
