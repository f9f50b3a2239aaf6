package provider

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
)

// TestTransportErrorHidesAddress: the message a client sees says why the
// upstream was unreachable without naming its address; the log (Error())
// keeps the detail.
func TestTransportErrorHidesAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader("{}"))
	_, err = Do(&http.Client{Transport: NewTransport()}, req)
	if err == nil {
		t.Fatal("the request to a closed port succeeded")
	}
	var ce *chat.Error
	if !errors.As(TransportError(context.Background(), "up", err), &ce) {
		t.Fatal("not a chat.Error")
	}
	if ce.Message != "upstream unreachable: connection refused" || ce.Category != chat.CategoryUpstreamUnavailable || !ce.Retryable {
		t.Errorf("client message %q (%s, retryable %v)", ce.Message, ce.Category, ce.Retryable)
	}
	if !strings.Contains(ce.Error(), `Post "http://`+addr+`/v1/chat/completions"`) {
		t.Errorf("the log line lost the method or the address: %q", ce.Error())
	}
	// A cancelled request is not an upstream failure.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(context.Canceled)
	if got := TransportError(ctx, "up", err); !errors.Is(got, context.Canceled) {
		t.Errorf("cancelled: %v", got)
	}
}

// TestDoDoesNotFollowRedirects, on a real socket: an upstream that
// redirects is answered with an error that says so, without naming the
// target, and the target never sees the request (a POST re-sent elsewhere
// would be a second, unbilled generation).
func TestDoDoesNotFollowRedirects(t *testing.T) {
	var targetHit atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) { targetHit.Store(true) })
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
	resp, err := Do(&http.Client{Transport: NewTransport()}, req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || targetHit.Load() {
		t.Fatalf("status %d, target hit %v: the redirect was followed", resp.StatusCode, targetHit.Load())
	}
	e := ReadError("up", resp, func(status int, body []byte) *chat.Error {
		c, retry := chat.CategoryForStatus(status)
		return &chat.Error{Category: c, Status: status, Message: string(body), Retryable: retry}
	})
	if !strings.Contains(e.Message, "upstream answered 307, a redirect, which is not followed") || strings.Contains(e.Message, "/target") || e.Provider != "up" {
		t.Errorf("message %q (provider %q)", e.Message, e.Provider)
	}
}

// TestDoSendsURLUserAsBasicAuth, on a real socket: a base_url with a user
// and password (an upstream behind a basic-auth proxy) is sent as basic
// auth, as http.Client sends it, unless an Authorization header is set;
// an error names the URL without the password.
func TestDoSendsURLUserAsBasicAuth(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://user:pa%20ss@", 1) + "/v1/chat/completions"
	c := &http.Client{Transport: NewTransport()}

	req, _ := http.NewRequest("POST", u, strings.NewReader("{}"))
	resp, err := Do(c, req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := <-got; a != "Basic dXNlcjpwYSBzcw==" { // user:pa ss
		t.Errorf("Authorization %q, want the URL's user as basic auth", a)
	}

	req, _ = http.NewRequest("POST", u, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer k")
	resp, err = Do(c, req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := <-got; a != "Bearer k" {
		t.Errorf("Authorization %q, want the request's own", a)
	}

	srv.Close()
	req, _ = http.NewRequest("POST", u, strings.NewReader("{}"))
	if _, err := Do(c, req); err == nil || strings.Contains(err.Error(), "pa%20ss") || strings.Contains(err.Error(), "pa ss") || !strings.Contains(err.Error(), "user:xxxxx@") {
		t.Errorf("error %v: want the URL with its password redacted", err)
	}
}

// TestDoRedactsQueryCredentials: a transport error quotes the URL without
// its password or the values of credential-named query parameters (a key=
// as Gemini accepts one); the other parameters stay.
func TestDoRedactsQueryCredentials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	req, _ := http.NewRequest("POST", "http://u:hunter22@"+addr+"/v1beta/models/m:streamGenerateContent?alt=sse&key=AIzaSecretSecret&api-key=AzureSecret1&sig=SasSignature1", strings.NewReader("{}"))
	_, err = Do(&http.Client{Transport: NewTransport()}, req)
	if err == nil {
		t.Fatal("the request to a closed port succeeded")
	}
	for _, secret := range []string{"hunter22", "AIzaSecretSecret", "AzureSecret1", "SasSignature1"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q quotes %q", err, secret)
		}
	}
	if want := "?alt=sse&key=xxxxx&api-key=xxxxx&sig=xxxxx"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want the query as %q", err, want)
	}
}

// TestSendInvalidURLHidesPassword: a base URL that does not parse is
// reported without being quoted (its password would be).
func TestSendInvalidURLHidesPassword(t *testing.T) {
	p := &Post{Name: "up", Client: &http.Client{}, URL: "http://user:hunter22@bad host/v1/chat"}
	_, err := p.Send(context.Background())
	if err == nil || strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), "invalid upstream URL") {
		t.Errorf("Send() = %v, want an invalid URL that is not quoted", err)
	}
}

type countingOpener struct{ n int }

func (o *countingOpener) Open(context.Context, *chat.Request) (*http.Response, ChunkReader, error) {
	o.n++
	return nil, nil, errors.New("opened")
}

// TestPullHTTPClosedBeforeNext: a reader closed before its first Next
// never sends the request.
func TestPullHTTPClosedBeforeNext(t *testing.T) {
	o := &countingOpener{}
	r := PullHTTP(context.Background(), NewScrubber("up", "", nil), o, &chat.Request{})
	r.Close()
	if _, err := r.Next(); err == nil || o.n != 0 {
		t.Errorf("Next after Close: err %v, %d requests sent", err, o.n)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, header, value string
		want                time.Duration
	}{
		{"seconds", "Retry-After", "7", 7 * time.Second},
		{"fraction", "Retry-After", "0.5", 500 * time.Millisecond},
		{"milliseconds", "Retry-After-Ms", "250", 250 * time.Millisecond},
		{"date", "Retry-After", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"past date", "Retry-After", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"absurd seconds", "Retry-After", "99999999999999", 24 * time.Hour},
		{"infinite", "Retry-After", "Inf", 24 * time.Hour},
		{"absurd milliseconds", "Retry-After-Ms", "1e300", 24 * time.Hour},
		{"negative", "Retry-After", "-3", 0},
		{"garbage", "Retry-After", "soon", 0},
		{"NaN", "Retry-After", "NaN", 0},
	} {
		h := http.Header{}
		h.Set(tc.header, tc.value)
		if got := RetryAfter(h, now); got != tc.want {
			t.Errorf("%s: %s: %q = %v, want %v", tc.name, tc.header, tc.value, got, tc.want)
		}
	}
}

// compressors encode a body as an upstream (or a proxy in front of it)
// would under each Content-Encoding.
var compressors = map[string]func(w io.Writer) io.WriteCloser{
	"gzip": func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
	"zlib": func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) },
	"raw flate": func(w io.Writer) io.WriteCloser {
		fw, _ := flate.NewWriter(w, flate.DefaultCompression)
		return fw
	},
}

func compress(t testing.TB, how string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := compressors[how](&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeAsText is a Post's Decode that keeps the body as the message.
func decodeAsText(status int, body []byte) *chat.Error {
	cat, retry := chat.CategoryForStatus(status)
	return &chat.Error{Category: cat, Status: status, Message: string(body), Retryable: retry}
}

// TestSendDecodesCompressedBodies, on a real socket: Send asks for an
// uncompressed answer, and an upstream that compresses anyway (issue 16:
// "no [DONE] after 0 chunks", the gzip bytes read as the stream) is read
// decoded, a recorded OpenAI stream and an error body alike.
func TestSendDecodesCompressedBodies(t *testing.T) {
	plain, err := os.ReadFile("testdata/openai_chat_stream_usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, coding, how string // how: a compressor, or "" for none
	}{
		{"identity", "", ""},
		{"declared identity", "identity", ""},
		{"gzip", "gzip", "gzip"},
		{"x-gzip", "x-gzip", "gzip"},
		{"gzip, any case, with identity", "identity, GZip", "gzip"},
		{"deflate (zlib, RFC 9110)", "deflate", "zlib"},
		{"deflate (raw, as some servers send it)", "deflate", "raw flate"},
	}
	errBody := []byte(`{"error":{"message":"the model is overloaded","type":"server_error"}}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, status := range []int{200, 503} {
				body := plain
				if status != 200 {
					body = errBody
				}
				var askedFor atomic.Value
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					askedFor.Store(r.Header.Get("Accept-Encoding"))
					w.Header().Set("Content-Type", "text/event-stream")
					if tt.coding != "" {
						w.Header().Set("Content-Encoding", tt.coding)
					}
					w.WriteHeader(status)
					if tt.how == "" {
						w.Write(body)
					} else {
						w.Write(compress(t, tt.how, body))
					}
				}))
				defer srv.Close()
				p := &Post{Name: "up", Client: &http.Client{Transport: NewTransport()}, URL: srv.URL, Body: []byte("{}"), Accept: "text/event-stream", Decode: decodeAsText}
				resp, err := p.Send(context.Background())
				if got := askedFor.Load(); got != "identity" {
					t.Errorf("Accept-Encoding = %q, want identity", got)
				}
				if status != 200 {
					if ce := chat.AsError(err); ce == nil || ce.Status != status || ce.Message != string(errBody) {
						t.Errorf("%d: Send() error = %v, want the error body decoded", status, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Send() error = %v", err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !bytes.Equal(got, plain) {
					t.Errorf("body = %q, %v; want the recorded stream", got[:min(len(got), 40)], err)
				}
				if ce := resp.Header.Get("Content-Encoding"); tt.how != "" && ce != "" {
					t.Errorf("Content-Encoding %q left on a decoded body", ce)
				}
			}
		})
	}
}

// TestSendRefusesOtherEncodings: a coding firstword does not decode is an
// error that names it, not bytes read as a stream; on an error answer
// the status speaks alone.
func TestSendRefusesOtherEncodings(t *testing.T) {
	for _, coding := range []string{"br", "zstd", "gzip, gzip", "compress"} {
		for _, status := range []int{200, 503} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Encoding", coding)
				w.WriteHeader(status)
				w.Write([]byte("\x1b\x9f\x00\xf8garbage"))
			}))
			p := &Post{Name: "up", Client: &http.Client{Transport: NewTransport()}, URL: srv.URL, Body: []byte("{}"), Accept: "text/event-stream", Decode: decodeAsText}
			_, err := p.Send(context.Background())
			srv.Close()
			ce := chat.AsError(err)
			switch {
			case ce == nil:
				t.Errorf("%s, %d: Send() = %v, want an error", coding, status, err)
			case status == 200 && (ce.Category != chat.CategoryProtocol || !strings.Contains(ce.Message, "Content-Encoding") || !strings.Contains(ce.Message, strings.Split(coding, ",")[0])):
				t.Errorf("%s, %d: error %v, want a protocol error naming the encoding", coding, status, err)
			case status != 200 && (ce.Status != status || strings.Contains(ce.Message, "garbage")):
				t.Errorf("%s, %d: error %v, want the status and none of the body", coding, status, err)
			}
		}
	}
}

// TestSendCompressedStreamUnbuffered: an upstream that compresses its
// stream and flushes each event (as gzip middleware with a sync flush
// does) has each event reach the reader before it sends the next:
// decoding holds nothing back. The upstream waits for the reader to have
// event k before it sends event k+1, so a decoder that buffered would
// stall the stream.
func TestSendCompressedStreamUnbuffered(t *testing.T) {
	plain, err := os.ReadFile("testdata/openai_chat_stream_usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	events := strings.SplitAfter(string(plain), "\n\n")
	events = events[:len(events)-1] // the empty string after the last
	for _, how := range []string{"gzip", "zlib"} {
		t.Run(how, func(t *testing.T) {
			got := make(chan int, len(events))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Encoding", map[string]string{"gzip": "gzip", "zlib": "deflate"}[how])
				zw := compressors[how](w)
				for k, ev := range events {
					io.WriteString(zw, ev)
					zw.(interface{ Flush() error }).Flush()
					http.NewResponseController(w).Flush()
					select {
					case n := <-got:
						if n != k {
							t.Errorf("the reader reported event %d after event %d was sent", n, k)
						}
					case <-time.After(5 * time.Second):
						t.Errorf("event %d of %d was sent but never reached the reader", k, len(events))
						return
					}
				}
				zw.Close()
			}))
			defer srv.Close()
			p := &Post{Name: "up", Client: &http.Client{Transport: NewTransport()}, URL: srv.URL, Body: []byte("{}"), Accept: "text/event-stream", Decode: decodeAsText}
			resp, err := p.Send(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf []byte
			b := make([]byte, 512)
			for k := range events {
				for !bytes.HasSuffix(buf, []byte(events[k])) {
					n, err := resp.Body.Read(b)
					buf = append(buf, b[:n]...)
					if err != nil {
						t.Fatalf("event %d: %v after %q", k, err, buf)
					}
				}
				got <- k
			}
			if string(buf) != string(plain) {
				t.Errorf("read %q, want the recorded stream", buf)
			}
		})
	}
}
