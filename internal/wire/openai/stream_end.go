package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/firstword/firstword/internal/sse"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// How a Chat Completions stream ends, and the error lines that are not
// chunks.

// newEventReader returns the event reader of a stream: one that also
// returns the lines the standard ignores, where llama.cpp writes its
// errors ("error: {...}").
func newEventReader(r io.Reader, maxEventSize int) *sse.Reader {
	rd := sse.NewReader(r, maxEventSize)
	rd.ReturnUnknown(true)
	return rd
}

// nextEvent returns the next event with data, or the error that ends the
// stream, classified.
//
// A body that ends inside an event is truncated, as the standard says,
// with one exception: when that event is whole in its own terms, the
// [DONE] marker or a complete error object, and only its blank line is
// missing ("data: [DONE]\n" at the end of the body), it is taken. Any
// other unfinished event is discarded: without [DONE] the stream is
// broken whatever it carried.
func (s *StreamReader) nextEvent() (*sse.Event, error) {
	for {
		ev, err := s.rd.Next()
		if err == io.ErrUnexpectedEOF {
			if p := s.rd.Partial(); p != nil && (bytes.Equal(p.Data, doneMarker) || isErrorEvent(p)) {
				return p, nil
			}
		}
		if err != nil {
			return nil, upstream.ReadError(err, "no [DONE] after %d chunks", s.chunks)
		}
		if ev.Unknown != nil {
			if e := lineError(ev.Unknown); e != nil {
				return nil, e
			}
			continue
		}
		return ev, nil
	}
}

// isErrorEvent reports whether ev is a complete error: an error event, or
// an object whose "error" says something.
func isErrorEvent(ev *sse.Event) bool {
	if !json.Valid(ev.Data) {
		return false
	}
	if ev.Type == "error" {
		return true
	}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(ev.Data, &env) == nil && hasErrorMessage(env.Error)
}

// lineError returns the error a line outside any data field reports, or
// nil. llama.cpp's server (before it moved errors into data fields, late
// 2025) ended a failed stream with an "error:" field holding the error
// object, {"code":400,"message":...,"type":...}, then "data: [DONE]";
// a JSON error object written raw on a line of its own is read too.
func lineError(line []byte) error {
	if v, ok := bytes.CutPrefix(line, errorField); ok {
		v = bytes.TrimPrefix(v, []byte(" "))
		return decodeErrorEvent(bytes.TrimSpace(v))
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil
	}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &env) != nil || !hasErrorMessage(env.Error) {
		return nil
	}
	return decodeErrorEvent(line)
}

var errorField = []byte("error:")

// contextTooLong recognises the messages of a prompt over the context
// window from servers that give it no code of its own: vLLM's "This
// model's maximum context length is 32768 tokens. However, you requested
// ..." and llama.cpp's "the request exceeds the available context size".
func contextTooLong(msg string) bool {
	return strings.Contains(msg, "maximum context length is") || strings.Contains(msg, "exceeds the available context size")
}

// codeStatus returns an error object's code when it is an HTTP error
// status, as llama.cpp and vLLM send it ("code": 400), or 0.
func codeStatus(code json.RawMessage) int {
	var n int
	if json.Unmarshal(code, &n) != nil || n < 400 || n > 599 {
		return 0
	}
	return n
}
