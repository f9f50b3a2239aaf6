package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// responsesFixture reads a recorded Responses API stream from the wire
// package's testdata (see its SOURCES.md).
func responsesFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../wire/responses/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// responsesUpstream is a fake Responses API: it keeps each request's
// path, Authorization header and body, and replays the stream answer
// picks for it, event by event as OpenAI sends them.
type responsesUpstream struct {
	*gatewaytest.Upstream
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	path, auth string
	body       map[string]any
}

func newResponsesUpstream(t *testing.T, answer func(body map[string]any) string) *responsesUpstream {
	u := &responsesUpstream{}
	u.Upstream = gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		raw := u.Upstream.Requests()
		var body map[string]any
		json.Unmarshal([]byte(raw[len(raw)-1]), &body)
		u.seen = append(u.seen, seenRequest{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
		u.mu.Unlock()
		gatewaytest.SSEHeaders(w)
		for _, ev := range strings.SplitAfter(answer(body), "\n\n") {
			if ev != "" && !gatewaytest.SSEWrite(w, ev) {
				return
			}
		}
	})
	return u
}

func (u *responsesUpstream) last(t *testing.T) seenRequest {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	return u.seen[len(u.seen)-1]
}

const responsesUpstreamConfig = `
providers:
  oai:
    type: openai-responses
    base_url: {{UP}}/v1
    api_key_env: OAI_KEY
models:
  chat:
    deployments: [{provider: oai, model: gpt-5-mini}]
`

// TestResponsesUpstreamSDK puts a fake Responses API upstream replaying
// recorded streams behind an openai-responses provider, and talks Chat
// Completions to the gateway with the official OpenAI Go SDK: streamed
// and whole text with usage, a tool call, its result sent back, and an
// upstream failure before the first token. The requests the upstream
// received are Responses requests: the conversation as input items,
// store false, function tools, the caps and the reasoning effort.
func TestResponsesUpstreamSDK(t *testing.T) {
	text := responsesFixture(t, "upstream_phase_text.sse")
	call := responsesFixture(t, "upstream_reasoning_tool_call.sse")
	quota := responsesFixture(t, "upstream_error_quota.sse")
	up := newResponsesUpstream(t, func(body map[string]any) string {
		in, _ := json.Marshal(body["input"])
		switch {
		case strings.Contains(string(in), "quota"):
			return quota
		case body["tools"] != nil && !strings.Contains(string(in), "function_call_output"):
			return call
		}
		return text
	})
	cfg, err := config.Parse("test.yaml", []byte(strings.ReplaceAll(responsesUpstreamConfig, "{{UP}}", up.URL)), func(k string) string {
		if k == "OAI_KEY" {
			return "sk-test-responses-key"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := gatewaytest.Start(t, cfg)
	client := sdkClient(gw.URL)
	ctx := context.Background()

	// The recorded phase stream: a commentary and the final answer (its
	// deltas abridged), cached and reasoning tokens.
	const wantText = "Got it\n\nHere are a few **AI"
	checkUsage := func(t *testing.T, u openai.CompletionUsage) {
		t.Helper()
		if u.PromptTokens != 7112 || u.CompletionTokens != 463 || u.PromptTokensDetails.CachedTokens != 3072 || u.CompletionTokensDetails.ReasoningTokens != 64 {
			t.Errorf("usage = %s", u.RawJSON())
		}
	}

	t.Run("streamed text", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "chat",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage("Be brief."),
				openai.UserMessage("What are today's AI headlines?"),
			},
			MaxTokens:       openai.Int(500),
			ReasoningEffort: shared.ReasoningEffortLow,
			StreamOptions:   openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != wantText || acc.Choices[0].FinishReason != "stop" {
			t.Errorf("answer = %q, %q; want %q, stop", got, acc.Choices[0].FinishReason, wantText)
		}
		if chunks < 4 {
			t.Errorf("%d chunks: the deltas were not streamed one by one", chunks)
		}
		checkUsage(t, acc.Usage)

		req := up.last(t)
		if req.path != "/v1/responses" || req.auth != "Bearer sk-test-responses-key" {
			t.Errorf("request to %s with Authorization %q", req.path, req.auth)
		}
		b := req.body
		want := map[string]any{
			"model": "gpt-5-mini", "stream": true, "store": false, "instructions": "Be brief.",
			"max_output_tokens": 500.0, "reasoning": map[string]any{"effort": "low", "summary": "auto"},
			"input": []any{map[string]any{"type": "message", "role": "user",
				"content": []any{map[string]any{"type": "input_text", "text": "What are today's AI headlines?"}}}},
		}
		for k, v := range want {
			if got, _ := json.Marshal(b[k]); string(got) != mustJSON(v) {
				t.Errorf("upstream request %s = %s, want %s", k, got, mustJSON(v))
			}
		}
		for _, k := range []string{"messages", "stream_options", "max_tokens", "reasoning_effort"} {
			if _, ok := b[k]; ok {
				t.Errorf("upstream request has Chat Completions' %s: %v", k, b)
			}
		}
	})

	t.Run("whole text", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What are today's AI headlines?")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.Choices[0].Message.Content != wantText || c.Choices[0].FinishReason != "stop" {
			t.Errorf("answer = %s", c.RawJSON())
		}
		checkUsage(t, c.Usage)
		if b := up.last(t).body; b["stream"] != true {
			t.Errorf("a whole answer was not streamed from the upstream: %v", b)
		}
	})

	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "calculator",
		Description: openai.String("A minimal calculator for basic arithmetic. Call it once per step."),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
			"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}, "op": map[string]any{"type": "string"},
		}, "required": []string{"a", "b", "op"}},
	})}
	question := openai.UserMessage("Compute ((12 + 7) * 3) * 10 with the calculator.")
	var assistant openai.ChatCompletionMessage

	t.Run("tool call", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{question}, Tools: tools,
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		ch := acc.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
			t.Fatalf("choice = %s", ch.RawJSON())
		}
		tc := ch.Message.ToolCalls[0]
		if tc.ID != "call_AB6AaRZ1FYZB2RwS6A5vbdqn" || tc.Function.Name != "calculator" || tc.Function.Arguments != `{"a":12,"b":7,"op":"add"}` {
			t.Errorf("tool call = %+v", tc)
		}
		if acc.Usage.PromptTokens != 134 || acc.Usage.CompletionTokens != 28 {
			t.Errorf("usage = %s", acc.Usage.RawJSON())
		}
		assistant = ch.Message
		b := up.last(t).body
		want := []any{map[string]any{"type": "function", "name": "calculator",
			"description": "A minimal calculator for basic arithmetic. Call it once per step.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}, "op": map[string]any{"type": "string"},
			}, "required": []any{"a", "b", "op"}},
			"strict": false}}
		if got, _ := json.Marshal(b["tools"]); string(got) != mustJSON(want) {
			t.Errorf("upstream tools = %s, want %s", got, mustJSON(want))
		}
	})

	t.Run("tool result sent back", func(t *testing.T) {
		if len(assistant.ToolCalls) == 0 {
			t.Skip("no tool call to answer")
		}
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "chat", Tools: tools,
			Messages: []openai.ChatCompletionMessageParamUnion{question, assistant.ToParam(),
				openai.ToolMessage("19", assistant.ToolCalls[0].ID)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.Choices[0].Message.Content != wantText {
			t.Errorf("answer = %s", c.RawJSON())
		}
		in, _ := json.Marshal(up.last(t).body["input"])
		want := []any{
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Compute ((12 + 7) * 3) * 10 with the calculator."}}},
			map[string]any{"type": "function_call", "call_id": "call_AB6AaRZ1FYZB2RwS6A5vbdqn", "name": "calculator", "arguments": `{"a":12,"b":7,"op":"add"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_AB6AaRZ1FYZB2RwS6A5vbdqn", "output": "19"},
		}
		if string(in) != mustJSON(want) {
			t.Errorf("upstream input = %s, want %s", in, mustJSON(want))
		}
	})

	t.Run("failure before the first token", func(t *testing.T) {
		// The recorded stream's error event (insufficient_quota) comes
		// before any text: the client gets a real status, and the
		// upstream's code on every surface (issue 34), streamed or not.
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Spend the quota.")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "insufficient_quota" ||
			apiErr.Type != "insufficient_quota" || !strings.Contains(apiErr.Message, "You exceeded your current quota") {
			t.Errorf("error = %v, want a 429 insufficient_quota with the upstream's message", err)
		}
		for _, c := range []struct{ path, body, status, typ, code string }{
			{"/v1/chat/completions", `{"model":"chat","stream":true,"messages":[{"role":"user","content":"Spend the quota."}]}`, "429", "insufficient_quota", "insufficient_quota"},
			{"/v1/responses", `{"model":"chat","input":"Spend the quota."}`, "429", "insufficient_quota", "insufficient_quota"},
			{"/v1/responses", `{"model":"chat","stream":true,"input":"Spend the quota."}`, "429", "insufficient_quota", "insufficient_quota"},
			{"/v1/messages", `{"model":"chat","max_tokens":100,"messages":[{"role":"user","content":"Spend the quota."}]}`, "402", "billing_error", ""},
			{"/v1/messages", `{"model":"chat","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Spend the quota."}]}`, "402", "billing_error", ""},
		} {
			resp := gatewaytest.PostPath(t, gw.URL, c.path, c.body)
			var e struct {
				Error struct{ Type, Code, Message string }
			}
			json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if fmt.Sprint(resp.StatusCode) != c.status || e.Error.Type != c.typ || e.Error.Code != c.code || !strings.Contains(e.Error.Message, "quota") {
				t.Errorf("%s %s: %d %+v, want %s %s (code %q)", c.path, c.body, resp.StatusCode, e.Error, c.status, c.typ, c.code)
			}
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestResponsesUpstreamConfig: an openai-responses provider needs a
// base_url, as an openai one does, and takes no max_tokens_field.
func TestResponsesUpstreamConfig(t *testing.T) {
	noenv := func(string) string { return "" }
	for _, tt := range []struct {
		name, provider, want string
	}{
		{"valid", "{type: openai-responses, base_url: https://api.openai.com/v1, api_key_env: OPENAI_API_KEY}", ""},
		{"no base_url", "{type: openai-responses}", "providers.p.base_url"},
		{"max_tokens_field", "{type: openai-responses, base_url: https://api.openai.com/v1, max_tokens_field: max_completion_tokens}", "providers.p.max_tokens_field"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("t.yaml", []byte("providers:\n  p: "+tt.provider+"\nmodels:\n  m:\n    deployments: [{provider: p, model: gpt-5}]\n"), noenv)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// TestResponsesUpstreamStreamStacks is TestOpenStreamStacks for an
// openai-responses provider: 200 streams held open through the real
// binary cost no more goroutine stack than the other adapters' (the
// deepest moment of a stream, the first write, stays within the
// connection goroutine's 8 KiB).
func TestResponsesUpstreamStreamStacks(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: it builds and runs the binary")
	}
	up := httptest.NewServer(http.HandlerFunc(holdResponses))
	defer up.Close()
	defer up.CloseClientConnections()
	stackPer, heapPer := openStreamCost(t, "{type: openai-responses, base_url: "+up.URL+"/v1}", "gpt-5", "benchmark")
	t.Logf("per open stream: %.1f KiB of goroutine stacks, %.1f KiB of heap", stackPer, heapPer)
	if stackPer > 22 {
		t.Errorf("%.1f KiB of goroutine stacks per open stream, want at most 22 (the connection's goroutine outgrew 8 KiB)", stackPer)
	}
}

// holdResponses is a Responses API upstream that streams its first text
// (after response.created with a tool's schema, the deepest event an
// answer starts with) and then holds the stream open until the client
// leaves.
func holdResponses(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5\",\"output\":[],"+
		"\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"string\"}}}}}}}},\"strict\":false}],\"usage\":null}}\n\n"+
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"}}\n\n"+
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello\",\"logprobs\":[]}\n\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// TestQuotaMidStream: an upstream whose quota runs out after the first
// words (an error event with insufficient_quota) ends each surface's
// stream with the upstream's code, not retryable, after the text: Chat
// Completions' error event says insufficient_quota, Responses'
// response.failed too, Messages' error event billing_error (issue 34).
func TestQuotaMidStream(t *testing.T) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("Hello"))
		gatewaytest.SSEWrite(w, `data: {"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`+"\n\n")
	})
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, `
providers:
  a: {type: openai, base_url: `+up.URL+`/v1}
models:
  chat: {deployments: [{provider: a, model: m}]}
`))
	for _, c := range []struct{ path, body, event, want string }{
		{"/v1/chat/completions", `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "", `"code":"insufficient_quota"`},
		{"/v1/responses", `{"model":"chat","stream":true,"input":"hi"}`, "response.failed", `"code":"insufficient_quota"`},
		{"/v1/messages", `{"model":"chat","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "error", `"type":"billing_error"`},
	} {
		resp := gatewaytest.PostPath(t, gw.URL, c.path, c.body)
		evs := gatewaytest.ReadEvents(resp.Body)
		resp.Body.Close()
		var last gatewaytest.Event
		text := false
		for _, e := range evs {
			if e.Comment {
				continue
			}
			text = text || strings.Contains(e.Data, "Hello")
			last = e
		}
		if resp.StatusCode != 200 || !text || last.Name != c.event || !strings.Contains(last.Data, c.want) || strings.Contains(last.Data, "rate_limit") {
			t.Errorf("%s: status %d, text shown %v, last event %q %s; want the text, then %q with %s", c.path, resp.StatusCode, text, last.Name, last.Data, c.event, c.want)
		}
	}
}
