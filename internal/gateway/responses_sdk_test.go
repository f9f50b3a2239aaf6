package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// outputText joins the text of a response's message items.
func outputText(r *responses.Response) string {
	var b strings.Builder
	for _, it := range r.Output {
		if it.Type != "message" {
			continue
		}
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func input(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// TestOpenAISDKResponses drives POST /v1/responses with the official
// OpenAI Go SDK's Responses client: whole and streamed answers, usage, a
// tool call and its result sent back, a cut answer, a failure mid-stream,
// and client errors.
func TestOpenAISDKResponses(t *testing.T) {
	gw := gatewaytest.StartYAML(t, `
providers:
  sim: {type: sim}
models:
  fast:
    deployments: [{provider: sim, model: small}]
`, "")
	client := sdkClient(gw.URL)
	ctx := context.Background()

	t.Run("non-streaming", func(t *testing.T) {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "fast", Input: input("Say something. [sim ttft=20ms gap=2ms tokens=25]"),
			Instructions: openai.String("Be brief."),
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "completed" || outputText(r) == "" || !strings.HasPrefix(r.ID, "resp_") {
			t.Fatalf("response = %s", r.RawJSON())
		}
		if r.Usage.OutputTokens != 25 || r.Usage.InputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+25 {
			t.Errorf("usage = %+v, want 25 output tokens", r.Usage)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "fast", Input: input("Say something. [sim ttft=20ms gap=2ms tokens=25]"),
		})
		var deltas strings.Builder
		var final *responses.Response
		n, seq := 0, int64(-1)
		for stream.Next() {
			ev := stream.Current()
			if ev.SequenceNumber != seq+1 {
				t.Errorf("sequence_number %d after %d", ev.SequenceNumber, seq)
			}
			seq = ev.SequenceNumber
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
				n++
			case "response.completed":
				r := ev.Response
				final = &r
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if final == nil {
			t.Fatal("no response.completed event")
		}
		if n != 25 {
			t.Errorf("%d text deltas, want one per token (25)", n)
		}
		if outputText(final) != deltas.String() {
			t.Errorf("completed text %q != streamed %q", outputText(final), deltas.String())
		}
		if final.Usage.OutputTokens != 25 {
			t.Errorf("usage = %+v", final.Usage)
		}
	})

	t.Run("tool call and result", func(t *testing.T) {
		tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)}
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "fast", Input: input("Weather in Oslo? [sim tool=get_weather ttft=10ms gap=1ms]"), Tools: tools,
		})
		var args strings.Builder
		var call *responses.ResponseFunctionToolCall
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "response.function_call_arguments.delta":
				args.WriteString(ev.Delta)
			case "response.output_item.done":
				if ev.Item.Type == "function_call" {
					fc := ev.Item.AsFunctionCall()
					call = &fc
				}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if call == nil || call.Name != "get_weather" || call.CallID == "" || call.Arguments != args.String() || !json.Valid([]byte(call.Arguments)) {
			t.Fatalf("function call = %+v (streamed arguments %q)", call, args.String())
		}
		// The call and its output go back as input items, as the SDKs do.
		out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny, 18 C")
		out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "fast", Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("Weather in Oslo?", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
				out,
				responses.ResponseInputItemParamOfMessage("Thanks. [sim echo ttft=5ms gap=1ms]", responses.EasyInputMessageRoleUser),
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := outputText(r); got != "Thanks." {
			t.Errorf("echo = %q", got)
		}
	})

	t.Run("cut by max_output_tokens", func(t *testing.T) {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "fast", Input: input("Go on. [sim ttft=5ms gap=1ms]"), MaxOutputTokens: openai.Int(5),
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || r.Usage.OutputTokens != 5 {
			t.Errorf("status %q, incomplete %q, usage %+v", r.Status, r.IncompleteDetails.Reason, r.Usage)
		}
	})

	t.Run("cut by the overall timeout", func(t *testing.T) {
		params := responses.ResponseNewParams{Model: "fast", Input: input("Go on. [sim ttft=20ms gap=10ms tokens=200]")}
		deadline := option.WithHeader("X-Request-Timeout", "0.3")
		// Streamed: the text, then response.failed with a timeout (no
		// Responses reason says "cut by a deadline").
		stream := client.Responses.NewStreaming(ctx, params, deadline)
		var last responses.ResponseStreamEventUnion
		for stream.Next() {
			last = stream.Current()
			if last.Type == "response.completed" || last.Type == "response.incomplete" {
				t.Fatalf("a cut stream ended as %s", last.Type)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		r := &last.Response
		if last.Type != "response.failed" || r.Status != "failed" || r.Error.Code != "timeout" || outputText(r) == "" {
			t.Fatalf("last event = %s; want response.failed (timeout) with the text before the cut", last.RawJSON())
		}
		if n := r.Usage.OutputTokens; n == 0 || n >= 200 {
			t.Errorf("%d output tokens billed, want those delivered before the cut", n)
		}
		// Not streamed: a 504, which the SDK raises.
		_, err := client.Responses.New(ctx, params, deadline)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 504 || apiErr.Code != "timeout" {
			t.Errorf("not streamed: err = %v; want a 504, code timeout", err)
		}
	})

	t.Run("failure mid-stream", func(t *testing.T) {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "fast", Input: input("x [sim fault=error_mid after=5 ttft=5ms gap=1ms]"),
		})
		var text strings.Builder
		var last responses.ResponseStreamEventUnion
		for stream.Next() {
			last = stream.Current()
			if last.Type == "response.output_text.delta" {
				text.WriteString(last.Delta)
			}
			if last.Type == "response.completed" {
				t.Fatal("a failed stream must not complete")
			}
		}
		if last.Type != "response.failed" || last.Response.Status != "failed" || last.Response.Error.Message == "" {
			t.Fatalf("last event = %s", last.RawJSON())
		}
		if text.Len() == 0 || outputText(&last.Response) != text.String() {
			t.Errorf("the failed response's output %q should hold the text sent (%q)", outputText(&last.Response), text.String())
		}
	})

	t.Run("client errors", func(t *testing.T) {
		for _, tt := range []struct {
			params responses.ResponseNewParams
			status int
			param  string
		}{
			{responses.ResponseNewParams{Model: "nope", Input: input("x")}, 404, "model"},
			{responses.ResponseNewParams{Model: "fast", Input: input("x"), PreviousResponseID: openai.String("resp_1")}, 400, "previous_response_id"},
		} {
			_, err := client.Responses.New(ctx, tt.params)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status || apiErr.Param != tt.param {
				t.Errorf("error = %v, want %d on %s", err, tt.status, tt.param)
			}
		}
	})
}

// TestResponsesItemReference: a client that leaves store on refers to an
// earlier answer by its item ID instead of sending its text back (the
// Vercel AI SDK's default); firstword resolves it to the text it sent,
// for the tenant it sent it to, and says what to do when it cannot.
func TestResponsesItemReference(t *testing.T) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Paris is the capital."},"finish_reason":null}]}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`+"\n\ndata: [DONE]\n\n")
	})
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig, up.URL)
	client := sdkClient(gw.URL)
	ctx := context.Background()
	for _, streamed := range []bool{false, true} {
		first := responses.ResponseNewParams{Model: "chat", Input: input("Capital of France?")}
		var id string
		if streamed {
			stream := client.Responses.NewStreaming(ctx, first)
			for stream.Next() {
				if ev := stream.Current(); ev.Type == "response.output_item.done" {
					id = ev.Item.ID
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			r, err := client.Responses.New(ctx, first)
			if err != nil {
				t.Fatal(err)
			}
			id = r.Output[0].ID
		}
		if id == "" {
			t.Fatal("no message item ID")
		}
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Capital of France?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfItemReference(id),
			responses.ResponseInputItemParamOfMessage("And of Spain?", responses.EasyInputMessageRoleUser),
		}}})
		if err != nil {
			var apiErr *openai.Error
			errors.As(err, &apiErr)
			t.Fatalf("streamed=%v: %v %s", streamed, err, apiErr.RawJSON())
		}
		bodies := up.Requests()
		last := bodies[len(bodies)-1]
		if !strings.Contains(last, `{"role":"assistant","content":"Paris is the capital."}`) {
			t.Errorf("streamed=%v: the upstream did not get the referenced answer: %s", streamed, last)
		}
	}
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfItemReference("msg_0_resp_unknown"),
		responses.ResponseInputItemParamOfMessage("Hi", responses.EasyInputMessageRoleUser),
	}}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "store: false") {
		t.Errorf("unknown reference: %v, want a 400 saying to send the text (store: false)", err)
	}
}
