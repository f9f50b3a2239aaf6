package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/sse"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// How a Gemini stream ends: its last event, the error object it may end
// with instead, and the finish reasons it may repeat.

// nextEvent returns the next event with data, io.EOF at the body's clean
// end, or the error that ends the stream, classified.
//
// Lines outside any data field are read for the error object Gemini
// writes raw when a stream fails after it started, pretty-printed over
// several lines ({"error": {"code": 499, ..., "status": "CANCELLED"}}),
// which the Gen AI SDKs read the same way (google-genai's
// _iter_response_stream gathers such lines until its braces balance).
//
// A body that ends inside an event is truncated, as the standard says,
// unless that event is complete JSON: it is then taken, and must be the
// stream's last (every candidate finished, with usageMetadata) or an
// error, or the stream is still truncated (see pull).
func (s *StreamReader) nextEvent() (*sse.Event, error) {
	for {
		ev, err := s.rd.Next()
		switch {
		case err == nil && ev.Unknown != nil:
			if err := s.stray(ev.Unknown); err != nil {
				return nil, err
			}
			continue
		case err == nil:
			// Data came: what was gathered was not a JSON value.
			s.raw.reset()
			return ev, nil
		case err != io.EOF && err != io.ErrUnexpectedEOF:
			return nil, chat.ProtocolError(err)
		case s.raw.started():
			return nil, chat.ProtocolError(fmt.Errorf("%w: stream ended inside a JSON value sent outside any event, after %d events", chat.ErrTruncated, s.events))
		case err == io.EOF:
			return nil, io.EOF
		}
		if p := s.rd.Partial(); p != nil && !s.cut && json.Valid(p.Data) {
			s.cut = true
			return p, nil
		}
		return nil, s.cutInside()
	}
}

// cutInside is the error of a body that ended inside an event.
func (s *StreamReader) cutInside() error {
	return chat.ProtocolError(fmt.Errorf("%w: stream ended inside an event after %d events", chat.ErrTruncated, s.events))
}

// stray reads a line outside any data field: ignored, as the standard
// says, unless it starts or continues a JSON value, which must be an
// error object.
func (s *StreamReader) stray(line []byte) error {
	if !s.raw.add(line) {
		return nil
	}
	if len(s.raw.b) > maxRawJSON {
		return chat.ProtocolError(fmt.Errorf("upstream sent over %d bytes of JSON outside any event", maxRawJSON))
	}
	if !s.raw.whole() {
		return nil
	}
	v := s.raw.b
	s.raw.reset()
	if eb := errorObject(v); eb != nil {
		return errorFromBody(0, eb)
	}
	return chat.ProtocolError(fmt.Errorf("upstream sent JSON outside any event: %s", upstream.Excerpt(string(bytes.TrimSpace(v)), 80)))
}

// maxRawJSON bounds a JSON value written outside any event: an error
// object is a few hundred bytes.
const maxRawJSON = 64 << 10

// rawJSON gathers a JSON value written into the stream line by line,
// tracking its nesting as the lines come, so that each line is scanned
// once.
type rawJSON struct {
	b     []byte
	depth int
	str   bool // inside a string
	esc   bool // after a backslash inside a string
}

// add appends line if it starts a value ({ or [ first) or continues one,
// and reports whether it did.
func (r *rawJSON) add(line []byte) bool {
	if !r.started() {
		t := bytes.TrimLeft(line, " \t")
		if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
			return false
		}
		r.b = make([]byte, 0, 256)
	} else {
		r.b = append(r.b, '\n')
	}
	r.b = append(r.b, line...)
	for _, c := range line {
		switch {
		case r.esc:
			r.esc = false
		case r.str:
			switch c {
			case '\\':
				r.esc = true
			case '"':
				r.str = false
			}
		case c == '"':
			r.str = true
		case c == '{' || c == '[':
			r.depth++
		case c == '}' || c == ']':
			r.depth--
		}
	}
	return true
}

func (r *rawJSON) started() bool { return r.b != nil }

// whole reports whether the brackets opened have all closed (the value is
// complete, or malformed: the caller decodes it to know).
func (r *rawJSON) whole() bool { return r.depth <= 0 && !r.str }

func (r *rawJSON) reset() { *r = rawJSON{} }
