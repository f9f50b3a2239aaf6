package anthropic

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/firstword/firstword/internal/sse"
)

// nextEvent returns the next event, or the reader's error at the end of
// the body.
//
// A body that ends inside an event is truncated, as the standard says,
// with one exception: an event that ends the stream anyway, message_stop
// or error, whose data is complete JSON and only its blank line (or its
// last line ending) is missing, is taken. Anthropic's own SDKs flush such
// an event at the end of input, and their recorded fixtures end that way
// (testdata/sdk_python_tool_use.sse). Any other unfinished event is
// discarded: without message_stop the answer is not complete.
func (d *decoder) nextEvent() (*sse.Event, error) {
	ev, err := d.rd.Next()
	if err == io.ErrUnexpectedEOF {
		if p := d.rd.Partial(); p != nil && endsStream(p) {
			return p, nil
		}
	}
	return ev, err
}

// endsStream reports whether ev is a complete message_stop or error event.
func endsStream(ev *sse.Event) bool {
	data := bytes.TrimSpace(ev.Data)
	if !json.Valid(data) {
		return false
	}
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &t)
	typ := t.Type
	if typ == "" {
		typ = ev.Type
	}
	return typ == "message_stop" || typ == "error" || ev.Type == "error"
}
