package httpapi

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/router"
)

// slow answers n words, gap apart.
func slow(n int, gap time.Duration) provider.Provider {
	return provider.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			for range n {
				select {
				case <-ctx.Done():
					yield(chat.Chunk{}, ctx.Err())
					return
				case <-time.After(gap):
				}
				if !yield(chat.Chunk{Text: " word", Model: "m"}, nil) {
					return
				}
			}
			yield(chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 1, OutputTokens: n}}, nil)
		}
	})
}

// TestBodyTimeout, on a real socket: a client that trickles its body gets
// 408 once the body timeout passes, on each surface; a stream that lasts
// longer than the body timeout is not cut by it.
func TestBodyTimeout(t *testing.T) {
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(6, 100*time.Millisecond)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Router: r, Meter: metering.NewMemory(10), BodyTimeout: 200 * time.Millisecond}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/responses"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
		c.SetDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within 200ms") {
			t.Errorf("%s: %d %s, want 408", path, resp.StatusCode, b)
		}
		// The server lets go of the connection rather than waiting for
		// the rest of the body.
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("%s: read %d more bytes, want the connection closed", path, n)
		}
		c.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: answered and closed after %v", path, d)
		}
	}

	// A request answered without reading its body (no such route): the
	// trickled body does not hold the answer back forever either.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "POST /v1/nothing HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("no route, trickled body: %v %v, want 404", resp, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("no route, trickled body: answered after %v", d)
	}

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Count(string(b), `"content":" word"`) != 6 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Errorf("a 600 ms stream with a 200 ms body timeout:\n%s", b)
	}
}
