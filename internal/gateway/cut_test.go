package gateway_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
)

// stallThenReset is an upstream that sends "Hello world", stalls for
// twice the deadline (cutDeadline) and then resets its connection, as a
// hostile upstream does (a stall, then RST).
func stallThenReset(t *testing.T) *gatewaytest.Upstream {
	return gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("Hello"))
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON(" world"))
		time.Sleep(2 * cutDeadline)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		conn.(*net.TCPConn).SetLinger(0) // close sends a reset
		conn.Close()
	})
}

// cutDeadline is the alias's overall timeout in TestDeadlineCutsAStall.
const cutDeadline = 400 * time.Millisecond

// TestDeadlineCutsAStall (issue 33): the overall deadline cutting an
// answer mid-stream (the upstream stalls after its first words, then
// resets) ends every surface with its error form after the text sent,
// never as a success: Chat Completions with an error event (code timeout)
// and no finish reason, usage chunk or [DONE], which the official OpenAI
// SDK raises; Responses with response.failed (timeout); Messages with a
// timeout_error event. Not streamed, each answers 504 in its error shape.
// The request is metered timeout, its usage estimated.
func TestDeadlineCutsAStall(t *testing.T) {
	up := stallThenReset(t)
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt+"    timeout: "+cutDeadline.String()+"\n", up.URL)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tt := range []struct {
		name, path, body string
		status           int
		want             []string // in this order
		last             string   // the end of the body
		never            []string
	}{
		{name: "chat completions, streamed", path: "/v1/chat/completions", body: `{"model":"chat","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`,
			status: 200, want: []string{`"content":"Hello"`, `"content":" world"`, `data: {"error":`}, last: `"code":"timeout"}}` + "\n\n",
			never: []string{"[DONE]", `"finish_reason":"`, `"usage":{`}},
		{name: "chat completions", path: "/v1/chat/completions", body: `{"model":"chat",` + msgs + `}`,
			status: 504, want: []string{`"type":"timeout_error"`, `"code":"timeout"`}},
		{name: "responses, streamed", path: "/v1/responses", body: `{"model":"chat","stream":true,"input":"hi"}`,
			status: 200, want: []string{`"delta":"Hello"`, "event: response.failed\n", `"text":"Hello world"`, `"error":{"code":"timeout"`},
			never: []string{"response.incomplete", "response.completed"}},
		{name: "responses", path: "/v1/responses", body: `{"model":"chat","input":"hi"}`,
			status: 504, want: []string{`"code":"timeout"`}},
		{name: "messages, streamed", path: "/v1/messages", body: `{"model":"chat","max_tokens":100,"stream":true,` + msgs + `}`,
			status: 200, want: []string{`"text":"Hello"`, `"text":" world"`, "event: error\n", `"type":"timeout_error"`},
			never: []string{"message_stop", `"stop_reason":"`}},
		{name: "messages", path: "/v1/messages", body: `{"model":"chat","max_tokens":100,` + msgs + `}`,
			status: 504, want: []string{`"type":"error"`, `"type":"timeout_error"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			resp := gatewaytest.PostPath(t, gw.URL, tt.path, tt.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took, out := time.Since(start), string(b)
			if resp.StatusCode != tt.status || took > cutDeadline+time.Second {
				t.Fatalf("%d after %v, want %d at the deadline (%v):\n%s", resp.StatusCode, took, tt.status, cutDeadline, out)
			}
			at := 0
			for _, w := range tt.want {
				i := strings.Index(out[at:], w)
				if i < 0 {
					t.Fatalf("%q not found after byte %d of:\n%s", w, at, out)
				}
				at += i + len(w)
			}
			if !strings.HasSuffix(out, tt.last) {
				t.Errorf("the answer does not end with %q:\n%s", tt.last, out)
			}
			for _, n := range tt.never {
				if strings.Contains(out, n) {
					t.Errorf("a cut answer has %q, as a success would:\n%s", n, out)
				}
			}
			rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id"))
			if rec.Status != metering.StatusTimeout || !rec.Usage.Estimated || rec.Usage.OutputTokens == 0 {
				t.Errorf("metered %s, usage %+v; want timeout, the text sent, estimated", rec.Status, rec.Usage)
			}
		})
	}

	// The official OpenAI SDK, under the client's own deadline
	// (X-Request-Timeout), tighter than the alias's: streamed, it keeps
	// the text and raises the timeout; not streamed, the 504.
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHeader("X-Request-Timeout", "0.3"))
	params := openai.ChatCompletionNewParams{Model: "chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	t.Run("openai sdk, streamed", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(context.Background(), params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		err := stream.Err()
		if err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("stream error %v, want the timeout", err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello world" || acc.Choices[0].FinishReason != "" {
			t.Errorf("choices %+v; want the text sent, no finish reason", acc.Choices)
		}
	})
	t.Run("openai sdk", func(t *testing.T) {
		_, err := client.Chat.Completions.New(context.Background(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 504 || apiErr.Code != "timeout" {
			t.Errorf("err = %v; want a 504, code timeout", err)
		}
	})
}
