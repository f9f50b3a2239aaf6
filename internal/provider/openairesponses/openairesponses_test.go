package openairesponses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture reads a stream from the wire package's testdata (see its
// SOURCES.md).
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../wire/responses/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// setup starts a fake upstream and a provider for it, on a transport of
// the test's own so that no connection outlives it.
func setup(t *testing.T, h http.HandlerFunc, cfg Config) *Provider {
	t.Helper()
	srv := httptest.NewServer(h)
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.CloseClientConnections()
		srv.Close()
	})
	cfg.Name = "oai"
	cfg.BaseURL = srv.URL + "/v1/"
	cfg.Client = &http.Client{Transport: tr}
	return New(cfg)
}

// replay answers with body as an event stream, a few events per write.
func replay(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		evs := bytes.SplitAfter(body, []byte("\n\n"))
		for i, ev := range evs {
			w.Write(ev)
			if i%3 == 2 {
				w.(http.Flusher).Flush()
			}
		}
	}
}

func request() *chat.Request {
	return &chat.Request{Model: "gpt-5-mini", Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: "Be brief."},
		{Role: chat.RoleUser, Content: "What is 12+7, times 3, times 10?"},
	}, Tools: []chat.Tool{{Name: "calculator", Parameters: json.RawMessage(`{"type":"object"}`)}}}
}

// TestStream: the request goes to BaseURL/responses with the key as a
// bearer token and the configured headers, asks for a stream, stores
// nothing, and carries the conversation; the recorded answer comes back
// normalised.
func TestStream(t *testing.T) {
	var got struct {
		path, auth, accept, ctype, org string
		body                           map[string]any
	}
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		got.path, got.auth, got.accept = r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept")
		got.ctype, got.org = r.Header.Get("Content-Type"), r.Header.Get("OpenAI-Organization")
		json.NewDecoder(r.Body).Decode(&got.body)
		replay(fixture(t, "upstream_reasoning_tool_call.sse"))(w, r)
	}, Config{HTTPConfig: provider.HTTPConfig{APIKey: "sk-test-key", Headers: map[string]string{"OpenAI-Organization": "org-1"}}})
	resp, err := chat.Collect(p.Stream(context.Background(), request()))
	if err != nil {
		t.Fatal(err)
	}
	want := &chat.Response{Model: "gpt-5.1-codex-max", Choices: []chat.Choice{{FinishReason: chat.FinishToolCalls,
		ToolCalls: []chat.ToolCall{{ID: "call_AB6AaRZ1FYZB2RwS6A5vbdqn", Name: "calculator", Arguments: `{"a":12,"b":7,"op":"add"}`}}}},
		Usage: &chat.Usage{InputTokens: 134, OutputTokens: 28}}
	if diff := cmp.Diff(want, resp, cmpopts.IgnoreFields(chat.Choice{}, "Thinking")); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	// The reasoning summary, signed by the item's encrypted_content
	// (checked byte for byte in the wire package's tests).
	if th := resp.Choices[0].Thinking; len(th) != 1 || !strings.HasPrefix(th[0].Text, "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7") ||
		!strings.HasPrefix(th[0].Signature, "gAAAAABpPDIVOKrs") || th[0].Format != chat.ThinkingResponses || th[0].ID != "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9" {
		t.Errorf("thinking = %+v", th)
	}
	if got.path != "/v1/responses" || got.auth != "Bearer sk-test-key" || got.org != "org-1" ||
		got.accept != "text/event-stream" || got.ctype != "application/json" {
		t.Errorf("request: %+v", got)
	}
	b := got.body
	if b["model"] != "gpt-5-mini" || b["stream"] != true || b["store"] != false || b["instructions"] != "Be brief." {
		t.Errorf("body = %v", b)
	}
	if in, _ := b["input"].([]any); len(in) != 1 {
		t.Errorf("input = %v, want the user's message", b["input"])
	}
	if tools, _ := b["tools"].([]any); len(tools) != 1 || tools[0].(map[string]any)["strict"] != false {
		t.Errorf("tools = %v", b["tools"])
	}
}

func TestStreamFixtures(t *testing.T) {
	for _, tt := range []struct {
		file string
		want *chat.Response
		err  chat.Category
	}{
		{file: "upstream_phase_text.sse", want: &chat.Response{Model: "gpt-5.3-codex",
			Choices: []chat.Choice{{Text: "Got it\n\nHere are a few **AI", FinishReason: chat.FinishStop}},
			Usage:   &chat.Usage{InputTokens: 7112, OutputTokens: 463, CachedInputTokens: 3072, ReasoningTokens: 64}}},
		{file: "constructed_reasoning_incomplete.sse", want: &chat.Response{Model: "gpt-5-mini-2025-08-07",
			Choices: []chat.Choice{{Text: "Grüße aus 東京 🗼 — the \"quick\" answer is: Tokyo's population is about 14\u00a0million, and", FinishReason: chat.FinishLength,
				Thinking: []chat.ThinkingBlock{{Text: "**Planning a Grüße reply**\n\nKeep it short."}}}},
			Usage: &chat.Usage{InputTokens: 2213, OutputTokens: 64, CachedInputTokens: 2048, ReasoningTokens: 38}}},
		{file: "upstream_error_quota.sse", want: &chat.Response{Model: "gpt-5-nano-2025-08-07"}, err: chat.CategoryRateLimited},
	} {
		t.Run(tt.file, func(t *testing.T) {
			p := setup(t, replay(fixture(t, tt.file)), Config{})
			resp, err := chat.Collect(p.Stream(context.Background(), request()))
			if tt.err != "" {
				if ce := chat.AsError(err); err == nil || ce.Category != tt.err || ce.Provider != "oai" {
					t.Errorf("error = %v, want %s from oai", err, tt.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, resp, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamErrorStatus(t *testing.T) {
	tests := []struct {
		name   string
		status int
		ctype  string
		body   string
		want   *chat.Error
	}{
		{"400 below the minimum", 400, "application/json",
			`{"error":{"message":"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 10 instead.","type":"invalid_request_error","param":"max_output_tokens","code":"integer_below_min_value"}}`,
			&chat.Error{Category: chat.CategoryInvalidRequest, Status: 400, Provider: "oai",
				Message: "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 10 instead."}},
		{"400 context length", 400, "application/json",
			`{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
			&chat.Error{Category: chat.CategoryContextLength, Status: 400, Provider: "oai",
				Message: "Your input exceeds the context window of this model. Please adjust your input and try again."}},
		{"404 model", 404, "application/json",
			`{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			&chat.Error{Category: chat.CategoryNotFound, Status: 404, Provider: "oai", Message: "The model 'gpt-9' does not exist or you do not have access to it."}},
		{"503 html", 503, "text/html", "<html><title>Service Unavailable</title></html>",
			&chat.Error{Category: chat.CategoryOverloaded, Status: 503, Retryable: true, Provider: "oai", Message: `upstream answered 503 with an HTML page (title: "Service Unavailable")`}},
		{"200 with an error object", 200, "application/json", `{"error":{"message":"quota exceeded","type":"insufficient_quota","code":"insufficient_quota"}}`,
			&chat.Error{Category: chat.CategoryRateLimited, Status: 502, Provider: "oai", Message: "quota exceeded", Code: chat.CodeInsufficientQuota}},
		{"200 with a whole response", 200, "application/json", `{"id":"resp_1","object":"response","status":"completed","output":[]}`,
			&chat.Error{Category: chat.CategoryProtocol, Status: 502, Retryable: true, Provider: "oai", Message: "upstream answered with JSON, not an event stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := setup(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}, Config{})
			_, err := chat.Collect(p.Stream(context.Background(), request()))
			var ce *chat.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want *chat.Error", err)
			}
			if diff := cmp.Diff(tt.want, ce, cmpopts.IgnoreFields(chat.Error{}, "Err")); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// A request the Responses API cannot take is refused before anything is
// sent.
func TestStreamInvalidRequest(t *testing.T) {
	p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "oai", BaseURL: "http://127.0.0.1:1"}})
	req := request()
	req.Stop = []string{"END"}
	_, err := chat.Collect(p.Stream(context.Background(), req))
	if ce := chat.AsError(err); ce.Category != chat.CategoryInvalidRequest || ce.Provider != "oai" || !strings.Contains(ce.Message, "stop") {
		t.Errorf("error = %v, want invalid_request from oai about stop", err)
	}
}

func TestStreamUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "oai", BaseURL: url, Client: &http.Client{Transport: &http.Transport{}}}})
	_, err := chat.Collect(p.Stream(context.Background(), request()))
	if ce := chat.AsError(err); ce.Category != chat.CategoryUpstreamUnavailable || !ce.Retryable || ce.Provider != "oai" {
		t.Errorf("error = %v, want a retryable upstream_unavailable", err)
	}
}

var errCause = errors.New("first token timeout (test)")

// Cancelling the context mid-stream ends the upstream request at once and
// the stream yields the context's cause.
func TestStreamCancel(t *testing.T) {
	ended := make(chan time.Time, 1)
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events(created, msgAdded, delta("The")))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		ended <- time.Now()
	}, Config{})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var (
		texts     []string
		err       error
		cancelled time.Time
	)
	for ch, e := range p.Stream(ctx, request()) {
		if e != nil {
			err = e
			break
		}
		if ch.Text != "" {
			texts = append(texts, ch.Text)
			cancelled = time.Now()
			cancel(errCause)
		}
	}
	if !errors.Is(err, errCause) {
		t.Errorf("error = %v, want the context's cause", err)
	}
	if len(texts) != 1 || texts[0] != "The" {
		t.Errorf("texts = %q", texts)
	}
	select {
	case at := <-ended:
		if d := at.Sub(cancelled); d > 200*time.Millisecond {
			t.Errorf("the upstream request ended %v after the cancel", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request did not end")
	}
}

// Breaking out of the loop ends the upstream request too.
func TestStreamBreak(t *testing.T) {
	ended := make(chan struct{})
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events(created, msgAdded, delta("The")))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ended)
	}, Config{})
	for ch, err := range p.Stream(context.Background(), request()) {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Text != "" {
			break
		}
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request did not end after break")
	}
}

// The terminal event ends the answer even when the upstream keeps the
// response open after it.
func TestStreamEndsAtTerminalEvent(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events(created, msgAdded, delta("Hi"), terminal("response.completed", "completed", "null", usage("3", "0", "1", "0"))))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, Config{})
	done := make(chan error, 1)
	go func() {
		_, err := chat.Collect(p.Stream(context.Background(), request()))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the answer did not end at response.completed")
	}
}
