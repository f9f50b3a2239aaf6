// Package upstream holds what the wire formats share on their upstream
// side, where firstword is the client: in encoding a request, a message's
// text (MessageText), an image's URL (ImageURL), tool-call arguments as an
// object (ArgsObject), JSON mode (JSONMode) and JSON as the upstreams want
// it (Marshal); in decoding the answer, the chunk held back while the next
// event is already buffered (HoldBack), a reader's sticky end (Ending),
// the errors of a stream cut short (ReadError) and of an event that is not
// a JSON object (NotObject), finish reasons held until the end (Hold), a
// whole tool call as a delta (ToolCall) and the excerpt of what an
// upstream sent that an error quotes (Excerpt).
package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
)

// Stepper is a stream decoder driven by HoldBack, one event at a time.
type Stepper interface {
	// Step reads the next event and applies it. It sets *c to the chunk
	// the event produced and reports whether it produced one (emit), and
	// whether the stream is done (the event was its last). An error,
	// reading or decoding, ends the stream; a read error leaves *c as it
	// was.
	Step(c *chat.Chunk) (emit, done bool, err error)
	// Buffered reports whether the next event has already arrived, so
	// that Step would not wait on the upstream for it.
	Buffered() bool
}

// HoldBack turns a Stepper's events into a pull reader's chunks, holding
// each chunk back for as long as the next event is already buffered.
//
// Holding back is what lets a chunk say More (chat.Chunk): whether the
// next one is already here can only be known once the next event has
// been decoded, and an event may produce no chunk at all (a ping, a
// block's start), so the reader looks ahead only through what arrived in
// the same read. It never waits: with a chunk in hand and nothing
// buffered, the chunk goes out at once, so no token is delayed by the
// look-ahead.
//
// The zero HoldBack is ready to use; Next must be given the same Stepper
// every time.
type HoldBack struct {
	pending chat.Chunk // the chunk held, or being decoded into
	held    bool       // pending holds a chunk not yet handed out
	out     chat.Chunk // the chunk handed out, valid until the next call
	err     error      // how the stream ended (io.EOF when it finished), once pending is out
}

// Next returns the next chunk, valid until the following call; io.EOF
// after the last; or the error that ended the stream, again on every
// later call.
func (h *HoldBack) Next(s Stepper) (*chat.Chunk, error) {
	for {
		if h.held && (h.err != nil || !s.Buffered()) {
			// Never wait on the upstream with a chunk in hand.
			h.out, h.held = h.pending, false
			// Ended cleanly, the stream's end is already here too.
			h.out.More = h.err == io.EOF
			return &h.out, nil
		}
		if h.err != nil {
			return nil, h.err
		}
		// Step decodes into pending: the held chunk waits in out
		// meanwhile, and goes back to pending if the event produced
		// nothing (or failed: it is still handed out before the error).
		wasHeld := h.held
		if wasHeld {
			h.out = h.pending
		}
		emit, done, err := s.Step(&h.pending)
		if err != nil {
			h.err = err
		} else if done {
			h.err = io.EOF
		}
		switch {
		case emit && err == nil:
			h.held = true
			if wasHeld {
				// The next chunk followed without waiting.
				h.out.More = true
				return &h.out, nil
			}
		case wasHeld:
			h.pending = h.out
		}
	}
}

// ReadError is the error that ends a stream whose next event could not be
// read, err the reader's: a body that ended, cleanly or inside an event,
// before the stream's end is chat.ErrTruncated, format and args saying
// what is missing ("no [DONE] after %d chunks"); any other failure (an
// oversized event, a broken connection) is err. Either is a protocol
// error.
func ReadError(err error, format string, args ...any) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = fmt.Errorf("%w: "+format, append([]any{chat.ErrTruncated}, args...)...)
	}
	return chat.ProtocolError(err)
}

// NotObject returns the protocol error for an event's data, not empty,
// that is not valid UTF-8 or not a JSON object. The readers check both
// themselves, on every event's path; this says which failed.
func NotObject(data []byte) error {
	if !utf8.Valid(data) {
		return chat.ProtocolError(errors.New("upstream sent invalid UTF-8"))
	}
	return chat.ProtocolError(fmt.Errorf("upstream sent an event that is not a JSON object: %s", Excerpt(string(data), 80)))
}

// ToolCall is a whole tool call, as the formats that stream calls whole
// send one (Gemini, Ollama: the arguments an object, the id not always
// there), as a complete delta: index is its Index, ordinal its number
// among the stream's calls, which makes the "call_<ordinal>" given to a
// call without an id unique within the stream. The arguments are
// compacted, so that they read the same whatever spacing the upstream
// used; none (or null) is {}.
func ToolCall(index, ordinal int, id, name string, args json.RawMessage) chat.ToolCallDelta {
	if id == "" {
		id = "call_" + strconv.Itoa(ordinal)
	}
	a := "{}"
	if len(args) > 0 && string(args) != "null" {
		var b bytes.Buffer
		if json.Compact(&b, args) == nil {
			a = b.String()
		}
	}
	return chat.ToolCallDelta{Index: index, ID: id, Name: name, Arguments: a}
}

// Hold keeps a choice's finish reason in held, the finish reasons a
// reader yields only once its stream is complete, and returns held: one
// chunk per choice, with the last reason the upstream sent for it (a
// client must see it once).
func Hold(held []chat.Chunk, choice int, fr chat.FinishReason) []chat.Chunk {
	for i := range held {
		if held[i].Choice == choice {
			held[i].FinishReason = fr
			return held
		}
	}
	return append(held, chat.Chunk{Choice: choice, FinishReason: fr})
}

// Ending is a pull reader's sticky end: once its stream has ended, with
// io.EOF or the error that ended it, every later Next returns that again
// without reading the body, which the caller may already have handed
// back to the connection pool. The zero Ending is a stream going on.
type Ending struct{ err error }

// Ended returns how the stream ended, nil while it goes on.
func (e *Ending) Ended() error { return e.err }

// Keep returns c and err, what reading on returned, keeping err as the
// stream's end when it is one.
func (e *Ending) Keep(c *chat.Chunk, err error) (*chat.Chunk, error) {
	if err != nil {
		e.err = err
	}
	return c, err
}

// Excerpt returns at most the first n bytes of s, cut at a rune boundary
// and marked with an ellipsis when cut: enough of an upstream's body or
// event to say what it was in an error, which reaches clients and logs,
// without copying a whole page into either.
func Excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
