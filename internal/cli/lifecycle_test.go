package cli_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/cli"
	"github.com/firstword/firstword/internal/config"
)

// TestStalePooledConnection: the upstream drops a kept-alive connection
// when the gateway reuses it (as after a restart); the request is retried
// at once on a fresh connection and the client sees no error.
func TestStalePooledConnection(t *testing.T) {
	type connKey struct{}
	var requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.ReadAll(r.Body)
		n := r.Context().Value(connKey{}).(*atomic.Int32)
		if n.Add(1) == 2 {
			// Second request on this connection: die without answering.
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return
		}
		sseHeaders(w)
		sseWrite(w, chunkJSON("ok")+finishJSON)
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Int32))
	}
	srv.Start()
	defer srv.Close()
	gw := startGateway(t, minimalConfig+oneAttempt, srv.URL)
	for i := range 2 {
		resp := post(t, gw.URL, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"ok"`) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if got := requests.Load(); got != 3 {
		t.Errorf("upstream saw %d requests, want 3 (the second retried once)", got)
	}
}

// serveWithDrain runs the sim gateway with the given drain timeout and
// returns its URL and a function that sends it SIGTERM (cancels its
// context) and waits for Serve to return.
func serveWithDrain(t *testing.T, drain time.Duration) (*cli.App, string, func() error) {
	t.Helper()
	app, err := cli.Build(context.Background(), config.Default(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln, drain) }()
	var once sync.Once
	var serr error
	stop := func() error {
		once.Do(func() {
			cancel()
			serr = <-done
			app.Close()
		})
		return serr
	}
	t.Cleanup(func() { stop() })
	return app, "http://" + ln.Addr().String(), stop
}

// TestGracefulShutdown: on SIGTERM, open streams finish within the drain
// timeout and new connections are refused.
func TestGracefulShutdown(t *testing.T) {
	_, url, stop := serveWithDrain(t, 5*time.Second)
	resp := post(t, url, `{"model":"sim-small","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=100ms gap=20ms tokens=30]"}]}`)
	defer resp.Body.Close()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(50 * time.Millisecond)
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("a new connection was accepted during shutdown")
	}
	events := readEvents(resp.Body)
	if len(events) == 0 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("the open stream did not finish: %d events", len(events))
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve returned %v", err)
	}
}

// TestShutdownDrainTimeout: streams still open when the drain timeout
// passes are cancelled cleanly: the client gets an error event and the
// request is recorded.
func TestShutdownDrainTimeout(t *testing.T) {
	app, url, stop := serveWithDrain(t, 200*time.Millisecond)
	resp := post(t, url, `{"model":"sim-small","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=10ms gap=50ms tokens=200]"}]}`)
	defer resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	go stop()
	events := readEvents(resp.Body)
	last := events[len(events)-1]
	if !strings.Contains(last.data, `"error"`) || !strings.Contains(last.data, "shutting down") {
		t.Errorf("last event = %q, want a shutting-down error event", last.data)
	}
	stop()
	rec, ok := app.Meter.Find(id)
	if !ok || rec.Status != "error" {
		t.Errorf("record = %+v, want status error", rec)
	}
	st := app.Sims["sim"].Stats()
	if st.Cancelled != 1 {
		t.Errorf("sim stats %+v: want the stream cancelled upstream", st)
	}
}
