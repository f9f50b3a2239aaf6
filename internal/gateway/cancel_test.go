package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
)

// rawClient speaks HTTP/1.1 over a plain socket so a test controls exactly
// when the connection closes.
type rawClient struct {
	conn net.Conn
	br   *bufio.Reader
	hdr  http.Header
	code int
}

func dialRaw(t *testing.T, base, body string) *rawClient {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	return &rawClient{conn: conn, br: bufio.NewReader(conn)}
}

func (c *rawClient) readHeaders(t *testing.T) {
	t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.hdr, c.code = resp.Header, resp.StatusCode
	// Keep reading the body from br directly: chunked framing is mostly
	// invisible to these tests, which look for payload text only.
}

// readUntil reads until the received bytes contain n occurrences of sub.
func (c *rawClient) readUntil(t *testing.T, sub string, n int) string {
	t.Helper()
	var got strings.Builder
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for strings.Count(got.String(), sub) < n {
		k, err := c.br.Read(buf)
		got.Write(buf[:k])
		if err != nil {
			t.Fatalf("read: %v after %q", err, got.String())
		}
	}
	return got.String()
}

// slowUpstream streams a chunk every gap until the client leaves, after
// waiting ttft before its headers.
func slowUpstream(t *testing.T, ttft, gap time.Duration) *gatewaytest.Upstream {
	return gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(ttft):
		case <-r.Context().Done():
			return
		}
		gatewaytest.SSEHeaders(w)
		for i := 0; ; i++ {
			if !gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON(fmt.Sprintf("w%d ", i))) {
				return
			}
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
		}
	})
}

func waitRecord(t *testing.T, gw *gatewaytest.Gateway, id string) metering.Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if rec, ok := gw.Meter().Find(id); ok {
			return rec
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no metering record for %s", id)
	return metering.Record{}
}

// TestCancelOnDisconnect closes the client's socket and measures when the
// upstream saw its own connection close: within 50 ms, mid-stream, before
// the first token, and for a non-streaming request.
func TestCancelOnDisconnect(t *testing.T) {
	const limit = 50 * time.Millisecond
	tests := []struct {
		name   string
		stream bool
		ttft   time.Duration
		chunks int // data events to read before closing; 0 closes before any
	}{
		{"mid-stream", true, 0, 3},
		{"before first token", true, 10 * time.Second, 0},
		{"non-streaming", false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := slowUpstream(t, tt.ttft, 20*time.Millisecond)
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+"    first_token_timeout: 15s\n    timeout: 30s\n", up.URL)
			body := fmt.Sprintf(`{"model":"chat","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, tt.stream)
			c := dialRaw(t, gw.URL, body)
			id := ""
			if tt.chunks > 0 {
				c.readHeaders(t)
				id = c.hdr.Get("X-Request-Id")
				c.readUntil(t, "data: ", tt.chunks+1) // role chunk + n deltas
			} else {
				time.Sleep(300 * time.Millisecond) // the upstream is working
			}
			closedAt := time.Now()
			c.conn.Close()
			select {
			case upAt := <-up.Closed:
				if d := upAt.Sub(closedAt); d > limit {
					t.Errorf("upstream saw the close %v after the client left, want <= %v", d, limit)
				} else {
					t.Logf("upstream saw the close %v after the client left", d)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("upstream never saw the client leave")
			}
			if id != "" {
				rec := waitRecord(t, gw, id)
				if rec.Status != metering.StatusCancelled {
					t.Errorf("status = %s, want cancelled", rec.Status)
				}
				if !rec.Usage.Estimated || rec.Usage.OutputTokens < tt.chunks {
					t.Errorf("usage = %+v, want an estimate of at least %d delivered tokens", rec.Usage, tt.chunks)
				}
			}
		})
	}
}

// A client that half-closes its side after the request is taken by
// net/http for one that left: the request is cancelled, but the client,
// which may still read, gets a 499 error rather than an empty 200.
func TestHalfCloseBeforeAnswer(t *testing.T) {
	up := slowUpstream(t, 300*time.Millisecond, 10*time.Millisecond)
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
	for _, stream := range []bool{true, false} {
		c := dialRaw(t, gw.URL, fmt.Sprintf(`{"model":"chat","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream))
		c.conn.(*net.TCPConn).CloseWrite()
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		b, _ := io.ReadAll(resp.Body)
		c.conn.Close()
		if resp.StatusCode != 499 || !strings.Contains(string(b), `"client_closed_request"`) {
			t.Errorf("stream=%v: %d %s", stream, resp.StatusCode, b)
		}
		if rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id")); rec.Status != metering.StatusCancelled {
			t.Errorf("stream=%v: recorded %s, want cancelled", stream, rec.Status)
		}
	}
}
