package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
)

// blockingMeter holds Record until release is closed, as a meter whose
// store is slow would.
type blockingMeter struct {
	release chan struct{}
	timeout chan struct{}
}

func (m *blockingMeter) Record(context.Context, *metering.Record) {
	select {
	case <-m.release:
	case <-time.After(5 * time.Second):
		close(m.timeout)
	}
}

// TestEndingNotHeldByMetering, on a real socket: a stream's ending
// ([DONE]) reaches the client while the request is still being metered; a
// slow meter (a full usage queue, a slow store) must not hold it back.
func TestEndingNotHeldByMetering(t *testing.T) {
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(3, time.Millisecond)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	m := &blockingMeter{release: make(chan struct{}), timeout: make(chan struct{})}
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: m}))
	defer srv.Close()
	defer close(m.release) // before the server waits for its handlers

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan string, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte("data: [DONE]\n\n")) {
			n, err := resp.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		done <- string(got)
	}()
	select {
	case got := <-done:
		if !strings.HasSuffix(got, "data: [DONE]\n\n") || strings.Count(got, `" word"`) != 3 {
			t.Errorf("stream:\n%s", got)
		}
	case <-m.timeout:
		t.Fatal("[DONE] did not arrive while the request was being metered")
	}
}

// TestWriteDeadlineDoesNotOutliveStream: the write deadline a stream's
// writes set on its connection is gone for the next request on that
// connection, however long after it comes.
func TestWriteDeadlineDoesNotOutliveStream(t *testing.T) {
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(2, time.Millisecond)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(10), WriteTimeout: 100 * time.Millisecond}))
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer c.CloseIdleConnections()

	do := func(method, path, body string) (string, bool) {
		t.Helper()
		reused := false
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
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
