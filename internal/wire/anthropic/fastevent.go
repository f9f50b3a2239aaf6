package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// errSlowPath sends an event to encoding/json: the fast decoder met
// something it does not handle (fields other than a delta's, escaped
// keys, unusual numbers) or invalid JSON, whose exact error encoding/json
// reports.
var errSlowPath = errors.New("slow path")

// decodeEvent decodes one event's data into e. The events that make up
// almost all of a stream (content_block_delta, content_block_stop, ping)
// are decoded by a purpose-built scanner that allocates only the text it
// returns; anything else, and any surprise, goes to encoding/json, so the
// result is always exactly what encoding/json would produce
// (FuzzDecodeEvent checks this).
func decodeEvent(data []byte, e *event) error {
	*e = event{Index: noIndex}
	s := scanner{b: data}
	if s.event(e) == nil {
		return nil
	}
	*e = event{Index: noIndex}
	return json.Unmarshal(data, e)
}

type scanner struct {
	b []byte
	i int
}

// decodeInto decodes the next value into dst with encoding/json; a value
// it refuses takes the slow path, which reports the error.
func (s *scanner) decodeInto(dst any) error {
	s.ws()
	start := s.i
	if err := s.skip(); err != nil {
		return err
	}
	if json.Unmarshal(s.b[start:s.i], dst) != nil {
		return errSlowPath
	}
	return nil
}

// message decodes message_start's message: its model here, its usage
// with encoding/json.
func (s *scanner) message(dst **startMessage) error {
	if s.null() {
		*dst = nil
		return nil
	}
	if *dst == nil {
		*dst = new(startMessage)
	}
	m := *dst
	return s.object(func(key []byte) error {
		switch string(key) {
		case "model":
			v, err := s.str()
			m.Model = v
			return err
		case "usage":
			return s.decodeInto(&m.Usage)
		}
		if foldMatch(key, "model", "usage") {
			return errSlowPath
		}
		return s.skip()
	})
}

func (s *scanner) event(e *event) error {
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "type":
			return s.symbol(&e.Type)
		case "index":
			return s.integer(&e.Index)
		case "delta":
			if s.null() {
				return nil
			}
			return s.delta(&e.Delta)
		// The nested objects go to encoding/json one by one, rather
		// than the whole event: each level of its decoder takes about
		// 1 KiB of stack, and this runs under every frame of a stream.
		case "message":
			return s.message(&e.Message)
		case "content_block":
			return s.decodeInto(&e.ContentBlock)
		case "usage":
			return s.decodeInto(&e.Usage)
		case "error":
			return s.decodeInto(&e.Error)
		}
		// Fields this scanner does not decode, and keys encoding/json
		// would match to a field case-insensitively, take the slow path.
		if foldMatch(key, "type", "index", "delta", "message", "content_block", "usage", "error") {
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
	return nil
}

func (s *scanner) delta(d *eventDelta) error {
	return s.object(func(key []byte) error {
		switch string(key) {
		case "type":
			return s.symbol(&d.Type)
		case "text", "partial_json":
			if s.null() {
				return nil
			}
			v, err := s.str()
			if string(key) == "text" {
				d.Text = v
			} else {
				d.PartialJSON = v
			}
			return err
		}
		if foldMatch(key, "type", "text", "partial_json", "stop_reason") {
			return errSlowPath
		}
		return s.skip()
	})
}

// symbols are the type names a stream repeats: decoding them to these
// constants allocates nothing.
var symbols = []string{
	"content_block_delta", "text_delta", "input_json_delta", "content_block_stop",
	"thinking_delta", "signature_delta", "citations_delta", "ping", "message_stop",
}

// symbol decodes a string or null (which leaves dst alone, as
// encoding/json does).
func (s *scanner) symbol(dst *string) error {
	if s.null() {
		return nil
	}
	if s.peek() != '"' {
		return errSlowPath
	}
	start := s.i + 1
	if end := bytes.IndexByte(s.b[start:], '"'); end >= 0 {
		raw := s.b[start : start+end]
		for _, sym := range symbols {
			if string(raw) == sym {
				s.i = start + end + 1
				*dst = sym
				return nil
			}
		}
	}
	v, err := s.str()
	*dst = v
	return err
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
	if s.peek() == 'n' && bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

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

// rawKey returns a key without escapes; escaped keys take the slow path.
func (s *scanner) rawKey() ([]byte, error) {
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return nil, errSlowPath
		}
	}
	return nil, errSlowPath
}

// str decodes a string value as encoding/json would; invalid UTF-8 takes
// the slow path (encoding/json replaces it).
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
				out, j = append(out, e), j+2
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

// skipStr consumes a string without decoding it (thinking and signature
// deltas are skipped, and can be long).
func (s *scanner) skipStr() error {
	if s.peek() != '"' {
		return errSlowPath
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return nil
		case c < 0x20:
			return errSlowPath
		case c == '\\':
			if j+1 >= len(s.b) {
				return errSlowPath
			}
			switch s.b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if hex4(s.b[j+2:]) < 0 {
					return errSlowPath
				}
				j += 5
			default:
				return errSlowPath
			}
		}
	}
	return errSlowPath
}

// integer decodes a plain integer or null (which leaves dst alone);
// anything else takes the slow path.
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
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skip(); err != nil {
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

// foldMatch reports a key that encoding/json would match
// case-insensitively to one of names: the slow path decides.
func foldMatch(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}
