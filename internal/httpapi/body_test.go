package httpapi

import (
	"bufio"
	"compress/gzip"
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
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/router"
)

// slow answers n words, gap apart.
func slow(n int, gap time.Duration) provider.Provider {
	return providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
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
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(10), BodyTimeout: 200 * time.Millisecond}))
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
	io.WriteString(c, "POST /v1/nothing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
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

// TestBodyEncodingAndSize: a gzip body is read (and bounded by what it
// inflates to), other encodings are refused by name, and a body declared
// too large is refused before it is read, on a real socket.
func TestBodyEncodingAndSize(t *testing.T) {
	srv := oneWordServer(t, Options{MaxRequestBytes: 4096})
	gz := func(s string) string {
		var b strings.Builder
		zw := gzip.NewWriter(&b)
		io.WriteString(zw, s)
		zw.Close()
		return b.String()
	}
	ok := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, encoding, body string
		status               int
	}{
		{"gzip", "gzip", gz(ok), 200},
		{"gzip inflating past the limit", "gzip", gz(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20) + `"}]}`), 413},
		{"corrupt gzip", "gzip", gz(ok)[:20], 400},
		{"brotli", "br", ok, 415},
		{"identity", "identity", ok, 200},
	} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", tc.encoding)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, b, tc.status)
		}
	}

	// Declared too large with Expect: 100-continue: refused at once, and
	// the body is never asked for.
	resp := rawRequest(t, srv, "Content-Length: 99999999\r\nExpect: 100-continue\r\n\r\n")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("declared too large: %d, want 413 before any 100 Continue", resp.StatusCode)
	}
}

// TestBodyTimeoutGzip: a gzip body that stalls in its header gets the
// same 408 as any other, naming no socket.
func TestBodyTimeoutGzip(t *testing.T) {
	srv := oneWordServer(t, Options{BodyTimeout: 200 * time.Millisecond})
	resp := rawRequest(t, srv, "Content-Encoding: gzip\r\nContent-Length: 100\r\n\r\n\x1f\x8b")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || strings.Contains(string(b), "127.0.0.1") {
		t.Errorf("%d %s, want 408", resp.StatusCode, b)
	}
}

// oneWordServer serves opt's handler, with a model "m" that answers one
// word, on a real socket.
func oneWordServer(t *testing.T, opt Options) *httptest.Server {
	t.Helper()
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(1, 0)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	opt.Routes, opt.Models, opt.Meter = noLevers(r), r, metering.NewMemory(10)
	srv := httptest.NewServer(New(opt))
	t.Cleanup(srv.Close)
	return srv
}

// rawRequest sends a chat completion's request line and JSON content type,
// then rest (the remaining headers, the blank line, any body) as is, and
// reads the response; its body is read whole before the connection closes.
func rawRequest(t *testing.T, srv *httptest.Server, rest string) *http.Response {
	t.Helper()
	return rawPost(t, srv, "/v1/chat/completions", rest)
}
