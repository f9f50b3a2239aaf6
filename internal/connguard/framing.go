package connguard

import "bytes"

// tracker follows the framing of the HTTP/1.x requests on one connection
// as their bytes are read, the way net/http's server will frame them: a
// head (request line, header fields, blank line), then a body framed by
// Transfer-Encoding: chunked, else by Content-Length, else empty (a request
// is never read until EOF). It keeps no bytes: every state is a few
// integers, so a head or chunk line split across reads costs nothing extra
// and the parse cannot be made to buffer.
//
// The tracker must agree with net/http on every stream net/http accepts,
// because the first byte it takes for the start of a head that net/http
// takes for a body byte would let a request past unseen. Where net/http
// refuses a stream (a malformed head, a bad chunk line), it closes the
// connection after answering, so nothing later is served and the tracker
// may do anything there; it stops (sOff) where that is simplest, and is
// laxer than net/http where checking would cost (chunk line length, chunk
// overhead, the 4 KiB trailer lookahead). The rules below cite the code in
// net/http (Go 1.26) they mirror; TestTrackerAgreesWithNetHTTP and
// FuzzFraming check them against net/http's own parser.
type tracker struct {
	st state

	// k counts bytes matched in the current state: of "POST" in a method
	// (5: not POST), of a field name, of the version, of hex digits in a
	// chunk size, or CR/LF bytes still skippable before a head.
	k    uint8
	ver  [9]byte // the request line's version, plus a CR
	name string  // the field name being matched

	// The head being read.
	post     bool // its method is exactly POST
	lastPost bool // the previous head's was
	http10   bool
	first    bool  // the next header line is the first
	field    field // the field the last header line began, for obs-fold
	hasCL    bool  // a Content-Length field was seen, valid or not
	hasTE    bool
	cl       int64 // the Content-Length value; -1 if none or empty
	val      uint64
	valState uint8 // 0 before digits, 1 in them, 2 after them

	size uint64 // a chunk size being read
	left uint64 // bytes left in a Content-Length body or a chunk

	// base is the stream offset of the buffer being fed; start is the
	// offset where the current head began. Both only feed trace.
	base, start int64
	// trace, when set (in tests), is told of every decision.
	trace func(traceEvent)
}

type state uint8

const (
	sHeadStart    state = iota // before a head
	sSkipCRLF                  // after a POST, up to 4 CR or LF bytes are skipped (server.go readRequest)
	sMethod                    // request line: method, up to the first SP
	sTarget                    // request-target, up to the second SP
	sVersion                   // the rest of the line: the version
	sLineStart                 // start of a header line, or of the blank line ending the head
	sLineCR                    // a header line began with CR
	sName                      // a field name that may be Content-Length or Transfer-Encoding
	sValue                     // a Content-Length value
	sValueCR                   // CR in a Content-Length value: only LF may follow
	sSkipLine                  // rest of a header line that does not matter
	sBody                      // Content-Length body
	sChunkSize                 // chunk-size hex digits
	sChunkOWS                  // whitespace after the chunk size
	sChunkExt                  // chunk extension, up to CR
	sChunkLF                   // LF ending a chunk line
	sChunkData                 // chunk data
	sChunkDataCR               // CR after chunk data
	sChunkDataLF               // LF after chunk data
	sTrailerStart              // start of a trailer line, or of the blank line ending the trailer
	sTrailerCR                 // a trailer line began with CR
	sTrailerLine               // rest of a trailer line
	sOff                       // not tracking: net/http refuses the stream or it is not HTTP/1.x
	sRejected                  // a head was rejected; nothing after it is served
)

// field is what a header line is, so an obs-fold continuation line goes
// on with it.
type field uint8

const (
	fOther field = iota
	fContentLength
	fTransferEncoding
)

// traceEvent is one decision of the tracker, for tests.
type traceEvent struct {
	Kind  traceKind
	At    int64 // stream offset: see traceKind
	Start int64 // for traceHead and traceReject: where the head began
}

type traceKind uint8

const (
	traceHead   traceKind = iota + 1 // a head accepted; At is the offset after it
	traceEnd                         // a message ended; At is the offset after it
	traceReject                      // a head rejected; At is the offset of its final LF
	traceOff                         // tracking stopped at the byte at At
)

// Reasons a head is rejected, as the client reads them.
const (
	reasonBoth   = "the request has both Content-Length and Transfer-Encoding, which may frame it as two different requests (RFC 9112 section 6.1): send one of them"
	reasonHTTP10 = "Transfer-Encoding is not allowed in an HTTP/1.0 request (RFC 9112 section 6.1)"
)

func newTracker() tracker { return tracker{st: sHeadStart} }

// stopped reports whether the tracker no longer reads the stream.
func (t *tracker) stopped() bool { return t.st >= sOff }

// feed advances the tracker over b, the next bytes of the stream. If b
// completes a head to be rejected, feed returns the index in b of the
// head's final LF (everything before it is framed as net/http will frame
// it) and the reason; otherwise it returns -1.
func (t *tracker) feed(b []byte) (cut int, reason string) {
	i := 0
	for i < len(b) && t.st < sOff {
		c := b[i]
		switch t.st {
		case sBody:
			// Content-Length bodies are skipped, not scanned.
			if i = t.skip(b, i); t.left == 0 {
				t.endMessage(i)
			}

		case sHeadStart:
			t.post, t.http10, t.first = false, false, true
			t.field, t.hasCL, t.hasTE, t.cl = fOther, false, false, -1
			t.k = 0
			t.st = sMethod
			if t.lastPost {
				// net/http peeks 4 bytes after a POST and discards the
				// leading CRs and LFs among them ("tolerance for old
				// buggy clients"); the head starts after them.
				t.k = 4
				t.st = sSkipCRLF
				continue
			}
			t.start = t.base + int64(i)

		case sSkipCRLF:
			if t.k > 0 && (c == '\r' || c == '\n') {
				t.k--
				i++
				continue
			}
			t.k = 0
			t.start = t.base + int64(i)
			t.st = sMethod

		case sMethod:
			// parseRequestLine cuts at the first SP; validMethod wants a
			// non-empty token.
			switch {
			case isToken(c):
				if t.k < 4 && c == "POST"[t.k] {
					t.k++
				} else {
					t.k = 5
				}
				i++
			case c == ' ' && t.k > 0:
				t.post = t.k == 4
				t.st = sTarget
				i++
			default:
				t.off(i)
			}

		case sTarget:
			// The target runs to the second SP; a line without one is
			// malformed. What the target holds is net/http's business.
			rest := b[i:]
			if sp := bytes.IndexByte(rest, ' '); sp >= 0 {
				rest = rest[:sp+1]
			}
			if lf := bytes.IndexByte(rest, '\n'); lf >= 0 {
				t.off(i + lf)
				continue
			}
			i += len(rest)
			if rest[len(rest)-1] == ' ' {
				t.k = 0
				t.st = sVersion
			}

		case sVersion:
			// Everything after the second SP is the version, which
			// ParseHTTPVersion takes only as "HTTP/d.d". Major 1 only:
			// net/http answers others 505 and closes, and "PRI * HTTP/2.0"
			// is HTTP/2's preface, not ours to frame.
			if c != '\n' {
				if t.k == uint8(len(t.ver)) {
					t.off(i)
					continue
				}
				t.ver[t.k] = c
				t.k++
				i++
				continue
			}
			v := t.ver[:t.k]
			if len(v) > 0 && v[len(v)-1] == '\r' {
				v = v[:len(v)-1]
			}
			if len(v) != 8 || string(v[:5]) != "HTTP/" || v[5] != '1' || v[6] != '.' || v[7] < '0' || v[7] > '9' {
				t.off(i)
				continue
			}
			t.http10 = v[7] == '0'
			t.st = sLineStart
			i++

		case sLineStart:
			switch c {
			case '\n':
				if cut, reason := t.endHead(i); cut >= 0 {
					t.base += int64(len(b))
					return cut, reason
				}
				i++
			case '\r':
				t.st = sLineCR
				i++
			case ' ', '\t':
				// obs-fold: textproto joins the line to the previous one.
				// The first line may not start with one.
				switch {
				case t.first:
					t.off(i)
				case t.field == fContentLength:
					t.st = sValue // the whitespace is the value's separator
				default:
					t.st = sSkipLine
				}
			default:
				if t.endField(i); t.st == sOff {
					continue
				}
				t.first = false
				t.field = fOther
				t.st = sSkipLine
				t.k = 0
				switch c | 0x20 { // a letter either case; no other name byte can match
				case 'c':
					t.name, t.st = "content-length", sName
				case 't':
					t.name, t.st = "transfer-encoding", sName
				}
			}

		case sLineCR:
			if c != '\n' {
				// A line starting "\r" is not a valid field line.
				t.off(i)
				continue
			}
			if cut, reason := t.endHead(i); cut >= 0 {
				t.base += int64(len(b))
				return cut, reason
			}
			i++

		case sName:
			// The name is everything before the first colon, compared
			// ASCII-case-insensitively (canonicalMIMEHeaderKey). Anything
			// else, including "Content-Length :" (which the server
			// refuses), is another field.
			if c == ':' && int(t.k) == len(t.name) {
				i++
				if t.name == "transfer-encoding" {
					t.hasTE = true
					t.field = fTransferEncoding
					t.st = sSkipLine
					continue
				}
				t.hasCL = true
				t.field = fContentLength
				t.val, t.valState = 0, 0
				t.st = sValue
				continue
			}
			if int(t.k) < len(t.name) && lower(c) == t.name[t.k] {
				t.k++
				i++
				continue
			}
			t.st = sSkipLine

		case sValue:
			// textproto trims each folded line and joins them with a
			// space; parseContentLength takes the trimmed rest as a
			// base-10 number below 1<<63. So: whitespace, one run of
			// digits, whitespace.
			switch {
			case c == ' ' || c == '\t':
				if t.valState == 1 {
					t.valState = 2
				}
				i++
			case '0' <= c && c <= '9' && t.valState < 2:
				d := uint64(c - '0')
				if t.val > (1<<63-1-d)/10 {
					t.off(i)
					continue
				}
				t.val = t.val*10 + d
				t.valState = 1
				i++
			case c == '\r':
				t.st = sValueCR
				i++
			case c == '\n':
				t.st = sLineStart
				i++
			default:
				t.off(i)
			}

		case sValueCR:
			if c != '\n' {
				t.off(i) // a CR inside a field value is refused
				continue
			}
			t.st = sLineStart
			i++

		case sSkipLine:
			var ended bool
			if i, ended = skipLine(b, i); ended {
				t.st = sLineStart
			}

		case sChunkSize:
			// readChunkLine wants the line to end in CRLF with no other CR;
			// then trailing whitespace is trimmed, the extension cut at the
			// first ';', and 1 to 16 hex digits must remain.
			if d, ok := unhex(c); ok {
				if t.k == 16 {
					t.off(i)
					continue
				}
				t.size = t.size<<4 | uint64(d)
				t.k++
				i++
				continue
			}
			switch {
			case t.k == 0:
				t.off(i)
				continue
			case c == ';':
				t.st = sChunkExt
			case c == ' ' || c == '\t':
				t.st = sChunkOWS
			case c == '\r':
				t.st = sChunkLF
			default:
				t.off(i)
				continue
			}
			i++

		case sChunkOWS:
			switch c {
			case ' ', '\t':
			case '\r':
				t.st = sChunkLF
			default:
				t.off(i) // "5 ;ext" and "5 x" do not parse as hex
				continue
			}
			i++

		case sChunkExt:
			switch c {
			case '\r':
				t.st = sChunkLF
			case '\n':
				t.off(i) // bare LF
				continue
			}
			i++

		case sChunkLF:
			if c != '\n' {
				t.off(i)
				continue
			}
			i++
			t.k = 0
			if t.size == 0 {
				t.st = sTrailerStart
				continue
			}
			t.left, t.size = t.size, 0
			t.st = sChunkData

		case sChunkData:
			if i = t.skip(b, i); t.left == 0 {
				t.st = sChunkDataCR
			}

		case sChunkDataCR, sChunkDataLF:
			// Exactly CRLF follows the data.
			if c != "\r\n"[t.st-sChunkDataCR] {
				t.off(i)
				continue
			}
			t.st++
			if t.st > sChunkDataLF {
				t.st = sChunkSize
			}
			i++

		case sTrailerStart:
			// readTrailer: a CRLF ends the body at once; otherwise
			// ReadMIMEHeader reads fields up to the first blank line (bare
			// LF allowed). It also wants "\r\n\r\n" within 4 KiB and valid
			// fields, and refuses the body otherwise; not checked here.
			switch c {
			case '\n':
				i++
				t.endMessage(i)
			case '\r':
				t.st = sTrailerCR
				i++
			default:
				t.st = sTrailerLine
			}

		case sTrailerCR:
			if c != '\n' {
				t.off(i)
				continue
			}
			i++
			t.endMessage(i)

		case sTrailerLine:
			var ended bool
			if i, ended = skipLine(b, i); ended {
				t.st = sTrailerStart
			}
		}
	}
	t.base += int64(len(b))
	return -1, ""
}

// endField finishes the header field before the line starting at b[i].
func (t *tracker) endField(i int) {
	if t.field != fContentLength || t.valState == 0 {
		// An empty Content-Length is refused by default and taken for
		// none under GODEBUG=httplaxcontentlength=1.
		return
	}
	// Several Content-Length fields must agree (fixLength).
	if t.cl >= 0 && t.cl != int64(t.val) {
		t.off(i)
		return
	}
	t.cl = int64(t.val)
}

// skip passes over what is left of a body or of a chunk's data (t.left
// bytes), from b[i] to its end or to the end of b, and returns the index
// after it; t.left is 0 once the end is reached.
func (t *tracker) skip(b []byte, i int) int {
	n := min(uint64(len(b)-i), t.left)
	t.left -= n
	return i + int(n)
}

// skipLine passes over b from b[i] to the end of the line, its LF, or to
// the end of b, and returns the index after it and whether the line
// ended.
func skipLine(b []byte, i int) (int, bool) {
	lf := bytes.IndexByte(b[i:], '\n')
	if lf < 0 {
		return len(b), false
	}
	return i + lf + 1, true
}

// endHead ends the head whose final LF is b[i] and picks how its body is
// framed. It returns i if the head is to be rejected.
func (t *tracker) endHead(i int) (cut int, reason string) {
	t.endField(i)
	if t.st == sOff {
		return -1, ""
	}
	// RFC 9112 section 6.1: a request with both fields "ought to be
	// handled as an error", and Transfer-Encoding in an HTTP/1.0
	// request means its framing "is faulty, even if a Content-Length is
	// present". net/http serves the first as chunked (dropping the
	// Content-Length) and the second by its Content-Length (dropping the
	// Transfer-Encoding), and keeps the connection.
	switch {
	case t.hasTE && t.hasCL:
		reason = reasonBoth
	case t.hasTE && t.http10:
		reason = reasonHTTP10
	}
	if reason != "" {
		t.st = sRejected
		t.emit(traceReject, t.base+int64(i))
		return i, reason
	}
	t.emit(traceHead, t.base+int64(i)+1)
	t.lastPost = t.post
	switch {
	case t.hasTE:
		// Only "chunked" is accepted; any other coding is answered 501
		// and the connection closed.
		t.k, t.size = 0, 0
		t.st = sChunkSize
	case t.cl > 0:
		t.left = uint64(t.cl)
		t.st = sBody
	default:
		t.endMessage(i + 1)
	}
	return -1, ""
}

// endMessage ends a request whose last byte is b[i-1].
func (t *tracker) endMessage(i int) {
	t.st = sHeadStart
	t.emit(traceEnd, t.base+int64(i))
}

// off stops tracking at b[i].
func (t *tracker) off(i int) {
	t.st = sOff
	t.emit(traceOff, t.base+int64(i))
}

func (t *tracker) emit(k traceKind, at int64) {
	if t.trace != nil {
		t.trace(traceEvent{Kind: k, At: at, Start: t.start})
	}
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// isToken reports whether c is a tchar (RFC 9110 section 5.6.2), the bytes
// of a method.
func isToken(c byte) bool {
	const (
		// !#$%&'*+-. and digits
		lo uint64 = 1<<'!' | 1<<'#' | 1<<'$' | 1<<'%' | 1<<'&' | 1<<'\'' | 1<<'*' | 1<<'+' | 1<<'-' | 1<<'.' |
			(1<<10-1)<<'0'
		// letters and ^_`|~
		hi uint64 = (1<<26-1)<<('A'-64) | 1<<('^'-64) | 1<<('_'-64) | 1<<('`'-64) | (1<<26-1)<<('a'-64) |
			1<<('|'-64) | 1<<('~'-64)
	)
	switch {
	case c < 64:
		return lo>>c&1 == 1
	case c < 128:
		return hi>>(c-64)&1 == 1
	}
	return false
}
