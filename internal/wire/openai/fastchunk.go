package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// errSlowPath sends a chunk to encoding/json: the fast decoder met
// something it does not handle (escaped keys, unusual types, numbers that
// are not plain integers) or invalid JSON, whose exact error encoding/json
// reports.
var errSlowPath = errors.New("slow path")

// decodeChunk decodes one chunk event. The common shape is decoded by a
// purpose-built scanner that allocates only the strings it returns; any
// surprise falls back to encoding/json, so the result is always exactly
// what encoding/json would produce (FuzzDecodeChunk checks this).
//
// c is reused from the previous chunk: its choices' storage (zeroed) and
// its model, when the next chunk names the same one, save allocations.
func decodeChunk(data []byte, c *chunk) error {
	model, choices := c.Model, c.Choices[:cap(c.Choices)]
	clear(choices)
	*c = chunk{Choices: choices[:0]}
	s := scanner{b: data, model: model}
	if err := s.chunk(c); err == nil {
		return nil
	}
	*c = chunk{}
	return json.Unmarshal(data, c)
}

type scanner struct {
	b     []byte
	i     int
	model string // the previous chunk's model, reused when it repeats
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// null consumes a null literal if one is next.
func (s *scanner) null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.b[s.i:], nullLit) {
		s.i += 4
		return true
	}
	return false
}

var nullLit = []byte("null")

// object calls member for each key; member must consume the value.
func (s *scanner) object(member func(key []byte) error) error {
	if s.peek() != '{' {
		return errSlowPath
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return errSlowPath
		}
		key, err := s.rawKey()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return errSlowPath
		}
		s.i++
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errSlowPath
		}
	}
}

func (s *scanner) array(elem func() error) error {
	if s.peek() != '[' {
		return errSlowPath
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return errSlowPath
		}
	}
}

// rawKey returns a key without escapes; escaped keys take the slow path.
func (s *scanner) rawKey() ([]byte, error) {
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], nil
		case c == '\\' || c < 0x20:
			return nil, errSlowPath
		}
	}
	return nil, errSlowPath
}

// str decodes a string value, as encoding/json would.
func (s *scanner) str() (string, error) {
	if s.peek() != '"' {
		return "", errSlowPath
	}
	start := s.i + 1
	j := start
	for ; j < len(s.b); j++ {
		c := s.b[j]
		if c == '"' {
			s.i = j + 1
			return string(s.b[start:j]), nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	// Escapes or non-ASCII: decode byte by byte.
	out := make([]byte, 0, j-start+16)
	out = append(out, s.b[start:j]...)
	for j < len(s.b) {
		c := s.b[j]
		switch {
		case c == '"':
			s.i = j + 1
			return string(out), nil
		case c < 0x20:
			return "", errSlowPath
		case c == '\\':
			if j+1 >= len(s.b) {
				return "", errSlowPath
			}
			switch e := s.b[j+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
				j += 2
			case 'b':
				out, j = append(out, '\b'), j+2
			case 'f':
				out, j = append(out, '\f'), j+2
			case 'n':
				out, j = append(out, '\n'), j+2
			case 'r':
				out, j = append(out, '\r'), j+2
			case 't':
				out, j = append(out, '\t'), j+2
			case 'u':
				r := hex4(s.b[j+2:])
				if r < 0 {
					return "", errSlowPath
				}
				j += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if j+1 < len(s.b) && s.b[j] == '\\' && s.b[j+1] == 'u' {
						r2 = hex4(s.b[j+2:])
					}
					if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
						j += 6
						out = utf8.AppendRune(out, d)
						continue
					}
					r = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", errSlowPath
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			j++
		default:
			r, size := utf8.DecodeRune(s.b[j:])
			if r == utf8.RuneError && size == 1 {
				return "", errSlowPath
			}
			out = append(out, s.b[j:j+size]...)
			j += size
		}
	}
	return "", errSlowPath
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// same consumes the string v, if the next value is exactly "v" with
// nothing escaped, and reports whether it did.
func (s *scanner) same(v string) bool {
	s.ws()
	n := len(v)
	if v == "" || s.i+n+2 > len(s.b) || s.b[s.i] != '"' || s.b[s.i+1+n] != '"' || string(s.b[s.i+1:s.i+1+n]) != v {
		return false
	}
	for j := 0; j < n; j++ {
		if c := v[j]; c == '\\' || c == '"' || c < 0x20 || c >= utf8.RuneSelf {
			return false
		}
	}
	s.i += n + 2
	return true
}

// skipStr consumes a string without keeping it; escapes and non-ASCII
// take str's validating path.
func (s *scanner) skipStr() error {
	if s.peek() != '"' {
		return errSlowPath
	}
	for j := s.i + 1; j < len(s.b); j++ {
		c := s.b[j]
		if c == '"' {
			s.i = j + 1
			return nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	_, err := s.str()
	return err
}

// optStr decodes a string or null into *dst, storing the string in
// *store.
func (s *scanner) optStr(dst **string, store *string) error {
	if s.null() {
		*dst = nil
		return nil
	}
	v, err := s.str()
	if err != nil {
		return err
	}
	*store = v
	*dst = store
	return nil
}

// integer decodes a plain integer; anything else takes the slow path.
func (s *scanner) integer(dst *int) error {
	if s.null() {
		return nil
	}
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	d := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == d || s.i-d > 15 || (s.b[d] == '0' && s.i-d > 1) {
		return errSlowPath
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return errSlowPath
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	if err != nil {
		return errSlowPath
	}
	*dst = n
	return nil
}

// skip consumes any value, validating it.
func (s *scanner) skip() error {
	switch c := s.peek(); {
	case c == '{':
		return s.object(func([]byte) error { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == '"':
		return s.skipStr()
	case c == 't' && bytes.HasPrefix(s.b[s.i:], []byte("true")):
		s.i += 4
	case c == 'f' && bytes.HasPrefix(s.b[s.i:], []byte("false")):
		s.i += 5
	case c == 'n' && s.null():
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return errSlowPath
	}
	return nil
}

// number consumes a JSON number.
func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return errSlowPath
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return errSlowPath
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return errSlowPath
		}
	}
	return nil
}

// raw returns the bytes of the next value.
func (s *scanner) raw() ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skip(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
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

// foldMatch reports a key that encoding/json would match case-insensitively
// to one of names without matching it exactly: the slow path decides.
func foldMatch(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

func (s *scanner) chunk(c *chunk) error {
	sawChoices := false
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "model":
			if s.null() {
				return nil
			}
			if s.same(s.model) {
				c.Model = s.model
				return nil
			}
			v, err := s.str()
			c.Model = v
			return err
		case "choices":
			sawChoices = true
			if s.null() {
				c.Choices = nil
				return nil
			}
			// Mirror encoding/json: elements of a slice decoded twice
			// (a duplicate key) are reused, not zeroed; [] is non-nil.
			c.Choices = c.Choices[:0]
			err := s.array(func() error {
				c.Choices = grow(c.Choices)
				return s.choice(&c.Choices[len(c.Choices)-1])
			})
			if c.Choices == nil {
				c.Choices = []chunkChoice{}
			}
			return err
		case "usage", "error":
			raw, err := s.raw()
			if err != nil {
				return err
			}
			if string(key) == "usage" {
				return json.Unmarshal(raw, &c.Usage)
			}
			return json.Unmarshal(raw, &c.Error)
		}
		if foldMatch(key, "model", "choices", "usage", "error") {
			return errSlowPath
		}
		return s.skip()
	})
	if err != nil {
		return err
	}
	if s.ws(); s.i != len(s.b) {
		return errSlowPath
	}
	if !sawChoices {
		c.Choices = nil // as encoding/json leaves it
	}
	return nil
}

func (s *scanner) choice(ch *chunkChoice) error {
	if s.null() {
		return nil
	}
	return s.object(func(key []byte) error {
		switch string(key) {
		case "index":
			return s.integer(&ch.Index)
		case "finish_reason":
			return s.optStr(&ch.FinishReason, &ch.finish)
		case "delta":
			if s.null() {
				return nil
			}
			return s.delta(&ch.Delta)
		}
		if foldMatch(key, "index", "finish_reason", "delta") {
			return errSlowPath
		}
		return s.skip()
	})
}

func (s *scanner) delta(d *delta) error {
	return s.object(func(key []byte) error {
		switch string(key) {
		case "content":
			return s.optStr(&d.Content, &d.content)
		case "refusal":
			return s.optStr(&d.Refusal, &d.refusal)
		case "tool_calls":
			if s.null() {
				d.ToolCalls = nil
				return nil
			}
			d.ToolCalls = d.ToolCalls[:0]
			err := s.array(func() error {
				d.ToolCalls = grow(d.ToolCalls)
				return s.toolCall(&d.ToolCalls[len(d.ToolCalls)-1])
			})
			if d.ToolCalls == nil {
				d.ToolCalls = []toolCallDelta{}
			}
			return err
		}
		if foldMatch(key, "content", "refusal", "tool_calls") {
			return errSlowPath
		}
		return s.skip()
	})
}

func (s *scanner) toolCall(tc *toolCallDelta) error {
	if s.null() {
		return nil
	}
	return s.object(func(key []byte) error {
		switch string(key) {
		case "index":
			return s.integer(&tc.Index)
		case "id", "type":
			if s.null() {
				return nil
			}
			v, err := s.str()
			if string(key) == "id" {
				tc.ID = v
			} else {
				tc.Type = v
			}
			return err
		case "function":
			if s.null() {
				return nil
			}
			return s.object(func(key []byte) error {
				switch string(key) {
				case "name", "arguments":
					if s.null() {
						return nil
					}
					v, err := s.str()
					if string(key) == "name" {
						tc.Function.Name = v
					} else {
						tc.Function.Arguments = v
					}
					return err
				}
				if foldMatch(key, "name", "arguments") {
					return errSlowPath
				}
				return s.skip()
			})
		}
		if foldMatch(key, "index", "id", "type", "function") {
			return errSlowPath
		}
		return s.skip()
	})
}
