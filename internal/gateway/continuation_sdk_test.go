package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/provider/sim"
)

// sdkClean is the answer the SDK clients must read: its first upstream
// dies inside "owners", the next restarts the word.
const (
	sdkClean     = "Naïve café owners serve crème brûlée 🙂 at noon."
	sdkDelivered = "Naïve café own"
)

// sdkContinuedGateway serves two aliases whose first upstream dies
// mid-word and whose second restarts the word: gpt on OpenAI-compatible
// upstreams (instructed), claude on Anthropic ones (claude-3-7-sonnet:
// prefilled), the continuing one answering with the sim's own stream. It
// returns how many continuation requests each continuing upstream got.
func sdkContinuedGateway(t *testing.T) (gw *gatewaytest.Gateway, asked *[2]atomic.Int32) {
	t.Helper()
	asked = new([2]atomic.Int32)
	simH := sim.New(sim.Config{Name: "sim", Seed: 1}).Handler()
	dies := func(events ...string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			gatewaytest.SSEHeaders(w)
			for _, e := range events {
				gatewaytest.SSEWrite(w, e)
			}
			panic(http.ErrAbortHandler) // the connection drops mid-word
		}))
		t.Cleanup(s.Close)
		return s
	}
	continues := func(n int, path string, body func(string) string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			msgs, _, err := upMessages(b)
			rest := sdkClean
			if err == nil && len(msgs) >= 2 && msgs[1].role == "assistant" {
				asked[n].Add(1)
				if msgs[1].text != sdkDelivered {
					t.Errorf("continuation request %s: delivered %q, want %q", b, msgs[1].text, sdkDelivered)
				}
				rest = strings.TrimPrefix(sdkClean, "Naïve café ") // restarts the word
			}
			req, _ := http.NewRequestWithContext(r.Context(), "POST", path, strings.NewReader(body(rest)))
			req.Header.Set("X-Firstword-Sim", "echo gap=0s ttft=0s")
			simH.ServeHTTP(w, req)
		}))
		t.Cleanup(s.Close)
		return s
	}
	chunk := func(text string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + jsonString(text) + `},"finish_reason":null}]}` + "\n\n"
	}
	delta := func(text string) string {
		return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":" + jsonString(text) + "}}\n\n"
	}
	gptA := dies(chunk("Naïve"), chunk(" café"), chunk(" own"))
	gptB := continues(0, "/v1/chat/completions", chatCompletionsBody)
	claudeA := dies(
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-3-7-sonnet-20250219\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		delta("Naïve"), delta(" café"), delta(" own"))
	claudeB := continues(1, "/v1/messages", messagesBody)
	gw = gatewaytest.Start(t, gatewaytest.MustParse(t, `
providers:
  gpta: {type: openai, base_url: "`+gptA.URL+`/v1"}
  gptb: {type: openai, base_url: "`+gptB.URL+`/v1"}
  claudea: {type: anthropic, base_url: "`+claudeA.URL+`/v1"}
  claudeb: {type: anthropic, base_url: "`+claudeB.URL+`/v1"}
models:
  gpt:
    deployments: [{provider: gpta, model: gpt-4o}, {provider: gptb, model: gpt-4o, priority: 1}]
  claude:
    deployments: [{provider: claudea, model: claude-3-7-sonnet-20250219}, {provider: claudeb, model: claude-3-7-sonnet-20250219, priority: 1}]
`))
	return gw, asked
}

// TestContinuationOpenAISDK: the official OpenAI Go SDK, streaming (with
// usage) and not, through firstword while the first upstream dies
// mid-word and the next continues, on an OpenAI-compatible upstream and
// on an Anthropic one: the SDK reads the clean answer, no error, a stop
// and a usage that adds up.
func TestContinuationOpenAISDK(t *testing.T) {
	gw, asked := sdkContinuedGateway(t)
	client := sdkClient(gw.URL)
	ctx := context.Background()
	for i, alias := range []string{"gpt", "claude"} {
		params := openai.ChatCompletionNewParams{
			Model:         alias,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about the café.")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}
		t.Run(alias+"/streaming", func(t *testing.T) {
			before := asked[i].Load()
			var resp *http.Response
			stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp))
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			stream.Close()
			if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != sdkClean || acc.Choices[0].FinishReason != "stop" {
				t.Fatalf("choices %+v, want %q, stop", acc.Choices, sdkClean)
			}
			if u := acc.Usage; u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %+v", u)
			}
			if asked[i].Load() != before+1 {
				t.Errorf("%d continuation requests, want 1", asked[i].Load()-before)
			}
			// The SDKs stop reading at the answer's end ([DONE],
			// message_stop), before the route trailer: the record says it.
			if rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id")); !strings.Contains(rec.Route, "continued on "+alias+"b/") || rec.Continuations != 1 || len(rec.Spent) != 1 {
				t.Errorf("record: route %q, continuations %d, spent %+v", rec.Route, rec.Continuations, rec.Spent)
			}
		})
		t.Run(alias+"/not-streamed", func(t *testing.T) {
			var resp *http.Response
			params := params
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{} // streaming only
			c, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Choices) != 1 || c.Choices[0].Message.Content != sdkClean || c.Choices[0].FinishReason != "stop" {
				t.Fatalf("choices %+v, want %q, stop", c.Choices, sdkClean)
			}
			if u := c.Usage; u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %+v", u)
			}
			if route := resp.Header.Get("X-Firstword-Route"); !strings.Contains(route, "continued on "+alias+"b/") {
				t.Errorf("route %q", route)
			}
		})
	}
}

// TestContinuationAnthropicSDK: the same with the official Anthropic Go
// SDK on /v1/messages: the accumulated message is the clean answer, one
// text block, end_turn, with usage.
func TestContinuationAnthropicSDK(t *testing.T) {
	gw, asked := sdkContinuedGateway(t)
	client := anthropic.NewClient(aoption.WithBaseURL(gw.URL+"/"), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	ctx := context.Background()
	for i, alias := range []string{"gpt", "claude"} {
		params := anthropic.MessageNewParams{
			Model:     anthropic.Model(alias),
			MaxTokens: 1024,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about the café."))},
		}
		t.Run(alias+"/streaming", func(t *testing.T) {
			before := asked[i].Load()
			var resp *http.Response
			stream := client.Messages.NewStreaming(ctx, params, aoption.WithResponseInto(&resp))
			var msg anthropic.Message
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			stream.Close()
			if len(msg.Content) != 1 || textOf(msg) != sdkClean || msg.StopReason != anthropic.StopReasonEndTurn {
				b, _ := json.Marshal(msg)
				t.Fatalf("message %s: want one text block %q, end_turn", b, sdkClean)
			}
			if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
				t.Errorf("usage %+v", msg.Usage)
			}
			if asked[i].Load() != before+1 {
				t.Errorf("%d continuation requests, want 1", asked[i].Load()-before)
			}
			// The SDKs stop reading at the answer's end ([DONE],
			// message_stop), before the route trailer: the record says it.
			if rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id")); !strings.Contains(rec.Route, "continued on "+alias+"b/") || rec.Continuations != 1 || len(rec.Spent) != 1 {
				t.Errorf("record: route %q, continuations %d, spent %+v", rec.Route, rec.Continuations, rec.Spent)
			}
		})
		t.Run(alias+"/not-streamed", func(t *testing.T) {
			msg, err := client.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) != 1 || textOf(*msg) != sdkClean || msg.StopReason != anthropic.StopReasonEndTurn {
				b, _ := json.Marshal(msg)
				t.Fatalf("message %s: want one text block %q, end_turn", b, sdkClean)
			}
			if msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
				t.Errorf("usage %+v", msg.Usage)
			}
		})
	}
}
