package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// lineWire is a Wire whose answer is one chunk of the body's text, for
// HTTPAdapter's own tests.
type lineWire struct {
	url       string
	encodeErr error
	readErr   error
}

func (w *lineWire) Encode(*chat.Request) ([]byte, error) { return []byte(`{}`), w.encodeErr }

func (w *lineWire) Post(c *HTTPConfig, body []byte, _ *chat.Request) Post {
	post := c.Post(w.url, body)
	post.Auth[0], post.Decode = Bearer(c.APIKey), decodeAsText
	return post
}

func (w *lineWire) Reader(_ *HTTPConfig, resp *http.Response, _ *chat.Request) (ChunkReader, error) {
	if w.readErr != nil {
		return nil, w.readErr
	}
	b, _ := io.ReadAll(resp.Body)
	return &chunkOnce{c: chat.Chunk{Text: string(b)}}, nil
}

type chunkOnce struct {
	c    chat.Chunk
	done bool
}

func (r *chunkOnce) Next() (*chat.Chunk, error) {
	if r.done {
		return nil, io.EOF
	}
	r.done = true
	return &r.c, nil
}

// TestHTTPAdapter: the adapter sends what its Wire encodes, as the
// configuration says (the Wire's Auth, then the configured headers), and
// reads the answer with the Wire's reader; an encoding error is an
// invalid request and a reader's error names the provider, both without
// a secret in them.
func TestHTTPAdapter(t *testing.T) {
	var gotAuth, gotExtra string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotExtra = r.Header.Get("Authorization"), r.Header.Get("X-Extra")
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	cfg := HTTPConfig{Name: "up", BaseURL: srv.URL, APIKey: "sk-test-0123456789", Headers: map[string]string{"X-Extra": "x"}}
	req := &chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}

	w := &lineWire{url: cfg.URL("/chat")}
	a := NewHTTPAdapter(cfg, w)
	got, err := chat.Collect(a.Stream(context.Background(), req))
	if err != nil || len(got.Choices) != 1 || got.Choices[0].Text != "hello" {
		t.Fatalf("Stream = %+v, %v, want hello", got, err)
	}
	if gotAuth != "Bearer sk-test-0123456789" || gotExtra != "x" {
		t.Errorf("upstream saw Authorization %q, X-Extra %q", gotAuth, gotExtra)
	}

	w.encodeErr = errors.New("messages[0]: cannot encode sk-test-0123456789")
	_, err = chat.Collect(a.Stream(context.Background(), req))
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Category != chat.CategoryInvalidRequest || ce.Provider != "up" || ce.Message != "messages[0]: cannot encode [redacted]" {
		t.Errorf("encoding error = %#v, want an invalid request of provider up, scrubbed", err)
	}

	w.encodeErr, w.readErr = nil, chat.ProtocolError(errors.New("malformed answer"))
	_, err = chat.Collect(a.Stream(context.Background(), req))
	if !errors.As(err, &ce) || ce.Category != chat.CategoryProtocol || ce.Provider != "up" {
		t.Errorf("reader error = %#v, want a protocol error of provider up", err)
	}
}
