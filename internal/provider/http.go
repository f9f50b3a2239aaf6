package provider

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
)

// NewTransport returns the HTTP transport adapters use for upstreams:
// generous keep-alive pools (a gateway talks to few hosts, often), no
// transparent compression (it would ask for gzip, and a compressing
// upstream may hold events back to fill its blocks: Send asks for
// identity, and decodes what comes compressed anyway), and HTTP/2 where
// the upstream offers it.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		// Small buffers: a connection holds them for as long as its
		// stream is open, and SSE events are a few hundred bytes. The
		// write buffer only gathers a request's headers: a larger body
		// goes to the socket past it.
		ReadBufferSize:  2 << 10,
		WriteBufferSize: 1 << 10,
	}
}

// Do sends req through client's transport and returns the response,
// retrying once on a fresh connection when a pooled one turns out to be
// dead before any response byte arrived (the upstream restarted or closed
// it while idle), so an upstream restart costs no client errors. req must
// have GetBody set when it has a body (http.NewRequest does this for
// in-memory bodies).
//
// Redirects are not followed: a 3xx is returned like any other answer
// (ReadError says what to do about it), since a POST re-sent elsewhere
// would start a second generation. Only client's Transport is used (its
// Timeout, Jar and CheckRedirect are not); as http.Client does, a user and
// password in the URL are sent as basic auth unless the request has an
// Authorization header, and errors name the method and the URL (without
// its password or the values of credential-named query parameters such as
// key=).
func Do(client *http.Client, req *http.Request) (*http.Response, error) {
	rt := client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		pass, _ := u.Password()
		req.SetBasicAuth(u.Username(), pass)
	}
	resp, err := roundTrip(rt, req)
	if err != nil {
		op := "Get"
		if m := req.Method; m != "" {
			op = m[:1] + strings.ToLower(m[1:])
		}
		err = &url.Error{Op: op, URL: redactURL(req.URL), Err: err}
	}
	return resp, err
}

func roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	reused := false
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	ctx := req.Context()
	resp, err := rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	if err == nil || !reused || ctx.Err() != nil || !staleConn(err) {
		return resp, err
	}
	retry := req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, err
		}
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, err
		}
		retry.Body = body
	}
	// Every idle connection to a restarted upstream is dead; drop them so
	// the retry dials.
	if t, ok := rt.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	return rt.RoundTrip(retry)
}

// staleConn reports whether err looks like a connection the peer had
// already closed.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "server closed idle connection")
}

// TransportError classifies a failure to get a response from an upstream.
// Cancellation and deadlines pass through unchanged so callers can tell
// them apart with context.Cause.
func TransportError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Provider: name, Message: unreachable(err), Retryable: true, Err: err}
}

// unreachable says why an upstream could not be reached without naming its
// address: the message reaches clients; the error itself (kept in
// chat.Error.Err) reaches the log.
func unreachable(err error) string {
	if why := connFailure(err); why != "" {
		return "upstream unreachable: " + why
	}
	return "upstream unreachable"
}

// connFailure names what went wrong with a connection, or returns "" if
// err is not about the connection.
func connFailure(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.As(err, &dns):
		return "name not resolved"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case strings.Contains(err.Error(), "tls:"), strings.Contains(err.Error(), "x509:"):
		return "TLS failed"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return "connection failed"
	}
	return ""
}

// lostConnection reclassifies a stream that broke because its connection
// did (reset, closed in the middle of the body) rather than because of what
// it carried: upstream_unavailable, with a message that names no address.
func lostConnection(name string, err error) error {
	ce, ok := err.(*chat.Error)
	if !ok || ce.Category != chat.CategoryProtocol || ce.Err == nil {
		return err
	}
	why := connFailure(ce.Err)
	if why == "" {
		return err
	}
	return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Provider: name, Message: "upstream connection lost: " + why, Retryable: true, Err: ce.Err}
}

// ReadError reads a non-2xx response and classifies it with decode, adding
// Retry-After and the provider name.
func ReadError(name string, resp *http.Response, decode func(status int, body []byte) *chat.Error) *chat.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := decode(resp.StatusCode, body)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/html" && bytes.HasPrefix(bytes.TrimSpace(body), []byte("<")) {
		// A proxy's or load balancer's error page: its markup says
		// nothing a client can use.
		e.Message = fmt.Sprintf("upstream answered %d with an HTML page (%s)", resp.StatusCode, htmlTitle(body))
	}
	if resp.StatusCode/100 == 3 {
		// The target is not named: messages reach clients.
		e.Message = fmt.Sprintf("upstream answered %d, a redirect, which is not followed: set the provider's base_url to where it points", resp.StatusCode)
		// The deployment is misconfigured: asking it again is pointless.
		e.Category, e.Retryable = chat.CategoryUpstreamUnavailable, false
	}
	e.Status = resp.StatusCode
	e.Provider = name
	e.RetryAfter = RetryAfter(resp.Header, time.Now())
	return e
}

// Unexpected returns the error for a 2xx answer whose Content-Type says
// it is not what the adapter reads, or nil: a web page (most likely the
// provider's base_url points at the wrong server; the page is not shown to
// clients), or, when jsonIsError, a JSON body where an event stream was
// asked for (some servers send an error object with 200; it is decoded
// with decode).
func Unexpected(name string, resp *http.Response, jsonIsError bool, decode func(status int, body []byte) *chat.Error) *chat.Error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "text/html":
		Drain(resp.Body)
		return &chat.Error{
			Category: chat.CategoryProtocol, Provider: name, Status: http.StatusBadGateway, Retryable: true,
			Message: "upstream answered with an HTML page, not an API response (check the provider's base_url)",
		}
	case mt == "application/json" && jsonIsError:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) != nil || len(top["error"]) == 0 || string(top["error"]) == "null" {
			return &chat.Error{Category: chat.CategoryProtocol, Provider: name, Status: http.StatusBadGateway, Retryable: true,
				Message: "upstream answered with JSON, not an event stream"}
		}
		e := decode(http.StatusBadGateway, body)
		e.Provider = name
		return e
	}
	return nil
}

// RetryAfter parses the Retry-After header (seconds or an HTTP date) and the
// retry-after-ms header some providers send. It returns 0 when absent.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if f, err := strconv.ParseFloat(ms, 64); err == nil && f >= 0 {
			return capRetryAfter(f * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
		return capRetryAfter(f * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}

// maxRetryAfter bounds a Retry-After hint: longer is as good as never for
// a request, and past time.Duration's range it would wrap negative.
const maxRetryAfter = 24 * time.Hour

func capRetryAfter(ns float64) time.Duration {
	if ns >= float64(maxRetryAfter) {
		return maxRetryAfter
	}
	return time.Duration(ns)
}

// Cause returns the context's cause when ctx has ended, else err. Adapters
// use it so that a first-token timeout, a deadline or a client disconnect
// is reported as such and not as a broken upstream.
func Cause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// Drain reads what is left of a finished response body (typically just the
// chunked encoding's terminator) so that its connection goes back to the
// pool instead of being closed: a closed connection costs the next request
// a dial. It gives up after a short wait, closing the body, so a server
// that keeps the response open cannot hold the caller.
func Drain(body io.ReadCloser) {
	if d, ok := body.(*decodedBody); ok {
		// What is left is drained as it came: decoding it is not needed,
		// and a broken coding must not stop the drain.
		body = d.raw
	}
	t := time.AfterFunc(100*time.Millisecond, func() { body.Close() })
	io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	t.Stop()
}

// drainInBackground is Drain for a stream's end, in a goroutine that then
// closes the body and calls done: the caller (and the client's ending)
// does not wait for the body's last bytes, and an upstream that keeps its
// response open after its end marker holds a goroutine for at most Drain's
// 100 ms. The request's context must outlive the drain (see httpReader):
// a request cancelled with its body unread loses its connection.
func drainInBackground(body io.ReadCloser, done func()) {
	go func() {
		Drain(body)
		body.Close()
		done()
	}()
}

// htmlTitle returns an HTML page's title, or "no title".
func htmlTitle(page []byte) string {
	// ASCII-only lower case: the same length as page, whatever its
	// encoding (bytes.ToLower may change lengths).
	lower := make([]byte, len(page))
	for i, c := range page {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	i := bytes.Index(lower, []byte("<title"))
	if i < 0 {
		return "no title"
	}
	j := bytes.IndexByte(lower[i:], '>')
	if j < 0 {
		return "no title"
	}
	start := i + j + 1
	end := bytes.Index(lower[start:], []byte("</title"))
	if end < 0 {
		return "no title"
	}
	t := strings.Join(strings.Fields(string(page[start:start+end])), " ")
	if t == "" || !utf8.ValidString(t) {
		return "no title"
	}
	if len(t) > 120 {
		t = t[:120]
		for len(t) > 0 && !utf8.ValidString(t) {
			t = t[:len(t)-1]
		}
		t += "…"
	}
	return "title: " + strconv.Quote(t)
}

// Opener sends a request upstream: the answer's response and the decoder
// of its body, or the error that ends the request before any chunk.
type Opener interface {
	Open(ctx context.Context, req *chat.Request) (*http.Response, ChunkReader, error)
}

// ChunkReader decodes an answer's body chunk by chunk: the chunk, valid
// until the next call; io.EOF after the last; or the error that ends it.
type ChunkReader interface {
	Next() (*chat.Chunk, error)
}

// PullHTTP returns the Reader of an answer over HTTP: o opens it on the
// first Next; an error from the body is reported by its cause when ctx
// ended, and names the provider s scrubs for; every error, o's included,
// is scrubbed of the provider's secrets by s (see Scrubber); at the end
// the body is drained so that its connection goes back to the pool.
func PullHTTP(ctx context.Context, s *Scrubber, o Opener, req *chat.Request) Reader {
	return &httpReader{ctx: ctx, s: s, o: o, req: req}
}

type httpReader struct {
	ctx  context.Context
	s    *Scrubber // names the provider, too
	o    Opener
	req  *chat.Request
	resp *http.Response
	cr   ChunkReader
	err  error // the error that ended the answer, returned again
	// The upstream request runs on a context of its own that follows
	// ctx's cancellation (follow) until the answer ends, and not after:
	// the attempt and the request end as soon as the end marker is read,
	// while the body's last bytes may still be on their way, and a
	// request cancelled with its body unread loses its connection.
	follow   func() bool
	cancel   context.CancelCauseFunc
	detached bool // the body was handed to drainInBackground
}

func (r *httpReader) Next() (*chat.Chunk, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.resp == nil {
		if err := r.open(); err != nil {
			r.err = r.s.Error(err)
			return nil, r.err
		}
	}
	c, err := r.cr.Next()
	switch {
	case err == io.EOF:
		r.err = io.EOF
		if r.follow() {
			r.detached = true
			drainInBackground(r.resp.Body, func() { r.cancel(nil) })
		}
		return nil, io.EOF
	case err != nil:
		err = lostConnection(r.s.name, Cause(r.ctx, err))
		if ce, ok := err.(*chat.Error); ok && ce.Provider == "" {
			ce.Provider = r.s.name
		}
		r.err = r.s.Error(err)
		return nil, r.err
	}
	return c, nil
}

func (r *httpReader) open() error {
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx)
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.ctx))
	r.cancel = cancel
	r.follow = context.AfterFunc(r.ctx, func() { cancel(context.Cause(r.ctx)) })
	resp, cr, err := r.o.Open(ctx, r.req)
	if err != nil {
		r.follow()
		cancel(nil)
		return err
	}
	r.resp, r.cr = resp, cr
	return nil
}

// Close releases the answer; a Next after it sends nothing.
func (r *httpReader) Close() {
	if r.resp != nil && !r.detached {
		r.resp.Body.Close()
		r.follow()
		r.cancel(nil)
	}
	if rl, ok := r.cr.(interface{ Release() }); ok {
		rl.Release()
	}
	if r.err == nil {
		r.err = errReaderClosed
	}
}

var errReaderClosed = errors.New("the answer's reader was closed")

// Post is an adapter's streaming request upstream.
type Post struct {
	Name   string // the provider, for errors
	Client *http.Client
	URL    string
	Body   []byte
	Accept string // the stream's media type
	// Auth are the adapter's own headers (name, value), set before the
	// provider's configured Headers; one with an empty value is not set.
	Auth    [2][2]string
	Headers map[string]string
	// ReadError classifies a non-2xx answer; nil means ReadError with
	// Decode.
	ReadError func(resp *http.Response) *chat.Error
	// Decode and JSONIsError are Unexpected's: whether a 2xx JSON body is
	// an error, and how to read it.
	Decode      func(status int, body []byte) *chat.Error
	JSONIsError bool
}

// Send sends p and returns its 2xx response, of a type the adapter reads,
// or the error that ends the request before any chunk (the response, if
// any, closed).
func (p *Post) Send(ctx context.Context) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(p.Body))
	if err != nil {
		// Not the URL: a password in it would be quoted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &chat.Error{Category: chat.CategoryInternal, Provider: p.Name, Message: "invalid upstream URL: " + err.Error()}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", p.Accept)
	// An uncompressed answer: a compressing upstream may hold events
	// back to fill its blocks. A configured header may ask otherwise;
	// gzip and deflate are decoded whatever was asked (see decodeBody).
	hreq.Header.Set("Accept-Encoding", "identity")
	for _, kv := range p.Auth {
		if kv[1] != "" {
			hreq.Header.Set(kv[0], kv[1])
		}
	}
	for k, v := range p.Headers {
		hreq.Header.Set(k, v)
	}
	resp, err := Do(p.Client, hreq)
	if err != nil {
		return nil, TransportError(ctx, p.Name, err)
	}
	encErr := decodeBody(resp)
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		if encErr != nil {
			// Undecodable bytes say nothing: the status speaks alone.
			resp.Body = undecodable{resp.Body}
		}
		if p.ReadError != nil {
			return nil, p.ReadError(resp)
		}
		return nil, ReadError(p.Name, resp, p.Decode)
	}
	if encErr != nil {
		resp.Body.Close()
		return nil, &chat.Error{Category: chat.CategoryProtocol, Provider: p.Name, Status: http.StatusBadGateway, Retryable: true, Message: encErr.Error()}
	}
	if e := Unexpected(p.Name, resp, p.JSONIsError, p.Decode); e != nil {
		resp.Body.Close()
		return nil, e
	}
	return resp, nil
}

// decodeBody makes resp.Body read the answer decoded when the upstream
// declared a Content-Encoding (a proxy in front of it may compress what
// it was asked to send plain): gzip and deflate, decoded as the bytes
// come, each read returning what the upstream flushed so far, so that a
// compressed stream is no slower than a plain one. Any other coding is
// an error that names it; the body is left as it is.
func decodeBody(resp *http.Response) error {
	var coding string
	for _, c := range strings.Split(resp.Header.Get("Content-Encoding"), ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c == "" || c == "identity" {
			continue
		}
		if coding != "" {
			return fmt.Errorf("upstream answered with Content-Encoding %q, which firstword does not decode (it asks for identity; gzip and deflate are decoded)", resp.Header.Get("Content-Encoding"))
		}
		coding = c
	}
	switch coding {
	case "":
		return nil
	case "gzip", "x-gzip", "deflate":
	default:
		return fmt.Errorf("upstream answered with Content-Encoding %s, which firstword does not decode (it asks for identity; gzip and deflate are decoded)", coding)
	}
	resp.Body = &decodedBody{raw: resp.Body, coding: coding}
	// As net/http does when it decodes: the headers describe the body
	// read.
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return nil
}

// decodedBody decodes a compressed body as it is read. The decoder is made
// on the first read, which waits for the body's first bytes (its header),
// so that Send returns as soon as the response's headers are in.
type decodedBody struct {
	raw    io.ReadCloser
	coding string
	dec    io.Reader
	err    error // from making the decoder, returned again
}

func (d *decodedBody) Read(p []byte) (int, error) {
	if d.dec == nil && d.err == nil {
		d.dec, d.err = newDecoder(d.coding, d.raw)
	}
	if d.err != nil {
		return 0, d.err
	}
	n, err := d.dec.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("upstream body (Content-Encoding %s): %w", d.coding, err)
	}
	return n, err
}

func (d *decodedBody) Close() error { return d.raw.Close() }

// newDecoder returns the decoder of a coding. "deflate" is the zlib
// format (RFC 9110), but some servers send raw DEFLATE under that name:
// the first two bytes tell them apart.
func newDecoder(coding string, r io.Reader) (io.Reader, error) {
	if coding != "deflate" {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("upstream body (Content-Encoding %s): %w", coding, err)
		}
		return zr, nil
	}
	br := bufio.NewReader(r)
	if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
		zr, err := zlib.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("upstream body (Content-Encoding deflate): %w", err)
		}
		return zr, nil
	}
	return flate.NewReader(br), nil
}

// undecodable is a body in a coding firstword does not decode: it reads
// as empty.
type undecodable struct{ io.ReadCloser }

func (undecodable) Read([]byte) (int, error) { return 0, io.EOF }

// EncodeError is the error for a request an adapter cannot encode.
func EncodeError(name string, err error) error {
	return &chat.Error{Category: chat.CategoryInvalidRequest, Provider: name, Message: err.Error()}
}
