// Package connguard refuses HTTP/1.x requests whose framing a front proxy
// and net/http may read differently — Content-Length together with
// Transfer-Encoding, or Transfer-Encoding in an HTTP/1.0 request (RFC 9112
// section 6.1) — with a 400 and a closed connection, which net/http's
// server does not do: it drops the Content-Length before any handler runs,
// serves the request as chunked and keeps the connection, the shape of a
// request-smuggling attack.
//
// It works below net/http, as a net.Listener wrapper: each connection
// follows the framing of its requests as net/http reads them (heads
// parsed, Content-Length bodies skipped by count, chunked bodies by a
// small state machine). When a head is to be refused, the connection
// replaces its final line feed with a line net/http cannot parse, so
// net/http itself refuses that request in its turn — after serving every
// request before it on the connection, pipelined or not — with its own
// 400, which the connection rewrites into a JSON error body, and then
// closes the connection. No handler runs for the refused request and no
// handler needs wiring; requests on other connections, and before it on
// the same one, are not touched.
//
// Where the stream stops being HTTP/1.x that net/http would serve (TLS
// bytes, the HTTP/2 preface, a head or chunk net/http refuses), the
// connection stops following it and passes bytes through: net/http's own
// behaviour, which in those cases is to refuse and close or to switch
// protocols.
package connguard

import (
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// Options configures NewListener. The zero value is ready to use.
type Options struct {
	// OnReject, if set, is called when a connection's request is refused,
	// with the client's address and why. It is called from net/http's
	// goroutine reading the connection, so it must not block.
	OnReject func(remote net.Addr, reason string)
}

// NewListener returns a listener whose connections refuse requests with
// ambiguous framing, for an http.Server serving HTTP/1.x in plain text:
// it must wrap the listener the http.Server reads requests from directly
// (under TLS it would see ciphertext and step aside).
func NewListener(ln net.Listener, opts Options) net.Listener {
	return &listener{Listener: ln, opts: opts}
}

type listener struct {
	net.Listener
	opts Options
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, t: newTracker(), onReject: l.opts.OnReject}, nil
}

const (
	// poison replaces the final LF of a refused head: net/http then reads
	// a field line with no colon ("\r\x00" or "\x00"), which it refuses
	// ("malformed MIME header") with its plain-text 400, and closes the
	// connection. It cannot be taken for obs-fold (it does not start with
	// SP or HTAB) and ends in LF, so net/http needs no further byte to
	// refuse it.
	//
	// The CRLF CRLF after it stands in for the one that ended the head:
	// net/http accepts a chunked body whose trailer does not end in CRLF
	// CRLF only if one comes within the next 4 KiB (seeUpcomingDoubleCRLF),
	// and it may be this head's. The request before a refused one is then
	// served as net/http alone would serve it, unless that CRLF CRLF was
	// within 4 bytes of the 4 KiB or was not there at all (then the guard
	// serves it and net/http alone would refuse it). No rewrite of a head
	// that has partly reached net/http can keep its CRLF CRLF in place and
	// also fail to parse; holding heads back would let a client trickle
	// a keep-alive request's head for IdleTimeout instead of
	// ReadHeaderTimeout (net/http starts that only once 4 bytes arrive).
	poison = "\x00\r\n\r\n"

	// netHTTP400 is what net/http writes, in one Write, when it refuses a
	// malformed request (server.go, conn.serve). Under a different Go
	// version it might differ: the client then gets net/http's text 400,
	// still followed by a close, and TestRefusesAmbiguousFraming fails.
	netHTTP400 = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"

	// lingerTime and lingerBytes bound how long and how much a refusing
	// connection reads, after its response and its FIN, before it closes:
	// closing with unread bytes (the rest of the refused request) makes
	// the kernel send a RST, which can destroy the response before the
	// client reads it. net/http waits 500ms for the same reason
	// (rstAvoidanceDelay).
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 256 << 10
)

// conn follows the framing of the requests read through it.
type conn struct {
	net.Conn

	// t and pending are only used by Read, which net/http never calls
	// concurrently (its background read and the request reader take
	// turns under its own lock).
	t        tracker
	pending  string // what is left of poison to deliver
	onReject func(net.Addr, string)

	// reply is the response to write in place of netHTTP400, set once
	// before refused is (Write and Close can run on other goroutines).
	reply    string
	refused  atomic.Bool
	lingered atomic.Bool
}

func (c *conn) Read(p []byte) (int, error) {
	if c.t.stopped() {
		if c.refused.Load() {
			return c.readPoison(p)
		}
		return c.Conn.Read(p)
	}
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	cut, reason := c.t.feed(p[:n])
	if cut < 0 {
		return n, err
	}
	// Bytes before the cut go to net/http as they are; the poison goes
	// in place of the LF at p[cut] and of everything after it, which
	// net/http is never to read.
	c.pending = poison
	c.reply = errorResponse(reason)
	c.refused.Store(true)
	if c.onReject != nil {
		c.onReject(c.RemoteAddr(), reason)
	}
	k := copy(p[cut:], c.pending)
	c.pending = c.pending[k:]
	return cut + k, nil
}

// readPoison delivers the rest of the poison. After it, reads wait on
// the client as before (what it sends is discarded) until the connection
// ends: an EOF would tell net/http's background read that the client hung
// up, cancelling a request pipelined before the refused one while it is
// still being served.
func (c *conn) readPoison(p []byte) (int, error) {
	if c.pending == "" {
		var scratch [512]byte
		for {
			if _, err := c.Conn.Read(scratch[:]); err != nil {
				return 0, err
			}
		}
	}
	k := copy(p, c.pending)
	c.pending = c.pending[k:]
	return k, nil
}

func (c *conn) Write(p []byte) (int, error) {
	if c.refused.Load() && string(p) == netHTTP400 {
		if _, err := io.WriteString(c.Conn, c.reply); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

type closeWriter interface{ CloseWrite() error }

// CloseWrite half-closes the connection if the underlying one can:
// net/http uses it (closeWriteAndWait) when it hangs up on a client that
// may still be sending, and would not find it on a wrapper without it.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the underlying connection's sendfile/splice path for
// response bodies copied from files.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// Close closes the connection; after a refusal it first sends FIN and
// reads what the client still sends, for up to lingerTime, so the
// client's kernel does not see a RST before the client reads the 400.
func (c *conn) Close() error {
	if c.refused.Load() && c.lingered.CompareAndSwap(false, true) {
		cw, ok := c.Conn.(closeWriter)
		if ok && cw.CloseWrite() == nil && c.SetReadDeadline(time.Now().Add(lingerTime)) == nil {
			io.CopyN(io.Discard, c.Conn, lingerBytes)
		}
	}
	return c.Conn.Close()
}

// errorResponse is the 400 for a refused request, in the OpenAI error
// shape the gateway answers every other refused request with.
func errorResponse(reason string) string {
	body := `{"error":{"message":"` + reason + `","type":"invalid_request_error","code":"invalid_request","param":null}}`
	return "HTTP/1.1 400 Bad Request\r\n" +
		"Content-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		"Connection: close\r\n" +
		"\r\n" + body
}
