package anthropic

import (
	"encoding/json"

	"github.com/firstword/firstword/internal/jsonscan"
)

// decodeEvent decodes one event's data into e. The events that make up
// almost all of a stream (content_block_delta, content_block_stop, ping)
// are decoded by a purpose-built scanner that allocates only the text it
// returns; anything else, and any surprise, goes to encoding/json, so the
// result is always exactly what encoding/json would produce
// (FuzzDecodeEvent checks this).
func decodeEvent(data []byte, e *event) error {
	*e = event{Index: noIndex}
	s := eventScanner{jsonscan.New(data)}
	if s.event(e) == nil {
		return nil
	}
	*e = event{Index: noIndex}
	return json.Unmarshal(data, e)
}

// eventScanner reads an event's fields; anything it does not read
// (fields other than a delta's, escaped keys, unusual numbers), and
// invalid JSON, returns jsonscan.ErrUnhandled and sends the event to
// encoding/json, which reports the exact error.
type eventScanner struct{ jsonscan.Scanner }

// message decodes message_start's message: its model here, its usage
// with encoding/json.
func (s *eventScanner) message(dst **startMessage) error {
	if s.Null() {
		*dst = nil
		return nil
	}
	if *dst == nil {
		*dst = new(startMessage)
	}
	m := *dst
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "model":
			v, err := s.Str()
			m.Model = v
			return err
		case "usage":
			return s.Decode(&m.Usage)
		}
		return s.Other(key, "model", "usage")
	})
}

func (s *eventScanner) event(e *event) error {
	err := s.Object(func(key []byte) error {
		switch string(key) {
		case "type":
			return s.StrOrNull(&e.Type, symbols...)
		case "index":
			return s.Int(&e.Index)
		case "delta":
			return s.delta(&e.Delta)
		// The nested objects go to encoding/json one by one, rather
		// than the whole event: each level of its decoder takes about
		// 1 KiB of stack, and this runs under every frame of a stream.
		case "message":
			return s.message(&e.Message)
		case "content_block":
			return s.Decode(&e.ContentBlock)
		case "usage":
			return s.Decode(&e.Usage)
		case "error":
			return s.Decode(&e.Error)
		}
		// Fields this scanner does not decode, and keys encoding/json
		// would match to a field case-insensitively, take the slow path.
		return s.Other(key, "type", "index", "delta", "message", "content_block", "usage", "error")
	})
	if err != nil {
		return err
	}
	if !s.End() {
		return jsonscan.ErrUnhandled
	}
	return nil
}

func (s *eventScanner) delta(d *eventDelta) error {
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "type":
			return s.StrOrNull(&d.Type, symbols...)
		case "text":
			return s.StrOrNull(&d.Text)
		case "partial_json":
			return s.StrOrNull(&d.PartialJSON)
		case "thinking":
			return s.StrOrNull(&d.Thinking)
		case "signature":
			return s.StrOrNull(&d.Signature)
		}
		return s.Other(key, "type", "text", "partial_json", "thinking", "signature", "stop_reason")
	})
}

// symbols are the type names a stream repeats: StrOrNull decodes them to
// these constants without allocating.
var symbols = []string{
	"content_block_delta", "text_delta", "thinking_delta", "input_json_delta",
	"content_block_stop", "signature_delta", "citations_delta", "ping", "message_stop",
}
