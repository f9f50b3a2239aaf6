package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/store/sqlite"
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
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("ok")+gatewaytest.FinishJSON)
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Int32))
	}
	srv.Start()
	defer srv.Close()
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, srv.URL)
	// A request reuses the pooled connection once the previous answer's
	// body was read to its end (in the background); on a busy machine a
	// request may start before that and dial afresh, so it takes a few.
	for i := range 5 {
		resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"ok"`) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
		if requests.Load() > int32(i+1) {
			return // a request met the dead connection, was retried, and succeeded
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("no request met a stale pooled connection: the test proves nothing")
}

// serveWithDrain runs the sim gateway with the given drain timeout (its
// shutdown_timeout) and returns it, its URL and a function that sends it
// SIGTERM (cancels its context) and waits for Serve to return.
func serveWithDrain(t *testing.T, drain time.Duration) (*gatewaytest.Gateway, string, func() error) {
	return serveConfigWithDrain(t, config.Default(), drain)
}

func serveConfigWithDrain(t *testing.T, cfg *config.Config, drain time.Duration) (*gatewaytest.Gateway, string, func() error) {
	t.Helper()
	cfg.ShutdownTimeout = drain
	gw := gatewaytest.Start(t, cfg)
	return gw, gw.URL, gw.Stop
}

// TestGracefulShutdown: on SIGTERM, open streams finish within the drain
// timeout and new connections are refused.
func TestGracefulShutdown(t *testing.T) {
	_, url, stop := serveWithDrain(t, 5*time.Second)
	resp := gatewaytest.Post(t, url, `{"model":"sim-small","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=100ms gap=20ms tokens=30]"}]}`)
	defer resp.Body.Close()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(50 * time.Millisecond)
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("a new connection was accepted during shutdown")
	}
	events := gatewaytest.ReadEvents(resp.Body)
	if len(events) == 0 || events[len(events)-1].Data != "[DONE]" {
		t.Fatalf("the open stream did not finish: %d events", len(events))
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve returned %v", err)
	}
}

// TestShutdownDrainTimeout: streams still open when the drain timeout
// passes are cancelled cleanly: the client gets an error event and the
// request is recorded as interrupted (the server's doing, not the
// client's).
func TestShutdownDrainTimeout(t *testing.T) {
	app, url, stop := serveWithDrain(t, 200*time.Millisecond)
	resp := gatewaytest.Post(t, url, `{"model":"sim-small","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=10ms gap=50ms tokens=200]"}]}`)
	defer resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	go stop()
	events := gatewaytest.ReadEvents(resp.Body)
	last := events[len(events)-1]
	if !strings.Contains(last.Data, `"error"`) || !strings.Contains(last.Data, "shutting down") {
		t.Errorf("last event = %q, want a shutting-down error event", last.Data)
	}
	stop()
	rec, ok := app.Meter().Find(id)
	if !ok || rec.Status != "interrupted" {
		t.Errorf("record = %+v, want status interrupted", rec)
	}
	st := app.Sim("sim").Stats()
	if st.Cancelled != 1 {
		t.Errorf("sim stats %+v: want the stream cancelled upstream", st)
	}
}

// TestShutdownMidChatAnswer: a /v1/chat answer cut by the drain timeout
// ends with an error event saying the server is shutting down; the stored
// message is interrupted (not cancelled, as if the user had left) with
// exactly the text the client received, and so is its usage record.
func TestShutdownMidChatAnswer(t *testing.T) {
	cfg := config.Default()
	cfg.Store.Path = filepath.Join(t.TempDir(), "fw.db")
	app, url, stop := serveConfigWithDrain(t, cfg, 200*time.Millisecond)
	r := make(chan chatResult, 1)
	go func() {
		r <- chatOnce(t, url, "", map[string]any{"message": "hi [sim ttft=10ms gap=50ms tokens=200]"}, 0)
	}()
	for app.Sim("sim").Stats().Started == 0 { // the answer is being generated
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // and some of it was sent
	go stop()
	res := <-r
	if res.last.kind != "error" || res.last.data["code"] != conversation.ShutdownCode || res.last.data["status"] != "interrupted" || res.last.data["retryable"] != true {
		t.Fatalf("last event %q %v, want an interrupted %s error", res.last.kind, res.last.data, conversation.ShutdownCode)
	}
	if res.text == "" {
		t.Fatal("no text arrived before the shutdown: the test proves nothing")
	}
	stop()
	st, err := sqlite.Open(cfg.Store.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	msgs, err := st.ListMessages(context.Background(), "local", res.meta["conversation_id"].(string))
	if err != nil || len(msgs) != 2 {
		t.Fatalf("stored messages: %v, %v", msgs, err)
	}
	if m := msgs[1]; m.Status != store.StatusInterrupted || m.Content != res.text || m.ErrorCode != conversation.ShutdownCode {
		t.Errorf("stored %s %q (%s), want interrupted with the %d bytes received", m.Status, m.Content, m.ErrorCode, len(res.text))
	}
	var rec metering.Record
	for _, x := range app.Meter().Recent() {
		if x.Surface == "chat" {
			rec = x
		}
	}
	if rec.Status != metering.StatusInterrupted {
		t.Errorf("usage record status %q, want interrupted", rec.Status)
	}
}

// TestUnreadyBeforeClosing: after SIGTERM /readyz answers 503 for the
// shutdown delay while the gateway still serves new requests, so that a
// load balancer stops sending before the listener closes.
func TestUnreadyBeforeClosing(t *testing.T) {
	cfg := config.Default()
	cfg.ShutdownDelay = 500 * time.Millisecond
	_, url, stop := serveConfigWithDrain(t, cfg, time.Second)
	code := func(path string) int {
		resp, err := http.Get(url + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := code("/readyz"); got != 200 {
		t.Fatalf("/readyz before shutdown: %d", got)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(100 * time.Millisecond)
	if got := code("/readyz"); got != 503 {
		t.Errorf("/readyz during the shutdown delay: %d, want 503", got)
	}
	resp := gatewaytest.Post(t, url, `{"model":"sim-small","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=5ms gap=1ms tokens=5]"}]}`)
	events := gatewaytest.ReadEvents(resp.Body)
	resp.Body.Close()
	if len(events) == 0 || events[len(events)-1].Data != "[DONE]" {
		t.Errorf("a request during the shutdown delay: %d events", len(events))
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve returned %v", err)
	}
	if got := code("/readyz"); got != 0 {
		t.Errorf("after shutdown the listener still answers: %d", got)
	}
}

// TestShutdownWholeAnswer: a non-streaming request cut by the drain
// timeout gets 503 server_shutting_down with a Retry-After, on each
// surface, not a 502 as if an upstream had failed.
func TestShutdownWholeAnswer(t *testing.T) {
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"sim-small","messages":[{"role":"user","content":"hi [sim ttft=10ms gap=50ms tokens=200]"}]}`, `"server_shutting_down"`},
		{"/v1/messages", `{"model":"sim-small","max_tokens":300,"messages":[{"role":"user","content":"hi [sim ttft=10ms gap=50ms tokens=200]"}]}`, `"overloaded_error"`},
	} {
		app, url, stop := serveWithDrain(t, 200*time.Millisecond)
		type answer struct {
			resp *http.Response
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			resp, err := http.Post(url+tc.path, "application/json", strings.NewReader(tc.body))
			done <- answer{resp, err}
		}()
		for app.Sim("sim").Stats().Started == 0 { // the answer is being generated
			time.Sleep(5 * time.Millisecond)
		}
		go stop()
		a := <-done
		if a.err != nil {
			t.Fatalf("%s: %v", tc.path, a.err)
		}
		resp := a.resp
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), tc.want) || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s cut by shutdown: %d %s (Retry-After %q), want 503 %s", tc.path, resp.StatusCode, b, resp.Header.Get("Retry-After"), tc.want)
		}
		stop()
	}
}

// TestShutdownResetsNoConnection (issue 35): a load balancer that learns
// a replica is draining only from a refused connection, as open-source
// nginx does, goes on connecting to it until its listener closes; a
// connection the kernel completed in that last instant, before the
// server took it, must not be reset when the listener closes, for by
// then the balancer has sent its request (nginx does not resend a POST
// that went out: the client would get 502). Clients opening connection
// after connection while the gateway shuts down each get an answer, or
// a refused connection (which nginx retries on another replica), never a
// connection reset or closed after their request went out.
func TestShutdownResetsNoConnection(t *testing.T) {
	_, url, stop := serveWithDrain(t, 5*time.Second)
	addr := strings.TrimPrefix(url, "http://")
	var answered, refused, lost atomic.Int32
	var lostErr atomic.Value
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stopped.Load() {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					if errors.Is(err, syscall.ECONNREFUSED) {
						refused.Add(1)
					} else {
						lost.Add(1)
						lostErr.Store(err.Error())
					}
					continue
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
				var status []byte
				if err == nil {
					status = make([]byte, 12)
					_, err = io.ReadFull(c, status)
				}
				c.Close()
				if err == nil && string(status) == "HTTP/1.1 200" {
					answered.Add(1)
				} else {
					lost.Add(1)
					lostErr.Store(fmt.Sprintf("%q, %v", status, err))
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	if err := stop(); err != nil {
		t.Errorf("Serve returned %v", err)
	}
	stopped.Store(true)
	wg.Wait()
	t.Logf("%d connections answered, %d refused, %d lost", answered.Load(), refused.Load(), lost.Load())
	if lost.Load() > 0 {
		t.Errorf("%d connections were lost after the request went out (the last: %v)", lost.Load(), lostErr.Load())
	}
	if answered.Load() == 0 || refused.Load() == 0 {
		t.Errorf("%d answered, %d refused: the test proves nothing", answered.Load(), refused.Load())
	}
}
