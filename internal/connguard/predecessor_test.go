package connguard

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPipelinedPredecessorNotCancelled: a request pipelined before a
// refused one is served as net/http alone serves it; its context is not
// cancelled as if the client had left.
func TestPipelinedPredecessorNotCancelled(t *testing.T) {
	for _, guard := range []bool{false, true} {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		var l net.Listener = ln
		if guard {
			l = NewListener(ln, Options{})
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			select {
			case <-time.After(300 * time.Millisecond):
				io.WriteString(w, "served")
			case <-r.Context().Done():
				w.WriteHeader(499)
				io.WriteString(w, "context cancelled: "+r.Context().Err().Error())
			}
		})}
		go srv.Serve(l)
		c, _ := net.Dial("tcp", ln.Addr().String())
		io.WriteString(c, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"+
			"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		t.Logf("guard=%v first response: %d %q", guard, resp.StatusCode, strings.TrimSpace(string(b)))
		if resp.StatusCode != 200 {
			t.Errorf("guard=%v: the request before the refused one was not served", guard)
		}
		c.Close()
		srv.Close()
	}
}
