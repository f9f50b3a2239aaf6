package httpapi

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
)

// writeLog records every write the server makes to its connections.
type writeLog struct {
	mu     sync.Mutex
	writes [][]byte
}

type loggedListener struct {
	net.Listener
	log *writeLog
}

func (l loggedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return loggedConn{c, l.log}, nil
}

type loggedConn struct {
	net.Conn
	log *writeLog
}

func (c loggedConn) Write(b []byte) (int, error) {
	c.log.mu.Lock()
	c.log.writes = append(c.log.writes, bytes.Clone(b))
	c.log.mu.Unlock()
	return c.Conn.Write(b)
}

// TestStreamEndsInOneWrite, on a real socket: a stream's last events
// ([DONE]) and the response's terminating chunk go out in one write; every
// event before them was flushed on its own.
func TestStreamEndsInOneWrite(t *testing.T) {
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(3, 20*time.Millisecond)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(New(Options{Router: r, Meter: metering.NewMemory(10)}))
	log := &writeLog{}
	srv.Listener = loggedListener{srv.Listener, log}
	srv.Start()
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasSuffix(string(b), "data: [DONE]\n\n") || strings.Count(string(b), `" word"`) != 3 {
		t.Fatalf("stream:\n%s", b)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	words, last := 0, -1
	for i, w := range log.writes {
		words += bytes.Count(w, []byte(`" word"`))
		if bytes.Contains(w, []byte("[DONE]")) {
			last = i
		}
	}
	if last < 0 {
		t.Fatalf("no write carried [DONE]: %q", log.writes)
	}
	if w := log.writes[last]; !bytes.HasSuffix(w, []byte("data: [DONE]\n\n\r\n0\r\n\r\n")) {
		t.Errorf("the write with [DONE] is %q, want it to end the chunked response too", w)
	}
	if last != len(log.writes)-1 {
		t.Errorf("%d writes after the one with [DONE]: %q", len(log.writes)-1-last, log.writes[last+1:])
	}
	// Each of the 3 words (20 ms apart) was flushed as it came.
	if words != 3 || len(log.writes) < 4 {
		t.Errorf("%d writes carrying %d words, want each word in a write of its own: %q", len(log.writes), words, log.writes)
	}
}

// TestWriteDeadlineDoesNotOutliveStream: the write deadline a stream's
// last write leaves on its connection (to bound the final flush) is gone
// for the next request on that connection, however long after it comes
// (net/http clears it once the response ended).
func TestWriteDeadlineDoesNotOutliveStream(t *testing.T) {
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(2, time.Millisecond)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Router: r, Meter: metering.NewMemory(10), WriteTimeout: 100 * time.Millisecond}))
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer c.CloseIdleConnections()

	do := func(method, path, body string) (string, bool) {
		t.Helper()
		reused := false
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), method, srv.URL+path, strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s %v", method, path, resp.StatusCode, b, err)
		}
		return string(b), reused
	}
	stream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	if b, _ := do("POST", "/v1/chat/completions", stream); !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Fatalf("stream: %s", b)
	}
	time.Sleep(250 * time.Millisecond) // past the last write's deadline
	if _, reused := do("GET", "/healthz", ""); !reused {
		t.Fatal("the second request did not reuse the connection: the test proves nothing")
	}
	time.Sleep(250 * time.Millisecond)
	if b, reused := do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); !reused || !strings.Contains(b, `"finish_reason":"stop"`) {
		t.Fatalf("a whole answer on the same connection (reused %v): %s", reused, b)
	}
	if b, reused := do("POST", "/v1/chat/completions", stream); !reused || !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Fatalf("a second stream on the same connection (reused %v): %s", reused, b)
	}
}
