package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/router"
)

// surfaceModel is a model that thinks before it answers: two thinking deltas
// and a signature of format, then (for Anthropic) a redacted block, then
// the answer. It keeps the requests it was sent.
type surfaceModel struct {
	format string
	mu     sync.Mutex
	reqs   []*chat.Request
}

const (
	surfaceSig      = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrk+/=="
	surfaceRedacted = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
)

func (th *surfaceModel) Stream(_ context.Context, req *chat.Request) chat.Stream {
	th.mu.Lock()
	th.reqs = append(th.reqs, req.Clone())
	th.mu.Unlock()
	return func(yield func(chat.Chunk, error) bool) {
		chunks := []chat.Chunk{
			{Model: "surfaceModel-1", Thinking: "The user asks for "},
			{Thinking: "France's capital: \"Paris\"."},
			{Thought: &chat.Thought{Signature: surfaceSig, Format: th.format, ID: "rs_up_1"}},
		}
		if th.format == chat.ThinkingAnthropic {
			chunks = append(chunks, chat.Chunk{Thought: &chat.Thought{Redacted: surfaceRedacted, Format: th.format}})
		}
		chunks = append(chunks, chat.Chunk{Text: "Paris"}, chat.Chunk{Text: "."},
			chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 12, OutputTokens: 30, ReasoningTokens: 27}})
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
		}
	}
}

func (th *surfaceModel) last() *chat.Request {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.reqs[len(th.reqs)-1]
}

// surfaceServer serves alias "m", a surfaceModel of the format, on a real
// socket.
func surfaceServer(t *testing.T, format string) (*surfaceModel, *httptest.Server) {
	t.Helper()
	th := &surfaceModel{format: format}
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: providertest.Func(th.Stream)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(10)}))
	t.Cleanup(srv.Close)
	return th, srv
}

// postSurface posts body to path and returns the whole answer.
func postSurface(t *testing.T, srv *httptest.Server, path, body string) string {
	t.Helper()
	res, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, res.StatusCode, b)
	}
	return string(b)
}

// inOrderOf checks that the strings appear in s in the order given.
func inOrderOf(t *testing.T, s string, parts ...string) {
	t.Helper()
	at := 0
	for _, p := range parts {
		i := strings.Index(s[at:], p)
		if i < 0 {
			t.Fatalf("%q not found after byte %d of:\n%s", p, at, s)
		}
		at += i + len(p)
	}
}

// TestThinkingChatCompletions: a Chat Completions client sees the
// thinking as delta.reasoning_content, then the signed block in
// thinking_blocks, then the answer; the official OpenAI SDK reads them
// through its extra fields, streamed and not; and the blocks it sends
// back reach the upstream unchanged.
func TestThinkingChatCompletions(t *testing.T) {
	th, srv := surfaceServer(t, chat.ThinkingAnthropic)
	raw := postSurface(t, srv, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"Capital of France?"}]}`)
	inOrderOf(t, raw,
		`"delta":{"reasoning_content":"The user asks for "}`,
		`"delta":{"reasoning_content":"France's capital: \"Paris\"."}`,
		`"delta":{"thinking_blocks":[{"type":"thinking","thinking":"The user asks for France's capital: \"Paris\".","signature":"`+surfaceSig+`"}]}`,
		`"delta":{"thinking_blocks":[{"type":"redacted_thinking","data":"`+surfaceRedacted+`"}]}`,
		`"delta":{"content":"Paris"}`,
		"data: [DONE]")

	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Capital of France?")}}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var thinking, answer strings.Builder
	var blocks []json.RawMessage
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) == 0 {
			continue
		}
		d := c.Choices[0].Delta
		if f, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
			if answer.Len() > 0 {
				t.Error("thinking after the answer began")
			}
			var s string
			json.Unmarshal([]byte(f.Raw()), &s)
			thinking.WriteString(s)
		}
		if f, ok := d.JSON.ExtraFields["thinking_blocks"]; ok {
			var bs []json.RawMessage
			json.Unmarshal([]byte(f.Raw()), &bs)
			blocks = append(blocks, bs...)
		}
		answer.WriteString(d.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if thinking.String() != `The user asks for France's capital: "Paris".` || answer.String() != "Paris." || len(blocks) != 2 {
		t.Errorf("streamed: thinking %q, answer %q, blocks %s", thinking.String(), answer.String(), blocks)
	}

	c, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	if rc := m.JSON.ExtraFields["reasoning_content"].Raw(); rc != `"The user asks for France's capital: \"Paris\"."` || m.Content != "Paris." {
		t.Errorf("non-streamed: reasoning_content %s, content %q", rc, m.Content)
	}
	tb := m.JSON.ExtraFields["thinking_blocks"].Raw()
	if want := `[{"type":"thinking","thinking":"The user asks for France's capital: \"Paris\".","signature":"` + surfaceSig + `"},{"type":"redacted_thinking","data":"` + surfaceRedacted + `"}]`; tb != want {
		t.Errorf("non-streamed thinking_blocks = %s, want %s", tb, want)
	}

	// The next turn sends the blocks back on the assistant message, as
	// LiteLLM's users do to run Claude with thinking and tools.
	back := m.ToParam()
	back.OfAssistant.SetExtraFields(map[string]any{"thinking_blocks": json.RawMessage(tb), "reasoning_content": "ignored"})
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m", ReasoningEffort: shared.ReasoningEffortLow,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Capital of France?"), back, openai.UserMessage("And Spain?")}}); err != nil {
		t.Fatal(err)
	}
	got := th.last()
	want := []chat.ThinkingBlock{
		{Text: `The user asks for France's capital: "Paris".`, Signature: surfaceSig, Format: chat.ThinkingAnthropic},
		{Redacted: surfaceRedacted, Format: chat.ThinkingAnthropic},
	}
	if d := cmp.Diff(want, got.Messages[1].Thinking); d != "" {
		t.Errorf("the blocks the upstream was sent back (-want +got):\n%s", d)
	}
	if got.Thinking == nil || got.Thinking.Effort != "low" {
		t.Errorf("the upstream's thinking ask = %+v, want effort low", got.Thinking)
	}
}

// TestThinkingAnthropicMessages: the official Anthropic SDK accumulates a
// thinking block with the exact signature and a redacted_thinking block
// before the text, streamed and not, when the request enabled thinking;
// a request that did not gets no thinking blocks; and a second turn with
// a tool result carries the blocks back unchanged.
func TestThinkingAnthropicMessages(t *testing.T) {
	th, srv := surfaceServer(t, chat.ThinkingAnthropic)
	client := anthropic.NewClient(aoption.WithBaseURL(srv.URL+"/"), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	ctx := context.Background()
	user := anthropic.NewUserMessage(anthropic.NewTextBlock("Capital of France?"))
	params := anthropic.MessageNewParams{Model: "m", MaxTokens: 4096, Messages: []anthropic.MessageParam{user},
		Thinking: anthropic.ThinkingConfigParamOfEnabled(2048)}

	raw := postSurface(t, srv, "/v1/messages", `{"model":"m","max_tokens":4096,"stream":true,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"Capital of France?"}]}`)
	inOrderOf(t, raw,
		`"index":0,"content_block":{"type":"thinking","thinking":"","signature":""}`,
		`"index":0,"delta":{"type":"thinking_delta","thinking":"The user asks for "}`,
		`"index":0,"delta":{"type":"signature_delta","signature":"`+surfaceSig+`"}`,
		`event: content_block_stop`,
		`"index":1,"content_block":{"type":"redacted_thinking","data":"`+surfaceRedacted+`"}`,
		`"index":2,"content_block":{"type":"text","text":""}`,
		`"index":2,"delta":{"type":"text_delta","text":"Paris"}`,
		"event: message_stop")

	check := func(name string, msg *anthropic.Message) {
		t.Helper()
		var got []string
		for _, b := range msg.Content {
			switch b.Type {
			case "thinking":
				got = append(got, "thinking:"+b.Thinking+":"+b.Signature)
			case "redacted_thinking":
				got = append(got, "redacted:"+b.Data)
			default:
				got = append(got, b.Type+":"+b.Text)
			}
		}
		want := []string{`thinking:The user asks for France's capital: "Paris".:` + surfaceSig, "redacted:" + surfaceRedacted, "text:Paris."}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: content (-want +got):\n%s", name, d)
		}
	}
	stream := client.Messages.NewStreaming(ctx, params)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	check("streamed", &msg)
	whole, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("non-streamed", whole)

	// Without thinking enabled, no thinking blocks: only the answer.
	plain := params
	plain.Thinking = anthropic.ThinkingConfigParamUnion{}
	for _, streamed := range []bool{true, false} {
		var m *anthropic.Message
		if streamed {
			s := client.Messages.NewStreaming(ctx, plain)
			m = &anthropic.Message{}
			for s.Next() {
				m.Accumulate(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else if m, err = client.Messages.New(ctx, plain); err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text != "Paris." {
			t.Errorf("thinking not enabled, streamed %v: content %+v", streamed, m.Content)
		}
	}

	// The second turn: the assistant's turn as the SDK gives it back, with
	// a tool call and its result.
	turn := msg.ToParam()
	turn.OfAssistant.Content = append(turn.OfAssistant.Content, anthropic.NewToolUseBlock("toolu_1", map[string]string{"city": "Paris"}, "weather"))
	next := params
	next.Messages = []anthropic.MessageParam{user, turn, anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "sunny", false))}
	next.Tools = []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{}, "weather")}
	if _, err := client.Messages.New(ctx, next); err != nil {
		t.Fatal(err)
	}
	want := []chat.ThinkingBlock{
		{Text: `The user asks for France's capital: "Paris".`, Signature: surfaceSig, Format: chat.ThinkingAnthropic},
		{Redacted: surfaceRedacted, Format: chat.ThinkingAnthropic},
	}
	got := th.last()
	if d := cmp.Diff(want, got.Messages[1].Thinking); d != "" {
		t.Errorf("the blocks the upstream was sent back (-want +got):\n%s", d)
	}
	if got.Thinking == nil || got.Thinking.BudgetTokens != 2048 {
		t.Errorf("the upstream's thinking ask = %+v, want a budget of 2048", got.Thinking)
	}
}

// TestThinkingResponses: a Responses client that asked for summaries and
// encrypted content sees the summary streamed in a reasoning item, then
// the encrypted content in an item of the upstream's id (known only at
// the end), then the message; the official OpenAI SDK reads them, and
// the items sent back in the next request's input reach the upstream as
// the assistant turn's thinking, the encrypted content unchanged with the
// upstream's id.
func TestThinkingResponses(t *testing.T) {
	th, srv := surfaceServer(t, chat.ThinkingResponses)
	raw := postSurface(t, srv, "/v1/responses", `{"model":"m","stream":true,"input":"Capital of France?","reasoning":{"effort":"low","summary":"auto"},"include":["reasoning.encrypted_content"]}`)
	inOrderOf(t, raw,
		`"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_0_`,
		`"type":"response.reasoning_summary_text.delta",`, `"delta":"The user asks for "`,
		`"type":"response.output_item.done",`,
		`"output_index":1,"item":{"id":"rs_up_1","type":"reasoning","encrypted_content":"`+surfaceSig+`"`,
		`"type":"response.output_text.delta",`, `"output_index":2,`, `"delta":"Paris"`,
		`"type":"response.completed"`)

	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Capital of France?")},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow, Summary: shared.ReasoningSummaryAuto},
		Include:   []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}}
	stream := client.Responses.NewStreaming(ctx, params)
	var order []string
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.reasoning_summary_text.delta", "response.output_text.delta":
			order = append(order, ev.Type+":"+ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	wantOrder := []string{
		"response.reasoning_summary_text.delta:The user asks for ",
		`response.reasoning_summary_text.delta:France's capital: "Paris".`,
		"response.output_text.delta:Paris", "response.output_text.delta:.",
	}
	if d := cmp.Diff(wantOrder, order); d != "" {
		t.Errorf("deltas (-want +got):\n%s", d)
	}
	if len(final.Output) != 3 {
		t.Fatalf("output = %+v", final.Output)
	}
	summary, encrypted := final.Output[0].AsReasoning(), final.Output[1].AsReasoning()
	if len(summary.Summary) != 1 || summary.Summary[0].Text != `The user asks for France's capital: "Paris".` || summary.EncryptedContent != "" ||
		encrypted.ID != "rs_up_1" || encrypted.EncryptedContent != surfaceSig || final.OutputText() != "Paris." {
		t.Errorf("reasoning items %+v and %+v, text %q", summary, encrypted, final.OutputText())
	}

	// The next request sends the reasoning items back, as an SDK user with
	// store off does.
	in := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Capital of France?", responses.EasyInputMessageRoleUser),
		{OfReasoning: &[]responses.ResponseReasoningItemParam{summary.ToParam()}[0]},
		{OfReasoning: &[]responses.ResponseReasoningItemParam{encrypted.ToParam()}[0]},
		responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{Text: "Paris."}}}, "msg_1", responses.ResponseOutputMessageStatusCompleted),
		responses.ResponseInputItemParamOfMessage("And Spain?", responses.EasyInputMessageRoleUser),
	}
	if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: in}}); err != nil {
		t.Fatal(err)
	}
	got := th.last()
	want := []chat.ThinkingBlock{
		{Text: `The user asks for France's capital: "Paris".`, Format: chat.ThinkingResponses, ID: summary.ID},
		{Signature: surfaceSig, Format: chat.ThinkingResponses, ID: "rs_up_1"},
	}
	if d := cmp.Diff(want, got.Messages[1].Thinking); d != "" || got.Messages[1].Content != "Paris." {
		t.Errorf("the assistant turn sent upstream: %q, thinking (-want +got):\n%s", got.Messages[1].Content, d)
	}
}

// TestHiddenThinkingCommitsNothing: a model that thinks and then fails
// before its answer, for a client that did not ask to see the thinking,
// gets the failure's real status, not a 200 with an error event: the
// hidden thinking wrote nothing. A Chat Completions client, which is
// shown the thinking, gets its 200 at the first thought.
func TestHiddenThinkingCommitsNothing(t *testing.T) {
	failing := providertest.Func(func(context.Context, *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			if yield(chat.Chunk{Thinking: "Let me see."}, nil) {
				yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryOverloaded, Message: "overloaded", Status: 529})
			}
		}
	})
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", MaxAttempts: 1, Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: failing}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(10)}))
	defer srv.Close()
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/v1/messages", `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, 529},
		{"/v1/responses", `{"model":"m","stream":true,"reasoning":{"effort":"low"},"input":"hi"}`, 503},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200},
	} {
		res, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.path, res.StatusCode, b, tc.status)
		}
	}
}
