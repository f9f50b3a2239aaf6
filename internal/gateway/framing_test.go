package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestRequestFramingLimits, on the served gateway: a request framed both
// by Content-Length and Transfer-Encoding gets 400 and the connection is
// closed (no request is smuggled behind it); a header block over
// max_header_bytes gets 431.
func TestRequestFramingLimits(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, "max_header_bytes: 8192\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n"))
	addr := strings.TrimPrefix(gw.URL, "http://")
	raw := func(req string) (*http.Response, []byte, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, req)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rest, _ := io.ReadAll(br)
		return resp, append(b, rest...), c
	}
	body := `{"model":"chat","messages":[{"role":"user","content":"hi [sim ttft=1ms gap=1ms tokens=2]"}]}`
	smuggled := "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	chunked := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n" + smuggled
	resp, rest, _ := raw(chunked)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(rest), `"invalid_request_error"`) {
		t.Errorf("Content-Length and Transfer-Encoding: %d %s, want a JSON 400", resp.StatusCode, rest)
	}
	if strings.Contains(string(rest), "HTTP/1.1 200") {
		t.Errorf("a request was served after the ambiguous one: %s", rest)
	}

	header := func(n int) string {
		return "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + strings.Repeat("a", n) + "\r\n\r\n"
	}
	if resp, _, _ = raw(header(8192 + 512)); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("8.5 KiB of headers over an 8 KiB limit: %d, want 431", resp.StatusCode)
	}
	if resp, _, _ = raw(header(7 << 10)); resp.StatusCode != http.StatusOK {
		t.Errorf("7 KiB of headers under an 8 KiB limit: %d, want 200", resp.StatusCode)
	}
}

// TestRequestBodyTimeout, on the served gateway: a body trickled past
// request_body_timeout gets 408, by that bound (not the 30 s a client's
// own timeout often is), and the connection is closed; the stream that
// answers a body sent in time is not bound by it.
func TestRequestBodyTimeout(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, "request_body_timeout: 300ms\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n"))
	addr := strings.TrimPrefix(gw.URL, "http://")
	for _, path := range []string{"/v1/chat/completions", "/v1/chat"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
		c.SetDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		c.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within 300ms") {
			t.Errorf("%s: %d %s, want 408 naming the 300ms bound", path, resp.StatusCode, b)
		}
		if took < 300*time.Millisecond || took > 5*time.Second {
			t.Errorf("%s: 408 after %v, want it by the 300ms bound", path, took)
		}
	}
	// An answer that streams longer than the bound is not cut by it.
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=10ms gap=100ms tokens=6]"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "[DONE]") {
		t.Errorf("a stream longer than the body bound: %d %s, want it whole", resp.StatusCode, b)
	}
}
