// Package sse reads text/event-stream, as specified by the WHATWG
// HTML standard ("Server-sent events", section 9.2). It imports only the
// standard library.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// DefaultMaxEventSize bounds a line and an event's data when NewReader is
// given no limit.
const DefaultMaxEventSize = 1 << 20

// ErrTooLong is returned when a line or an event's data exceeds the reader's
// limit.
var ErrTooLong = errors.New("sse: event too long")

// Event is one dispatched event, or a comment when Comment is non-nil.
type Event struct {
	// Type is the event field; empty means the default type "message".
	Type string
	// Data is the event's data, lines joined with "\n". It is valid only
	// until the next call to Next.
	Data []byte
	// ID is the last event ID in effect when the event was dispatched.
	ID string
	// Retry is the last reconnection time the stream set, in milliseconds,
	// or -1 when it set none.
	Retry int
	// Comment is a comment line's text after the colon, when the reader
	// returns comments. Valid only until the next call to Next.
	Comment []byte
	// Unknown is a whole line the standard says to ignore (a field whose
	// name is not data, event, id or retry), when the reader returns
	// them. Valid only until the next call to Next.
	Unknown []byte
}

// Reader parses a text/event-stream. It is not safe for concurrent use.
type Reader struct {
	src  io.Reader
	max  int
	buf  []byte
	r, w int
	err  error // sticky read error

	started  bool // the BOM check is done
	skipLF   bool // the previous line ended in CR; drop a following LF
	comments bool
	unknown  bool // return unknown fields
	cut      bool // the input ended inside a line
	ended    bool // Next returned io.ErrUnexpectedEOF
	full     bool // the last read filled the buffer: the source may hold more
	pooled   bool // buf is from firstBufs or readAheadBufs

	ev      Event
	data    []byte
	hasData bool
	typ     []byte
	pending bool // fields seen since the last dispatch
	id      string
	retry   int
}

// NewReader returns a Reader of src. maxEventSize bounds each line and each
// event's data; zero means DefaultMaxEventSize.
func NewReader(src io.Reader, maxEventSize int) *Reader {
	if maxEventSize <= 0 {
		maxEventSize = DefaultMaxEventSize
	}
	return &Reader{src: src, max: maxEventSize, buf: *(firstBufs.Get().(*[]byte)), pooled: true, retry: -1}
}

// ReturnComments makes Next return comment lines as events with Comment
// set, so that callers can observe heartbeats.
func (r *Reader) ReturnComments(on bool) { r.comments = on }

// ReturnUnknown makes Next return the lines the standard says to ignore,
// fields of other names than data, event, id and retry, as events with
// Unknown set. Servers put things there that a caller may want to see:
// llama.cpp's "error: {...}" line, or a JSON error object written into
// the stream raw, line by line, as Gemini ends a failed stream.
func (r *Reader) ReturnUnknown(on bool) { r.unknown = on }

// Buffered reports how many bytes have been read from the source but not
// yet parsed. A caller can use it to tell whether the next event is likely
// to be available without blocking.
func (r *Reader) Buffered() int { return r.w - r.r }

// EventBuffered reports whether an event is already buffered whole (a
// data field and the blank line that dispatches it), so that the next
// call to Next will return it without reading from the source. Comments
// and fields without data do not count: a keep-alive after an event says
// nothing about when the next one comes.
func (r *Reader) EventBuffered() bool {
	b := r.buf[r.r:r.w]
	if r.skipLF && len(b) > 0 && b[0] == '\n' {
		b = b[1:] // the rest of a CRLF split across reads
	}
	data := r.hasData
	for {
		i := indexEOL(b)
		if i < 0 {
			return false
		}
		switch line := b[:i]; {
		case len(line) == 0:
			if data {
				return true
			}
		case isData(line):
			data = true
		}
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
}

// isData reports whether line is a data field.
func isData(line []byte) bool {
	return bytes.HasPrefix(line, dataName) && (len(line) == len(dataName) || line[len(dataName)] == ':')
}

var dataName = []byte("data")

// Next returns the next event. At the end of the stream it returns io.EOF,
// or io.ErrUnexpectedEOF when the stream ended inside an event (which,
// following the standard, is not dispatched; Partial returns it). The
// returned event is reused by the next call.
func (r *Reader) Next() (*Event, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			if err != io.EOF {
				return nil, err
			}
			if len(line) == 0 {
				if r.pending || r.cut {
					r.ended = true
					return nil, io.ErrUnexpectedEOF
				}
				return nil, io.EOF
			}
			// An unterminated last line: read as a line of the event
			// the stream ends in (Partial sees it), which is not
			// dispatched.
			r.cut = true
		}
		if len(line) == 0 {
			if ev := r.dispatch(); ev != nil {
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			if r.comments {
				r.ev = Event{Comment: line[1:], Retry: r.retry, ID: r.id}
				return &r.ev, nil
			}
			continue
		}
		known, err := r.field(line)
		if err != nil {
			return nil, err
		}
		if !known && r.unknown {
			r.ev = Event{Unknown: line, Retry: r.retry, ID: r.id}
			return &r.ev, nil
		}
	}
}

// Partial returns, once Next has returned io.ErrUnexpectedEOF, the event
// the stream ended inside, as it would have been dispatched had its blank
// line come (its last line may lack its line ending too), or nil when it
// has no data. The standard discards such an event; a caller that can
// tell it is whole in its own terms (an end marker, a complete JSON
// value) may take it. The event is the caller's.
func (r *Reader) Partial() *Event {
	if !r.ended || !r.hasData {
		return nil
	}
	return &Event{Type: string(r.typ), Data: bytes.Clone(r.data), ID: r.id, Retry: r.retry}
}

// field applies a field line and reports whether its name is one the
// standard defines.
func (r *Reader) field(line []byte) (known bool, err error) {
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if len(r.data)+len(value)+1 > r.max {
			return true, fmt.Errorf("%w: data over %d bytes", ErrTooLong, r.max)
		}
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasData = true
		r.pending = true
	case "event":
		r.typ = append(r.typ[:0], value...)
		r.pending = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.id = string(value)
		}
		r.pending = true
	case "retry":
		if n, ok := digits(value); ok {
			r.retry = n
		}
		r.pending = true
	default:
		// Ignored, as the standard says, unless the caller wants them.
		return false, nil
	}
	return true, nil
}

// digits parses a non-empty run of ASCII digits.
func digits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(b))
	return n, err == nil
}

// dispatch ends the current event. It returns nil when there is nothing to
// dispatch (no data lines), after resetting the type as the standard says.
func (r *Reader) dispatch() *Event {
	r.pending = false
	if !r.hasData {
		r.typ = r.typ[:0]
		return nil
	}
	typ := r.ev.Type
	if string(r.typ) != typ {
		typ = string(r.typ)
	}
	r.ev = Event{Type: typ, Data: r.data, ID: r.id, Retry: r.retry}
	r.data = r.data[:0]
	r.hasData = false
	r.typ = r.typ[:0]
	return &r.ev
}

// readLine returns the next line without its terminator (CR, LF or CRLF).
// The line is valid until the next call. At the end of the input it returns
// the unterminated remainder, if any, with io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	for !r.started {
		avail := r.buf[r.r:r.w]
		if len(avail) >= len(bom) || r.err != nil || !bytes.HasPrefix(bom, avail) {
			if bytes.HasPrefix(avail, bom) {
				r.r += len(bom)
			}
			r.started = true
			break
		}
		r.fill()
	}
	for r.skipLF {
		if r.r < r.w {
			if r.buf[r.r] == '\n' {
				r.r++
			}
			r.skipLF = false
			break
		}
		if r.err != nil {
			r.skipLF = false
			break
		}
		r.fill()
	}
	scan := r.r
	for {
		if i := indexEOL(r.buf[scan:r.w]); i >= 0 {
			end := scan + i
			line := r.buf[r.r:end]
			if r.buf[end] == '\r' {
				if end+1 < r.w {
					if r.buf[end+1] == '\n' {
						end++
					}
				} else {
					r.skipLF = true
				}
			}
			r.r = end + 1
			return line, nil
		}
		scan = r.w
		if r.err != nil {
			line := r.buf[r.r:r.w]
			r.r = r.w
			return line, r.err
		}
		if r.w-r.r >= r.max {
			return nil, fmt.Errorf("%w: line over %d bytes", ErrTooLong, r.max)
		}
		scan -= r.r
		r.fill()
		scan += r.r
	}
}

var bom = []byte("\xEF\xBB\xBF")

// indexEOL returns the index of b's first CR or LF, or -1. Two
// vectorised byte searches beat one loop over both: a line is hundreds of
// bytes, and CR is rare.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		i = len(b)
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	if i == len(b) {
		return -1
	}
	return i
}

// firstBufs and readAheadBufs hold the first (firstBuf bytes) and the
// grown (readAhead bytes) buffers of released readers.
var (
	firstBufs     = sync.Pool{New: func() any { b := make([]byte, firstBuf); return &b }}
	readAheadBufs = sync.Pool{New: func() any { b := make([]byte, readAhead); return &b }}
)

const firstBuf = 1 << 10

// Release ends the reader's use of its buffer, which a later reader may
// reuse: Next then fails, and what an earlier Next returned must not be
// used any more (a Comment or an Unknown line points into the buffer).
func (r *Reader) Release() {
	r.releaseBuf()
	r.buf, r.r, r.w = nil, 0, 0
	if r.err == nil {
		r.err = ErrReleased
	}
}

// ErrReleased is Next's error after Release.
var ErrReleased = errors.New("sse: reader released")

func (r *Reader) releaseBuf() {
	if !r.pooled {
		return
	}
	switch b := r.buf[:cap(r.buf)]; len(b) {
	case firstBuf:
		firstBufs.Put(&b)
	case readAhead:
		readAheadBufs.Put(&b)
	}
	r.pooled = false
}

// readAhead is the buffer a busy stream grows to: a read that fills the
// buffer says the source had more ready, and taking all of it in one read
// lets a caller that asks EventBuffered write every event that arrived
// together at once. A stream that waits keeps the first, small buffer.
const readAhead = 4 << 10

// fill reads more input, compacting or growing the buffer as needed.
func (r *Reader) fill() {
	if r.r > 0 {
		n := copy(r.buf, r.buf[r.r:r.w])
		r.w = n
		r.r = 0
	}
	switch {
	case r.full && len(r.buf) < readAhead && readAhead <= r.max+1:
		nb := *(readAheadBufs.Get().(*[]byte))
		copy(nb, r.buf[:r.w])
		r.releaseBuf()
		r.buf, r.pooled = nb, true
	case r.w == len(r.buf):
		size := 2 * len(r.buf)
		if size > r.max+1 {
			size = r.max + 1
		}
		nb := make([]byte, size)
		copy(nb, r.buf[:r.w])
		r.releaseBuf()
		r.buf = nb
	}
	for range 100 {
		n, err := r.src.Read(r.buf[r.w:])
		r.full = r.w+n == len(r.buf)
		r.w += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}
