package doccheck

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeOpenAI is a local stand-in for OpenAI's API: POST .../chat/completions
// answers with a streamed Chat Completion of fixed words (role chunk, one
// chunk per word, the finish reason, the usage chunk when asked, [DONE]),
// and every request is recorded.
type fakeOpenAI struct {
	*httptest.Server
	words []string

	mu   sync.Mutex
	seen []seenRequest
}

// seenRequest is what the fake was sent.
type seenRequest struct {
	Path, Query   string
	Authorization string // the Authorization header
	APIKey        string // the api-key header (Azure's)
	Model         string
	Stream        bool
	// The answer cap as sent: max_tokens or max_completion_tokens (nil
	// when absent).
	MaxTokens, MaxCompletionTokens *int
}

func newFakeOpenAI(t *testing.T, words ...string) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{words: words}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// answer is the text the fake streams.
func (f *fakeOpenAI) answer() string { return strings.Join(f.words, "") }

func (f *fakeOpenAI) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model               string `json:"model"`
		Stream              bool   `json:"stream"`
		MaxTokens           *int   `json:"max_tokens"`
		MaxCompletionTokens *int   `json:"max_completion_tokens"`
		StreamOptions       struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"message":"fake OpenAI: no route for %s %s","type":"invalid_request_error","code":"not_found"}}`, r.Method, r.URL.Path)
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{Path: r.URL.Path, Query: r.URL.RawQuery, Authorization: r.Header.Get("Authorization"),
		APIKey: r.Header.Get("Api-Key"), Model: body.Model, Stream: body.Stream,
		MaxTokens: body.MaxTokens, MaxCompletionTokens: body.MaxCompletionTokens})
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	chunk := func(delta, finish string, usage bool) {
		c := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": body.Model}
		switch {
		case usage:
			c["choices"] = []any{}
			c["usage"] = map[string]int{"prompt_tokens": 9, "completion_tokens": len(f.words), "total_tokens": 9 + len(f.words)}
		case finish != "":
			c["choices"] = []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}
		default:
			c["choices"] = []any{map[string]any{"index": 0, "delta": json.RawMessage(delta), "finish_reason": nil}}
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		flusher.Flush()
	}
	chunk(`{"role":"assistant","content":""}`, "", false)
	for _, word := range f.words {
		b, _ := json.Marshal(map[string]string{"content": word})
		chunk(string(b), "", false)
	}
	chunk("", "stop", false)
	if body.StreamOptions.IncludeUsage {
		chunk("", "", true)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	flusher.Flush()
}
