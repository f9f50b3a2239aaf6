package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// replay is a fake upstream that answers every request with a captured
// stream, event by event.
func replay(t *testing.T, file string) *gatewaytest.Upstream {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		for _, ev := range strings.SplitAfter(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n\n") {
			if ev != "" && !gatewaytest.SSEWrite(w, ev) {
				return
			}
		}
	})
}

const anthropicUpstream = `
providers:
  claude:
    type: anthropic
    base_url: {{UP}}/v1
models:
  chat:
    deployments: [{provider: claude, model: claude-3-7-sonnet-20250219}]
`

const openaiUpstream = `
providers:
  gpt:
    type: openai
    base_url: {{UP}}/v1
models:
  chat:
    deployments: [{provider: gpt, model: gpt-4o}]
`

func anthropicClient(url string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(url+"/"), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
}

var weatherTool = anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
	Properties: map[string]any{"city": map[string]string{"type": "string"}, "units": map[string]string{"type": "string"}},
}, "get_weather")

// streamMessage runs a streaming Messages request with the official SDK.
func streamMessage(t *testing.T, url string, tools bool) anthropic.Message {
	t.Helper()
	params := anthropic.MessageNewParams{
		Model:     "chat",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What's the weather in San Francisco?"))},
	}
	if tools {
		params.Tools = []anthropic.ToolUnionParam{weatherTool}
	}
	client := anthropicClient(url)
	stream := client.Messages.NewStreaming(context.Background(), params)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return msg
}

func toolInput(t *testing.T, msg anthropic.Message) (name string, input map[string]string) {
	t.Helper()
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			json.Unmarshal(b.Input, &input)
			return b.Name, input
		}
	}
	return "", nil
}

func textOf(msg anthropic.Message) string {
	var sb strings.Builder
	for _, b := range msg.Content {
		if b.Type == "text" {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// TestAnthropicSDKToAnthropicUpstream: the official Anthropic Go SDK
// against /v1/messages, routed to a fake Anthropic upstream replaying
// recorded bytes: text, a streamed tool call and usage come through.
func TestAnthropicSDKToAnthropicUpstream(t *testing.T) {
	up := replay(t, "anthropic_tool_use_stream.sse")
	gw := gatewaytest.StartYAML(t, anthropicUpstream, up.URL)
	msg := streamMessage(t, gw.URL, true)
	if text := textOf(msg); text != "I'll get the current weather in San Francisco for you in Fahrenheit." {
		t.Errorf("text = %q", text)
	}
	name, input := toolInput(t, msg)
	if name != "get_weather" || input["city"] != "San Francisco" || input["units"] != "fahrenheit" {
		t.Errorf("tool call %s(%v)", name, input)
	}
	if msg.StopReason != "tool_use" || msg.Usage.InputTokens != 397 || msg.Usage.OutputTokens != 89 {
		t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
	}
	// The upstream received an Anthropic request with the tool.
	reqs := up.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0], `"name":"get_weather"`) || !strings.Contains(reqs[0], `"stream":true`) {
		t.Errorf("upstream request %v", reqs)
	}
	// Non-streaming, from the same captured stream.
	client := anthropicClient(gw.URL)
	res, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "chat", MaxTokens: 1024, Tools: []anthropic.ToolUnionParam{weatherTool},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What's the weather in San Francisco?"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if name, input := toolInput(t, *res); name != "get_weather" || input["city"] != "San Francisco" || res.Usage.OutputTokens != 89 {
		t.Errorf("non-streaming: %s(%v), usage %+v", name, input, res.Usage)
	}
}

// TestAnthropicSDKToOpenAIUpstream: Anthropic client, OpenAI-compatible
// upstream: the tool call is translated both ways.
func TestAnthropicSDKToOpenAIUpstream(t *testing.T) {
	up := replay(t, "openai_chat_stream_toolcall.sse")
	gw := gatewaytest.StartYAML(t, openaiUpstream, up.URL)
	msg := streamMessage(t, gw.URL, true)
	name, input := toolInput(t, msg)
	if name != "get_weather" || input["city"] != "New York City" {
		t.Errorf("tool call %s(%v)", name, input)
	}
	if msg.StopReason != "tool_use" || msg.Usage.InputTokens != 44 || msg.Usage.OutputTokens != 16 {
		t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
	}
	reqs := up.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0], `"type":"function"`) || !strings.Contains(reqs[0], `"name":"get_weather"`) {
		t.Errorf("upstream request %v", reqs)
	}
	// Plain text from a text stream.
	up2 := replay(t, "openai_chat_stream_usage.sse")
	gw2 := gatewaytest.StartYAML(t, openaiUpstream, up2.URL)
	msg = streamMessage(t, gw2.URL, false)
	if !strings.HasPrefix(textOf(msg), "I'm unable to provide real-time weather") || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != 30 {
		t.Errorf("text %q stop %q usage %+v", textOf(msg), msg.StopReason, msg.Usage)
	}
}

// TestOpenAISDKToAnthropicUpstream: OpenAI client, Anthropic upstream.
func TestOpenAISDKToAnthropicUpstream(t *testing.T) {
	up := replay(t, "anthropic_tool_use_stream.sse")
	gw := gatewaytest.StartYAML(t, anthropicUpstream, up.URL)
	client := sdkClient(gw.URL)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "chat",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What's the weather in San Francisco?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object"},
		})},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	ch := acc.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" {
		t.Fatalf("choice %+v", ch)
	}
	var args map[string]string
	json.Unmarshal([]byte(ch.Message.ToolCalls[0].Function.Arguments), &args)
	if args["city"] != "San Francisco" || !strings.HasPrefix(ch.Message.Content, "I'll get the current weather") {
		t.Errorf("args %v text %q", args, ch.Message.Content)
	}
	if acc.Usage.PromptTokens != 397 || acc.Usage.CompletionTokens != 89 {
		t.Errorf("usage %+v", acc.Usage)
	}
}

// TestAnthropicErrorContract: Anthropic's error shapes, before the first
// byte (status and JSON) and after it (event: error).
func TestAnthropicErrorContract(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, "providers:\n  sim: {type: sim}\nmodels:\n  chat: {max_attempts: 1, deployments: [{provider: sim, model: small}]}\n"))
	client := anthropicClient(gw.URL)
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "nope", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("unknown model: %v", err)
	}
	_, err = client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "chat", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi [sim fault=503]"))}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 {
		t.Errorf("overloaded: %v", err)
	}
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "chat", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi [sim ttft=5ms gap=1ms tokens=20 fault=error_mid after=5]"))}})
	var msg anthropic.Message
	for stream.Next() {
		msg.Accumulate(stream.Current())
	}
	stream.Close()
	if stream.Err() == nil || textOf(msg) == "" {
		t.Errorf("mid-stream error: err %v, text %q", stream.Err(), textOf(msg))
	}
	// The overall timeout after the first token: the text sent is kept and
	// the stream ends in an error event, not in a stop reason that would
	// call the answer whole.
	stream = client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "chat", MaxTokens: 1000,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi [sim ttft=5ms gap=20ms tokens=500]"))}},
		aoption.WithHeader("X-Request-Timeout", "0.3"))
	msg = anthropic.Message{}
	for stream.Next() {
		msg.Accumulate(stream.Current())
	}
	stream.Close()
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "timeout_error") || textOf(msg) == "" || msg.StopReason != "" {
		t.Errorf("timeout mid-stream: err %v, text %q, stop %q", err, textOf(msg), msg.StopReason)
	}
	// Bad input names the field.
	resp := gatewaytest.PostPath(t, gw.URL, "/v1/messages", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 {
		t.Errorf("missing max_tokens: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

// TestAnthropicHeartbeat: a quiet /v1/messages stream is kept open with
// Anthropic's own ping event (not an SSE comment), which the SDK skips.
func TestAnthropicHeartbeat(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, "heartbeat: 50ms\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n"))
	const msg = "hi [sim ttft=250ms gap=1ms tokens=3]"
	resp := gatewaytest.PostPath(t, gw.URL, "/v1/messages", `{"model":"chat","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"`+msg+`"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if !strings.Contains(body, "event: ping\ndata: {\"type\": \"ping\"}\n\n") || strings.HasPrefix(body, ": ") || strings.Contains(body, "\n: ") || !strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("stream:\n%s", body)
	}
	client := anthropicClient(gw.URL)
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "chat", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(msg))}})
	var m anthropic.Message
	for stream.Next() {
		if err := m.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	stream.Close()
	if stream.Err() != nil || textOf(m) == "" || m.StopReason != "max_tokens" && m.StopReason != "end_turn" {
		t.Errorf("SDK through pings: err %v, text %q, stop %q", stream.Err(), textOf(m), m.StopReason)
	}
}
