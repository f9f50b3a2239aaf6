package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
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

// fixture reads a recorded stream from the wire package's testdata (see
// its SOURCES.md).
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../wire/anthropic/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// setup starts a fake upstream and a provider for it, on a transport of
// the test's own so that no connection outlives it.
func setup(t *testing.T, h http.HandlerFunc, cfg Config) (*Provider, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.CloseClientConnections()
		srv.Close()
	})
	cfg.Name = "claude"
	cfg.BaseURL = srv.URL + "/v1/"
	cfg.Client = &http.Client{Transport: tr}
	return New(cfg), srv
}

// replay answers with body as an event stream, a few events per write.
func replay(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		events := bytes.SplitAfter(body, []byte("\n\n"))
		for i, ev := range events {
			w.Write(ev)
			if i%3 == 2 {
				w.(http.Flusher).Flush()
			}
		}
	}
}

var userHi = &chat.Request{Model: "claude-3-7-sonnet-latest", Messages: []chat.Message{{Role: chat.RoleUser, Content: "Weather in SF?"}}}

func TestStreamFixtures(t *testing.T) {
	tests := []struct {
		file  string
		text  string
		tools []chat.ToolCall
		want  chat.FinishReason
		usage *chat.Usage
	}{
		{
			file:  "anthropic_messages_stream.sse",
			text:  "The current weather in San Francisco is 68 degrees Fahrenheit.",
			want:  chat.FinishStop,
			usage: &chat.Usage{InputTokens: 509, OutputTokens: 19},
		},
		{
			file:  "anthropic_tool_use_stream.sse",
			text:  "I'll get the current weather in San Francisco for you in Fahrenheit.",
			tools: []chat.ToolCall{{ID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Name: "get_weather", Arguments: `{"city": "San Francisco", "units": "fahrenheit"}`}},
			want:  chat.FinishToolCalls,
			usage: &chat.Usage{InputTokens: 397, OutputTokens: 89},
		},
		{
			file:  "openllmetry_prompt_caching_read.sse",
			want:  chat.FinishStop,
			usage: &chat.Usage{InputTokens: 1169, OutputTokens: 221, CachedInputTokens: 1165},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p, _ := setup(t, replay(fixture(t, tt.file)), Config{})
			resp, err := chat.Collect(p.Stream(context.Background(), userHi))
			if err != nil {
				t.Fatalf("Stream() error = %v", err)
			}
			if len(resp.Choices) != 1 {
				t.Fatalf("%d choices", len(resp.Choices))
			}
			ch := resp.Choices[0]
			if tt.text != "" && ch.Text != tt.text {
				t.Errorf("text = %q, want %q", ch.Text, tt.text)
			}
			if diff := cmp.Diff(tt.tools, ch.ToolCalls, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			if ch.FinishReason != tt.want {
				t.Errorf("finish = %q, want %q", ch.FinishReason, tt.want)
			}
			if diff := cmp.Diff(tt.usage, resp.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if resp.Model == "" {
				t.Error("no model")
			}
		})
	}
}

// TestStreamRequest checks what is sent: the path, the headers and a
// streaming body with the default max_tokens.
func TestStreamRequest(t *testing.T) {
	type seen struct {
		method, path string
		header       http.Header
		body         map[string]any
	}
	got := make(chan seen, 1)
	body := fixture(t, "anthropic_messages_stream.sse")
	p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		got <- seen{r.Method, r.URL.Path, r.Header.Clone(), b}
		replay(body)(w, r)
	}, Config{HTTPConfig: provider.HTTPConfig{APIKey: "sk-ant-test", Headers: map[string]string{"Anthropic-Beta": "fine-grained-tool-streaming-2025-05-14"}}, DefaultMaxTokens: 777, PromptCaching: true})
	req := userHi.Clone()
	req.Messages = append([]chat.Message{{Role: chat.RoleSystem, Content: "Be brief.", CacheBreakpoint: true}}, req.Messages...)
	req.Extra = map[string]json.RawMessage{"logprobs": json.RawMessage("true")}
	if _, err := chat.Collect(p.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.method != http.MethodPost || s.path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", s.method, s.path)
	}
	for k, want := range map[string]string{
		"X-Api-Key":         "sk-ant-test",
		"Anthropic-Version": "2023-06-01",
		"Content-Type":      "application/json",
		"Accept":            "text/event-stream",
		"Anthropic-Beta":    "fine-grained-tool-streaming-2025-05-14",
		"Authorization":     "",
	} {
		if v := s.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	want := map[string]any{
		"model":      "claude-3-7-sonnet-latest",
		"max_tokens": 777.0,
		"stream":     true,
		"system":     []any{map[string]any{"type": "text", "text": "Be brief.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages":   []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Weather in SF?"}}}},
	}
	if diff := cmp.Diff(want, s.body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestStreamHTTPErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   chat.Error
	}{
		{
			name: "rate limited", status: 429, header: map[string]string{"Retry-After": "7"},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			want: chat.Error{Category: chat.CategoryRateLimited, Status: 429, Provider: "claude", Retryable: true, RetryAfter: 7 * time.Second, Message: "Number of request tokens has exceeded your per-minute rate limit"},
		},
		{
			name: "overloaded", status: 529,
			body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			want: chat.Error{Category: chat.CategoryOverloaded, Status: 529, Provider: "claude", Retryable: true, Message: "Overloaded"},
		},
		{
			name: "bad key", status: 401,
			body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			want: chat.Error{Category: chat.CategoryAuth, Status: 401, Provider: "claude",
				Message: `provider "claude" rejected the gateway's credentials (HTTP 401): none are configured, set its api_key_env or headers`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}, Config{})
			_, err := chat.Collect(p.Stream(context.Background(), userHi))
			var ce *chat.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want a *chat.Error", err)
			}
			if diff := cmp.Diff(&tt.want, ce); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamErrorEvent(t *testing.T) {
	p, _ := setup(t, replay(fixture(t, "spliced_error_mid_stream.sse")), Config{})
	resp, err := chat.Collect(p.Stream(context.Background(), userHi))
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Category != chat.CategoryOverloaded || !ce.Retryable || ce.Provider != "claude" {
		t.Fatalf("error = %#v, want a retryable overloaded error from claude", err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Text != "The current weather" || resp.Choices[0].FinishReason != "" {
		t.Errorf("before the error: %+v", resp.Choices)
	}
}

func TestStreamTruncated(t *testing.T) {
	full := fixture(t, "anthropic_messages_stream.sse")
	cut := full[:bytes.Index(full, []byte("event: message_stop"))]
	p, _ := setup(t, replay(cut), Config{})
	resp, err := chat.Collect(p.Stream(context.Background(), userHi))
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Category != chat.CategoryProtocol || !errors.Is(err, chat.ErrTruncated) || ce.Provider != "claude" {
		t.Fatalf("error = %v, want a truncation from claude", err)
	}
	if resp.Choices[0].FinishReason != "" || resp.Usage != nil {
		t.Errorf("a truncated stream looks finished: %+v, usage %+v", resp.Choices[0], resp.Usage)
	}
}

func TestStreamEncodeError(t *testing.T) {
	p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request that cannot be encoded was sent")
	}, Config{})
	req := &chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleTool, Content: "orphan"}}}
	_, err := chat.Collect(p.Stream(context.Background(), req))
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Category != chat.CategoryInvalidRequest || ce.Provider != "claude" {
		t.Errorf("error = %v, want an invalid request from claude", err)
	}
}

var errGone = errors.New("the client went away")

// hang answers with the start of a stream and then waits for the request
// to end, reporting when it saw it.
func hang(ended chan<- time.Time) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Read the body as a real server does: net/http notices a
		// closed connection only once it has.
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		ended <- time.Now()
	}
}

// TestStreamCancel cancels mid-stream: the upstream request ends at once
// and the stream yields the context's cause, not a broken upstream.
func TestStreamCancel(t *testing.T) {
	ended := make(chan time.Time, 1)
	p, _ := setup(t, hang(ended), Config{})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var (
		cancelled time.Time
		text      strings.Builder
		got       error
	)
	for c, err := range p.Stream(ctx, userHi) {
		if err != nil {
			got = err
			break
		}
		text.WriteString(c.Text)
		if c.Visible() && cancelled.IsZero() {
			cancelled = time.Now()
			cancel(errGone)
		}
	}
	if !errors.Is(got, errGone) {
		t.Errorf("stream error = %v, want the context's cause %v", got, errGone)
	}
	if text.String() != "Hel" {
		t.Errorf("text = %q", text.String())
	}
	select {
	case at := <-ended:
		d := at.Sub(cancelled)
		if d > 50*time.Millisecond {
			t.Errorf("the upstream request ended %v after the cancel, want under 50ms", d)
		}
		t.Logf("the upstream request ended %v after the cancel", d)
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request did not end after the cancel")
	}
}

// TestStreamCancelBeforeHeaders cancels while the upstream has not
// answered yet.
func TestStreamCancelBeforeHeaders(t *testing.T) {
	ended := make(chan time.Time, 1)
	p, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		ended <- time.Now()
	}, Config{})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	time.AfterFunc(20*time.Millisecond, func() { cancel(chat.ErrFirstTokenTimeout) })
	_, err := chat.Collect(p.Stream(ctx, userHi))
	if !errors.Is(err, chat.ErrFirstTokenTimeout) {
		t.Errorf("error = %v, want the context's cause", err)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request did not end after the cancel")
	}
}

// TestStreamBreak stops reading after the first visible chunk: the
// upstream request ends at once.
func TestStreamBreak(t *testing.T) {
	ended := make(chan time.Time, 1)
	p, _ := setup(t, hang(ended), Config{})
	var stopped time.Time
	for c, err := range p.Stream(context.Background(), userHi) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Visible() {
			stopped = time.Now()
			break
		}
	}
	select {
	case at := <-ended:
		d := at.Sub(stopped)
		if d > 50*time.Millisecond {
			t.Errorf("the upstream request ended %v after the break, want under 50ms", d)
		}
		t.Logf("the upstream request ended %v after the break", d)
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request did not end after the break")
	}
}

// TestStreamReusesConnection checks that a finished stream's connection
// goes back to the pool (the body is drained after message_stop).
func TestStreamReusesConnection(t *testing.T) {
	p, _ := setup(t, replay(fixture(t, "anthropic_messages_stream.sse")), Config{})
	for i := range 3 {
		reused := false
		idle := make(chan struct{}, 1)
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn:     func(info httptrace.GotConnInfo) { reused = info.Reused },
			PutIdleConn: func(error) { idle <- struct{}{} },
		})
		if _, err := chat.Collect(p.Stream(ctx, userHi)); err != nil {
			t.Fatal(err)
		}
		if i > 0 && !reused {
			t.Errorf("request %d dialled a new connection", i)
		}
		// The stream ended at message_stop; the rest of the body is read
		// in the background, and then the connection goes back to the
		// pool. The next request waits for that, not for a guess.
		select {
		case <-idle:
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d: the connection never went back to the pool", i)
		}
	}
}
