package openai

import (
	"encoding/json"

	"github.com/firstword/firstword/internal/jsonscan"
)

// decodeChunk decodes one chunk event. The common shape is decoded by a
// purpose-built scanner that allocates only the strings it returns; any
// surprise falls back to encoding/json, so the result is always exactly
// what encoding/json would produce (FuzzDecodeChunk checks this).
//
// c is reused from the previous chunk: its choices' storage (zeroed) and
// its model, when the next chunk names the same one, save allocations.
func decodeChunk(data []byte, c *chunk) error {
	// Every chunk of a stream names the same model: offered to StrOrNull
	// as a known name, it is matched in place instead of allocated again.
	model, choices := c.Model, c.Choices[:cap(c.Choices)]
	if !jsonscan.Plain(model) {
		model = "" // StrOrNull matches only plain names
	}
	// The choices' memory is kept across chunks, but not their content:
	// a field this chunk does not name must read as absent, not as the
	// previous chunk's value (encoding/json would see a fresh chunk).
	clear(choices)
	*c = chunk{Choices: choices[:0]}
	s := chunkScanner{Scanner: jsonscan.New(data), model: model}
	if err := s.chunk(c); err == nil {
		return nil
	}
	// The scanner may have filled part of c before it declined: start
	// again from nothing, so the result is encoding/json's alone.
	*c = chunk{}
	return json.Unmarshal(data, c)
}

// chunkScanner reads a chunk's fields; anything it does not read, or
// reads and finds unusual, returns jsonscan.ErrUnhandled and sends the
// chunk to encoding/json.
type chunkScanner struct {
	jsonscan.Scanner
	model string // the previous chunk's model, reused when it repeats
}

// optStr decodes a string or null into *dst, storing the string in
// *store. encoding/json would allocate a new string pointer for every
// content delta; the pointer into the chunk's own field costs nothing,
// and the chunk is reused, so nothing handed out may keep it (next copies
// the text into the chat.Chunk it returns).
func (s *chunkScanner) optStr(dst **string, store *string) error {
	if s.Null() {
		*dst = nil
		return nil
	}
	v, err := s.Str()
	if err != nil {
		return err
	}
	*store = v
	*dst = store
	return nil
}

// grow extends a slice by one element, reusing a previous element's
// memory (and content) when the capacity allows, as encoding/json does.
func grow[T any](s []T) []T {
	if len(s) < cap(s) {
		return s[:len(s)+1]
	}
	var zero T
	return append(s, zero)
}

// chunk reads one chunk event. Keys arrive in any order and may repeat;
// each case decodes as encoding/json would decode that key at that point,
// so a repeated key overwrites as it does there.
func (s *chunkScanner) chunk(c *chunk) error {
	sawChoices := false
	err := s.Object(func(key []byte) error {
		switch string(key) {
		case "model":
			return s.StrOrNull(&c.Model, s.model)
		case "choices":
			sawChoices = true
			if s.Null() {
				c.Choices = nil
				return nil
			}
			// Mirror encoding/json: elements of a slice decoded twice
			// (a duplicate key) are reused, not zeroed; [] is non-nil.
			c.Choices = c.Choices[:0]
			err := s.Array(func() error {
				c.Choices = grow(c.Choices)
				return s.choice(&c.Choices[len(c.Choices)-1])
			})
			if c.Choices == nil {
				c.Choices = []chunkChoice{}
			}
			return err
		case "usage":
			// DeepSeek and others send "usage": null on every chunk:
			// read here, as encoding/json reads it, without its cost.
			if s.Null() {
				c.Usage = nil
				return nil
			}
			// Once a stream (or once a chunk, from some servers), and
			// nested: not worth a hand-written decoder.
			return s.Decode(&c.Usage)
		case "error":
			return s.Decode(&c.Error)
		}
		// id, object, created, system_fingerprint...: not read.
		// Other declines a key that only differs in case from one read
		// here, which encoding/json would take as that field.
		return s.Other(key, "model", "choices", "usage", "error")
	})
	if err != nil {
		return err
	}
	if !s.End() {
		return jsonscan.ErrUnhandled
	}
	if !sawChoices {
		c.Choices = nil // as encoding/json leaves it
	}
	return nil
}

// choice reads one element of choices. finish_reason is kept in the
// choice's own field (see optStr); a finish reason is rare, but the choice
// is reused and its pointer must not outlive the chunk.
func (s *chunkScanner) choice(ch *chunkChoice) error {
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "index":
			return s.Int(&ch.Index)
		case "finish_reason":
			return s.optStr(&ch.FinishReason, &ch.finish)
		case "delta":
			return s.delta(&ch.Delta)
		}
		return s.Other(key, "index", "finish_reason", "delta")
	})
}

// delta reads a choice's delta: the text, thinking, refusal and tool-call
// pieces the stream is made of. role is not read: it says "assistant" on the
// first chunk and nothing after, and firstword's chunks have no role.
func (s *chunkScanner) delta(d *delta) error {
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "content":
			return s.optStr(&d.Content, &d.content)
		case "refusal":
			return s.optStr(&d.Refusal, &d.refusal)
		case "reasoning_content":
			return s.optStr(&d.ReasoningContent, &d.reasoningContent)
		case "reasoning":
			return s.optStr(&d.Reasoning, &d.reasoning)
		case "tool_calls":
			if s.Null() {
				d.ToolCalls = nil
				return nil
			}
			// As for choices: elements reused from a repeated key, and
			// [] non-nil, exactly as encoding/json leaves them.
			d.ToolCalls = d.ToolCalls[:0]
			err := s.Array(func() error {
				d.ToolCalls = grow(d.ToolCalls)
				return s.toolCall(&d.ToolCalls[len(d.ToolCalls)-1])
			})
			if d.ToolCalls == nil {
				d.ToolCalls = []toolCallDelta{}
			}
			return err
		}
		return s.Other(key, "content", "refusal", "reasoning_content", "reasoning", "tool_calls")
	})
}

// toolCall reads one tool-call delta. A call's first delta carries its
// id, type and name; the following ones only index and a piece of the
// arguments, which the client joins by index.
func (s *chunkScanner) toolCall(tc *toolCallDelta) error {
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "index":
			return s.Int(&tc.Index)
		case "id":
			return s.StrOrNull(&tc.ID)
		case "type":
			return s.StrOrNull(&tc.Type)
		case "function":
			return s.Object(func(key []byte) error {
				switch string(key) {
				case "name":
					return s.StrOrNull(&tc.Function.Name)
				case "arguments":
					return s.StrOrNull(&tc.Function.Arguments)
				}
				return s.Other(key, "name", "arguments")
			})
		}
		return s.Other(key, "index", "id", "type", "function")
	})
}
