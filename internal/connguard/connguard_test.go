package connguard

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// echo answers every request with what it saw of it, body included.
func echo(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s %q err=%v", r.Method, r.RequestURI, body, err)
}

// startServer serves echo on a loopback port, through NewListener if
// guarded, and returns its address.
func startServer(t *testing.T, guarded bool, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if guarded {
		ln = NewListener(ln, opts)
	}
	srv := &http.Server{Handler: http.HandlerFunc(echo), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// reply is one response as a client reads it.
type reply struct {
	Status int
	Type   string // Content-Type
	Body   string
	Close  bool // the server said Connection: close
}

// okReply is echo's answer to a request.
func okReply(method, target, body string) reply {
	return reply{Status: 200, Type: "text/plain; charset=utf-8", Body: fmt.Sprintf("%s %s %q err=<nil>", method, target, body)}
}

// refusal is the answer to a refused request.
func refusal(reason string) reply {
	return reply{Status: 400, Type: "application/json", Body: errorBody(reason), Close: true}
}

// errorBody is the OpenAI error object, as encoding/json writes it.
func errorBody(reason string) string {
	type object struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
	}
	b, err := json.Marshal(map[string]object{"error": {reason, "invalid_request_error", "invalid_request", nil}})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// exchange writes the pieces to a new connection to addr, pausing between
// them so they arrive in separate reads, then reads responses until the
// server closes the connection or is silent for quiet. It returns the
// responses and how reading ended: io.EOF when the server closed.
func exchange(t *testing.T, addr string, quiet time.Duration, pieces ...string) ([]reply, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		for i, p := range pieces {
			if i > 0 {
				time.Sleep(time.Millisecond)
			}
			if _, err := io.WriteString(c, p); err != nil {
				return
			}
		}
	}()
	var replies []reply
	br := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Now().Add(quiet))
		if _, err := br.Peek(1); err != nil {
			return replies, err
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return replies, err
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			return replies, err
		}
		replies = append(replies, readReply(res, body))
	}
}

func readReply(res *http.Response, body []byte) reply {
	return reply{Status: res.StatusCode, Type: res.Header.Get("Content-Type"), Body: string(body), Close: res.Close}
}

// isTimeout reports whether err is a read deadline passing: the server
// kept the connection open.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRefusesAmbiguousFraming(t *testing.T) {
	addr := startServer(t, true, Options{})
	for _, tt := range trackerTests {
		if tt.want.Reject == "" {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			got, err := exchange(t, addr, 5*time.Second, tt.in)
			if err != io.EOF {
				t.Errorf("read ended with %v, want EOF: the connection must be closed", err)
			}
			if len(got) != tt.want.Messages+1 {
				t.Fatalf("got %d responses %+v, want %d", len(got), got, tt.want.Messages+1)
			}
			for _, r := range got[:tt.want.Messages] {
				if r.Status != 200 {
					t.Errorf("request before the refused one: %+v, want 200", r)
				}
			}
			if diff := cmp.Diff(refusal(tt.want.Reject), got[len(got)-1]); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNetHTTPAloneServesTheSmuggledRequest is the issue: without the
// guard, net/http serves a request with both fields as chunked, keeps the
// connection and serves the bytes a proxy framing by Content-Length would
// take for the body as another request.
func TestNetHTTPAloneServesTheSmuggledRequest(t *testing.T) {
	addr := startServer(t, false, Options{})
	got, err := exchange(t, addr, 200*time.Millisecond, badReq)
	if !isTimeout(err) {
		t.Errorf("read ended with %v, want a timeout (connection kept open)", err)
	}
	want := []reply{
		okReply("POST", "/v1/chat/completions", ""),
		okReply("GET", "/admin", ""),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestServesGoodRequestsOnOneConnection(t *testing.T) {
	addr := startServer(t, true, Options{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i, tt := range []struct {
		req  string
		want reply
	}{
		{postReq, okReply("POST", "/v1/chat/completions", "{\"model\":\"m1\"}\n")},
		{chunkReq, okReply("POST", "/v1/chat/completions", "{\"model\":\"m1\"}\n")},
		{getReq, okReply("GET", "/v1/models", "")},
		{"POST /v1/embeddings HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\nhi", okReply("POST", "/v1/embeddings", "hi")},
		{"\r\n" + getReq, okReply("GET", "/v1/models", "")}, // a CRLF after a POST is skipped
		{sdkReq, okReply("POST", "/v1/chat/completions", sdkReq[strings.Index(sdkReq, "\r\n\r\n")+4:])},
	} {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, tt.req); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(res.Body)
		got := readReply(res, body)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("request %d (-want +got):\n%s", i, diff)
		}
	}
}

// pipelined is three good requests of three framings, a refused one, and
// what a Content-Length proxy would have taken for its body.
const pipelined = postReq + chunkReq + getReq + badReq

var pipelinedReplies = []reply{
	okReply("POST", "/v1/chat/completions", "{\"model\":\"m1\"}\n"),
	okReply("POST", "/v1/chat/completions", "{\"model\":\"m1\"}\n"),
	okReply("GET", "/v1/models", ""),
	refusal(reasonBoth),
}

func TestPipelinedRefusalComesInOrder(t *testing.T) {
	addr := startServer(t, true, Options{})
	got, err := exchange(t, addr, 5*time.Second, pipelined)
	if err != io.EOF {
		t.Errorf("read ended with %v, want EOF", err)
	}
	if diff := cmp.Diff(pipelinedReplies, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestPiecesOverTheWire sends the pipelined batch in pieces, cut around
// the refused head and at random, as separate TCP segments.
func TestPiecesOverTheWire(t *testing.T) {
	addr := startServer(t, true, Options{})
	bad := strings.Index(pipelined, badHead)
	cuts := [][]int{
		{bad}, {bad + 1}, {bad + len(badHead) - 2}, {bad + len(badHead) - 1}, {bad + len(badHead)},
		{bad - 1, bad + 40, bad + len(badHead) - 1},
	}
	for seed := range uint64(5) {
		cuts = append(cuts, randomCuts(len(pipelined), seed+3)) // a piece per 4 to 8 bytes
	}
	for _, cut := range cuts {
		var pieces []string
		prev := 0
		for _, c := range append(cut, len(pipelined)) {
			pieces = append(pieces, pipelined[prev:c])
			prev = c
		}
		got, err := exchange(t, addr, 5*time.Second, pieces...)
		if err != io.EOF {
			t.Errorf("cut at %v: read ended with %v, want EOF", cut, err)
		}
		if diff := cmp.Diff(pipelinedReplies, got); diff != "" {
			t.Errorf("cut at %v (-want +got):\n%s", cut, diff)
		}
	}
}

func TestExpectContinue(t *testing.T) {
	addr := startServer(t, true, Options{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("got %q, %v; want 100 Continue", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "hi")
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if diff := cmp.Diff(okReply("POST", "/v1/chat/completions", "hi"), readReply(res, body)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// With both fields, the refusal comes without a 100 Continue.
	io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")
	res, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	if diff := cmp.Diff(refusal(reasonBoth), readReply(res, body)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestOtherProtocolsPassThrough: what is not HTTP/1.x, or is refused by
// net/http anyway, gets net/http's own answer.
func TestOtherProtocolsPassThrough(t *testing.T) {
	bare := startServer(t, false, Options{})
	guarded := startServer(t, true, Options{})
	for _, tt := range trackerTests {
		if !tt.want.Off {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			want, wantErr := exchange(t, bare, 200*time.Millisecond, tt.in)
			got, err := exchange(t, guarded, 200*time.Millisecond, tt.in)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-net/http +guarded):\n%s", diff)
			}
			if fmt.Sprint(err) != fmt.Sprint(wantErr) && !(isTimeout(err) && isTimeout(wantErr)) {
				t.Errorf("read ended with %v, net/http alone with %v", err, wantErr)
			}
		})
	}
}

func TestOnReject(t *testing.T) {
	type call struct{ Remote, Reason string }
	calls := make(chan call, 1)
	addr := startServer(t, true, Options{OnReject: func(remote net.Addr, reason string) {
		calls <- call{remote.String(), reason}
	}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, badReq)
	select {
	case got := <-calls:
		if diff := cmp.Diff(call{c.LocalAddr().String(), reasonBoth}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnReject not called")
	}
}

// scriptConn is a client connection that delivers its pieces one per
// Read, then EOF, and keeps what the server writes.
type scriptConn struct {
	pieces [][]byte
	mu     sync.Mutex
	out    strings.Builder
}

func (c *scriptConn) Read(p []byte) (int, error) {
	for len(c.pieces) > 0 && len(c.pieces[0]) == 0 {
		c.pieces = c.pieces[1:]
	}
	if len(c.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pieces[0])
	c.pieces[0] = c.pieces[0][n:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// oneConnListener accepts one connection, then waits to be closed.
type oneConnListener struct {
	conn   chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conn:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }

// serveScript serves in, cut at cuts, on one connection of a real
// http.Server (through NewListener if guarded), and returns what its
// handler saw of each request and what the server wrote.
func serveScript(t testing.TB, in []byte, cuts []int, guarded bool) (seen []string, out string) {
	sc := &scriptConn{}
	prev := 0
	for _, c := range append(cuts, len(in)) {
		sc.pieces = append(sc.pieces, in[prev:c])
		prev = c
	}
	ol := &oneConnListener{conn: make(chan net.Conn, 1), closed: make(chan struct{})}
	ol.conn <- sc
	var ln net.Listener = ol
	if guarded {
		ln = NewListener(ol, Options{})
	}
	var mu sync.Mutex
	closed := make(chan struct{})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s %s %s cl=%d te=%v body=%q err=%v trailer=%v",
				r.Method, r.RequestURI, r.Proto, r.ContentLength, r.TransferEncoding, body, err, r.Trailer))
			mu.Unlock()
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				close(closed)
			}
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("input %q: the server did not close the connection", in)
	}
	srv.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return seen, sc.out.String()
}

// sameService checks that a guarded server serves in exactly as net/http
// alone does up to the refused request, if any, and refuses that one with
// the JSON 400 if net/http got to it.
func sameService(t testing.TB, in []byte, cuts []int) {
	t.Helper()
	bare, _ := serveScript(t, in, nil, false)
	guarded, out := serveScript(t, in, cuts, true)
	events, reason := traceOf(in, nil)
	want := bare
	if reason != "" {
		heads := 0
		for _, e := range events {
			if e.Kind == traceHead {
				heads++
			}
		}
		want = bare[:min(len(bare), heads)]
		if i, ok := trailerLookahead(want, guarded); ok {
			// See poison: the one difference the guard may make.
			want, guarded = want[:i], guarded[:i]
		} else if len(bare) > heads && !strings.HasSuffix(out, errorResponse(reason)) {
			t.Errorf("input %q cut at %v: net/http served the refused request; the guarded server wrote %q, want the refusal last", in, cuts, out)
		}
	}
	if diff := cmp.Diff(want, guarded, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("input %q cut at %v: handler saw (-net/http alone +guarded):\n%s", in, cuts, diff)
	}
}

// trailerLookahead reports whether the first request a and b saw
// differently, at index i, is one whose trailer one of them refused for
// want of a CRLF CRLF within 4 KiB (see poison).
func trailerLookahead(a, b []string) (i int, ok bool) {
	for i = 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
	}
	const refused = "err=http: suspiciously long trailer after chunked body"
	return i, i < len(a) && strings.Contains(a[i], refused) || i < len(b) && strings.Contains(b[i], refused)
}

// TestServerSeesTheSameRequests runs every table row and randomStream's
// streams through a real http.Server, guarded and not, in random pieces.
func TestServerSeesTheSameRequests(t *testing.T) {
	for i, tt := range trackerTests {
		in := []byte(tt.in)
		sameService(t, in, nil)
		sameService(t, in, randomCuts(len(in), uint64(i)))
	}
	n := 3000
	if testing.Short() {
		n = 300
	}
	rng := newRand(7)
	for range n {
		in := randomStream(rng)
		sameService(t, in, randomCuts(len(in), rng.Uint64()))
	}
}

// FuzzServer is sameService on random input: a guarded http.Server must
// serve exactly what net/http alone serves, up to a refused request.
func FuzzServer(f *testing.F) {
	for i, tt := range trackerTests {
		f.Add([]byte(tt.in), uint64(i))
	}
	rng := newRand(8)
	for i := range 20 {
		f.Add(randomStream(rng), uint64(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		sameService(t, in, randomCuts(len(in), seed))
	})
}

// BenchmarkKeepAlive is the cost of one request on a keep-alive
// connection over loopback, through net/http alone and through the guard:
// the client writes an SDK-shaped request and reads the response.
func BenchmarkKeepAlive(b *testing.B) {
	for _, guarded := range []bool{false, true} {
		name := "bare"
		if guarded {
			name = "guarded"
		}
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			if guarded {
				ln = NewListener(ln, Options{})
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header()["Date"] = nil // a response of constant length
				io.WriteString(w, "ok")
			})}
			go srv.Serve(ln)
			defer srv.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req := []byte(sdkReq)
			res, err := roundTrip(c, req, nil)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, len(res))
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				if _, err := roundTrip(c, req, buf); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time is steadier than wall time on a busy machine; it
			// counts the client, the server and the runtime.
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// roundTrip writes req and reads a response: len(buf) bytes, or when buf
// is nil whatever arrives in 200ms.
func roundTrip(c net.Conn, req, buf []byte) ([]byte, error) {
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	if buf != nil {
		_, err := io.ReadFull(c, buf)
		return buf, err
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	res, err := io.ReadAll(c)
	if isTimeout(err) && strings.HasPrefix(string(res), "HTTP/1.1 200 OK\r\n") {
		err = nil
	}
	return res, err
}
