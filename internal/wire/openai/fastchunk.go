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
	model, choices := c.Model, c.Choices[:cap(c.Choices)]
	if !jsonscan.Plain(model) {
		model = "" // StrOrNull matches only plain names
	}
	clear(choices)
	*c = chunk{Choices: choices[:0]}
	s := chunkScanner{Scanner: jsonscan.New(data), model: model}
	if err := s.chunk(c); err == nil {
		return nil
	}
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
// *store.
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
			return s.Decode(&c.Usage)
		case "error":
			return s.Decode(&c.Error)
		}
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

func (s *chunkScanner) delta(d *delta) error {
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "content":
			return s.optStr(&d.Content, &d.content)
		case "refusal":
			return s.optStr(&d.Refusal, &d.refusal)
		case "tool_calls":
			if s.Null() {
				d.ToolCalls = nil
				return nil
			}
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
		return s.Other(key, "content", "refusal", "tool_calls")
	})
}

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
