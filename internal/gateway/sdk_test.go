package gateway_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

func sdkClient(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// TestOpenAISDKSim drives the gateway with the official OpenAI Go SDK
// against the built-in sim, streaming and not, with and without usage.
func TestOpenAISDKSim(t *testing.T) {
	gw := gatewaytest.StartYAML(t, `
providers:
  sim: {type: sim}
models:
  fast:
    deployments: [{provider: sim, model: small}]
`, "")
	client := sdkClient(gw.URL)
	ctx := context.Background()
	msg := "Say something. [sim ttft=20ms gap=2ms tokens=25]"

	t.Run("non-streaming", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "fast",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(msg)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
			t.Fatalf("choices = %+v", c.Choices)
		}
		if c.Choices[0].FinishReason != "stop" {
			t.Errorf("finish_reason = %q, want stop", c.Choices[0].FinishReason)
		}
		if c.Usage.CompletionTokens != 25 || c.Usage.PromptTokens == 0 {
			t.Errorf("usage = %+v, want 25 completion tokens", c.Usage)
		}
	})
	for _, includeUsage := range []bool{false, true} {
		name := "streaming"
		if includeUsage {
			name += "+include_usage"
		}
		t.Run(name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{
				Model:    "fast",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(msg)},
			}
			if includeUsage {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			chunks, usageChunks := 0, 0
			for stream.Next() {
				ch := stream.Current()
				acc.AddChunk(ch)
				chunks++
				if len(ch.Choices) == 0 && ch.Usage.TotalTokens > 0 {
					usageChunks++
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if chunks < 25 {
				t.Errorf("%d chunks, want at least one per token", chunks)
			}
			text := acc.Choices[0].Message.Content
			if n := len(strings.Fields(text)); n < 10 {
				t.Errorf("text %q has %d words", text, n)
			}
			if acc.Choices[0].FinishReason != "stop" {
				t.Errorf("finish_reason = %q", acc.Choices[0].FinishReason)
			}
			if includeUsage {
				if usageChunks != 1 || acc.Usage.CompletionTokens != 25 {
					t.Errorf("usage chunks = %d, usage = %+v; want one chunk with 25 completion tokens", usageChunks, acc.Usage)
				}
			} else if usageChunks != 0 || acc.Usage.TotalTokens != 0 {
				t.Errorf("usage sent although not asked for: %+v", acc.Usage)
			}
		})
	}
}

// TestOpenAISDKReplay puts a fake OpenAI upstream replaying real captured
// bytes behind the minimal config, and reads the answer through
// the gateway with the official SDK.
func TestOpenAISDKReplay(t *testing.T) {
	tests := []struct {
		file       string
		text       string
		finish     string
		tool, args string
		prompt     int64
		completion int64
	}{
		{file: "openai_chat_stream_usage.sse", text: "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app.", finish: "stop", prompt: 14, completion: 30},
		{file: "openai_chat_stream_toolcall.sse", finish: "tool_calls", tool: "get_weather", args: `{"city":"New York City"}`, prompt: 44, completion: 16},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				gatewaytest.SSEHeaders(w)
				// Replay event by event, as the provider sent them.
				for _, ev := range strings.SplitAfter(string(raw), "\n\n") {
					if ev != "" && !gatewaytest.SSEWrite(w, ev) {
						return
					}
				}
			})
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig, up.URL)
			client := sdkClient(gw.URL)
			for _, streaming := range []bool{true, false} {
				params := openai.ChatCompletionNewParams{
					Model:         "chat",
					Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What's the weather in San Francisco?")},
					StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
				}
				var got openai.ChatCompletion
				if streaming {
					stream := client.Chat.Completions.NewStreaming(context.Background(), params)
					var acc openai.ChatCompletionAccumulator
					for stream.Next() {
						acc.AddChunk(stream.Current())
					}
					if err := stream.Err(); err != nil {
						t.Fatal(err)
					}
					got = acc.ChatCompletion
				} else {
					params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
					c, err := client.Chat.Completions.New(context.Background(), params)
					if err != nil {
						t.Fatal(err)
					}
					got = *c
				}
				ch := got.Choices[0]
				if ch.Message.Content != tt.text || ch.FinishReason != tt.finish {
					t.Errorf("stream=%v: got %q / %q, want %q / %q", streaming, ch.Message.Content, ch.FinishReason, tt.text, tt.finish)
				}
				if tt.tool != "" {
					if len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != tt.tool || ch.Message.ToolCalls[0].Function.Arguments != tt.args {
						t.Errorf("stream=%v: tool calls = %+v", streaming, ch.Message.ToolCalls)
					}
				}
				if got.Usage.PromptTokens != tt.prompt || got.Usage.CompletionTokens != tt.completion {
					t.Errorf("stream=%v: usage = %d/%d, want %d/%d", streaming, got.Usage.PromptTokens, got.Usage.CompletionTokens, tt.prompt, tt.completion)
				}
			}
			// The gateway always asked the upstream for usage.
			for _, b := range up.Requests() {
				if !strings.Contains(b, `"include_usage":true`) || !strings.Contains(b, `"model":"mock-model"`) {
					t.Errorf("upstream request %s lacks include_usage or the upstream model", b)
				}
			}
		})
	}
}
