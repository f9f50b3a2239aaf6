package ollama

import (
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
	"go.uber.org/goleak"
)

// The captures in testdata are copies of ../../wire/ollama/testdata (see
// SOURCES.md there).

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func request(model string) *chat.Request {
	return &chat.Request{Model: model, Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hello"}}}
}

// replay serves a capture as Ollama does.
func replay(t *testing.T, file string, check func(r *http.Request, body []byte)) *httptest.Server {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if check != nil {
			check(r, body)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write(raw)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStream(t *testing.T) {
	var gotMethod, gotPath, gotAuth string
	var gotBody struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	srv := replay(t, "ollama_chat.ndjson", func(r *http.Request, body []byte) {
		gotMethod, gotPath, gotAuth = r.Method, r.URL.Path, r.Header.Get("Authorization")
		json.Unmarshal(body, &gotBody)
	})
	p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "local", BaseURL: srv.URL + "/", Headers: map[string]string{"Authorization": "Bearer proxy"}, Client: srv.Client()}})
	resp, err := chat.Collect(p.Stream(context.Background(), request("qwen2.5")))
	if err != nil {
		t.Fatal(err)
	}
	want := &chat.Response{
		Model:   "qwen2.5",
		Choices: []chat.Choice{{Text: "Hello! How can I assist you today?", FinishReason: chat.FinishStop}},
		Usage:   &chat.Usage{InputTokens: 30, OutputTokens: 10},
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if gotMethod != http.MethodPost || gotPath != "/api/chat" || gotAuth != "Bearer proxy" {
		t.Errorf("request %s %s, Authorization %q", gotMethod, gotPath, gotAuth)
	}
	if gotBody.Model != "qwen2.5" || !gotBody.Stream {
		t.Errorf("body = %+v", gotBody)
	}
}

// The APIKey goes as a bearer token, unless Headers set Authorization
// (a proxy's own scheme), whatever their case.
func TestStreamAuthorization(t *testing.T) {
	tests := []struct {
		name    string
		apiKey  string
		headers map[string]string
		want    string
	}{
		{name: "none", want: ""},
		{name: "api key", apiKey: "olm-key", want: "Bearer olm-key"},
		{name: "header", headers: map[string]string{"Authorization": "Basic cHJveHk="}, want: "Basic cHJveHk="},
		{name: "header wins", apiKey: "olm-key", headers: map[string]string{"authorization": "Basic cHJveHk="}, want: "Basic cHJveHk="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			srv := replay(t, "ollama_chat.ndjson", func(r *http.Request, _ []byte) { got = r.Header.Values("Authorization") })
			p := New(Config{HTTPConfig: provider.HTTPConfig{BaseURL: srv.URL, APIKey: tt.apiKey, Headers: tt.headers, Client: srv.Client()}})
			if _, err := chat.Collect(p.Stream(context.Background(), request("qwen2.5"))); err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(got, ", "); g != tt.want {
				t.Errorf("Authorization = %q, want %q", g, tt.want)
			}
		})
	}
}

func TestStreamToolCall(t *testing.T) {
	srv := replay(t, "ollama_tool_call.ndjson", nil)
	p := New(Config{HTTPConfig: provider.HTTPConfig{BaseURL: srv.URL, Client: srv.Client()}})
	resp, err := chat.Collect(p.Stream(context.Background(), request("qwen3.6:latest")))
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.Choice{{FinishReason: chat.FinishToolCalls, ToolCalls: []chat.ToolCall{{ID: "call_lj18tar0", Name: "read_file", Arguments: `{"path":"/etc/hostname"}`}}}}
	if diff := cmp.Diff(want, resp.Choices); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
}

func TestStreamErrorStatus(t *testing.T) {
	body404, _ := os.ReadFile("testdata/ollama_error_404.json")
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   *chat.Error
	}{
		{"model not found", 404, nil, string(body404),
			&chat.Error{Category: chat.CategoryNotFound, Status: 404, Provider: "local", Message: `model "bad_model" not found, try pulling it first`}},
		{"429 behind a proxy, with Retry-After", 429, map[string]string{"Retry-After": "3"}, `{"error":"too many requests"}`,
			&chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true, RetryAfter: 3 * time.Second, Provider: "local", Message: "too many requests"}},
		{"busy", 503, nil, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`,
			&chat.Error{Category: chat.CategoryOverloaded, Status: 503, Retryable: true, Provider: "local", Message: "server busy, please try again.  maximum pending requests exceeded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "local", BaseURL: srv.URL, Client: srv.Client()}})
			_, err := chat.Collect(p.Stream(context.Background(), request("bad_model")))
			var ce *chat.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want *chat.Error", err)
			}
			if diff := cmp.Diff(tt.want, ce); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// An error after the 200: Ollama writes an {"error": ...} line.
func TestStreamErrorLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":"Hel"},"done":false}`+"\n")
		io.WriteString(w, `{"error":"an error was encountered while running the model: unexpected EOF"}`+"\n")
	}))
	defer srv.Close()
	p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "local", BaseURL: srv.URL, Client: srv.Client()}})
	resp, err := chat.Collect(p.Stream(context.Background(), request("m")))
	ce := chat.AsError(err)
	if ce == nil || ce.Category != chat.CategoryUpstreamUnavailable || !ce.Retryable || ce.Provider != "local" {
		t.Fatalf("error = %v, want a retryable upstream_unavailable from local", err)
	}
	if resp.Choices[0].Text != "Hel" || resp.Choices[0].FinishReason != "" {
		t.Errorf("choices = %+v", resp.Choices)
	}
}

func TestStreamBrokenBody(t *testing.T) {
	raw, _ := os.ReadFile("testdata/ollama_chat.ndjson")
	cut := strings.LastIndex(string(raw), `"done":true`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(raw[:cut])
	}))
	defer srv.Close()
	p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "local", BaseURL: srv.URL, Client: srv.Client()}})
	_, err := chat.Collect(p.Stream(context.Background(), request("m")))
	if ce := chat.AsError(err); ce.Category != chat.CategoryProtocol || ce.Provider != "local" || !errors.Is(err, chat.ErrTruncated) {
		t.Fatalf("error = %v, want a truncation from local", err)
	}
}

func TestStreamInvalidRequest(t *testing.T) {
	p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "local", BaseURL: "http://127.0.0.1:1"}})
	_, err := chat.Collect(p.Stream(context.Background(), &chat.Request{Model: "m", N: 3}))
	if ce := chat.AsError(err); ce.Category != chat.CategoryInvalidRequest || ce.Provider != "local" {
		t.Errorf("error = %v, want invalid_request from local", err)
	}
}

func TestStreamUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "local", BaseURL: url, Client: &http.Client{}}})
	_, err := chat.Collect(p.Stream(context.Background(), request("m")))
	if ce := chat.AsError(err); ce.Category != chat.CategoryUpstreamUnavailable || !ce.Retryable || ce.Provider != "local" {
		t.Errorf("error = %v, want a retryable upstream_unavailable", err)
	}
}

var errCause = errors.New("client went away (test)")

// Cancelling the context mid-stream ends the upstream request at once and
// the stream yields the context's cause.
func TestStreamCancel(t *testing.T) {
	ended := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":"Hello"},"done":false}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		ended <- time.Now()
	}))
	defer srv.Close()
	p := New(Config{HTTPConfig: provider.HTTPConfig{Name: "local", BaseURL: srv.URL, Client: srv.Client()}})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var (
		got       []string
		err       error
		cancelled time.Time
	)
	for ch, e := range p.Stream(ctx, request("m")) {
		if e != nil {
			err = e
			break
		}
		got = append(got, ch.Text)
		cancelled = time.Now()
		cancel(errCause)
	}
	if !errors.Is(err, errCause) {
		t.Errorf("error = %v, want the context's cause", err)
	}
	if len(got) != 1 || got[0] != "Hello" {
		t.Errorf("chunks = %q", got)
	}
	select {
	case at := <-ended:
		if d := at.Sub(cancelled); d > 50*time.Millisecond {
			t.Errorf("the upstream request ended %v after the cancel, want < 50ms", d)
		}
	case <-time.After(time.Second):
		t.Fatal("the upstream request did not end")
	}
}

// Breaking out of the loop ends the upstream request too.
func TestStreamBreak(t *testing.T) {
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":"Hello"},"done":false}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ended)
	}))
	defer srv.Close()
	p := New(Config{HTTPConfig: provider.HTTPConfig{BaseURL: srv.URL, Client: srv.Client()}})
	for range p.Stream(context.Background(), request("m")) {
		break
	}
	select {
	case <-ended:
	case <-time.After(time.Second):
		t.Fatal("the upstream request did not end after break")
	}
}

func TestStreamCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errCause)
	p := New(Config{HTTPConfig: provider.HTTPConfig{BaseURL: "http://127.0.0.1:1"}})
	_, err := chat.Collect(p.Stream(ctx, request("m")))
	if !errors.Is(err, errCause) {
		t.Errorf("error = %v, want the context's cause", err)
	}
}
