package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
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
