// Package jsonscan reads JSON in place, without reflection, for the
// hand-written decoders on a stream's hot path (wire/openai's chunks and
// requests, wire/anthropic's events).
//
// A Scanner never guesses: each method consumes a value and gives exactly
// what encoding/json would decode from it, or returns ErrUnhandled. That
// error means "not decided here": the input is invalid JSON, or valid in a
// way the scanner leaves alone (an escaped key, a number Int leaves to
// encoding/json, nesting deeper than Skip follows). A caller that meets it decodes the whole input again with
// encoding/json, which decides and words the error; so the scanner has
// nothing to report but that one error, and its callers are as exact as
// encoding/json (FuzzScanner checks the scanner against it).
package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrUnhandled is returned for input a Scanner does not decide: decode it
// with encoding/json.
var ErrUnhandled = errors.New("jsonscan: not handled, decode with encoding/json")

// maxDepth bounds the nesting Skip follows. encoding/json refuses more
// than 10,000 levels counted from the top; a decoder's own levels fit
// well between the two, so what Skip accepts encoding/json accepts too.
const maxDepth = 1000

// Scanner reads the JSON in one byte slice, value by value. The zero
// Scanner reads empty input.
type Scanner struct {
	b []byte
	i int // the next byte to read
}

// New returns a Scanner at the start of b. The strings it returns are
// copies; keys passed to Object's member are not (see Object).
func New(b []byte) Scanner { return Scanner{b: b} }

func (s *Scanner) ws() {
	// Machine-written JSON has no white space between tokens: one
	// comparison settles that common case.
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte, or 0 at the end.
func (s *Scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// End consumes trailing white space and reports whether that was all
// that was left, as encoding/json requires after the top-level value.
func (s *Scanner) End() bool {
	s.ws()
	return s.i == len(s.b)
}

// Null consumes a null literal if one is next, and reports whether it
// did.
func (s *Scanner) Null() bool {
	if s.peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// Object consumes an object, calling member for each key in order;
// member must consume the value (or return an error, which Object
// returns). key points into the input and is valid only during the call.
// A key with an escape declines: its bytes are not the key encoding/json
// matches. Null is an object without keys, as encoding/json leaves a
// struct alone for it.
func (s *Scanner) Object(member func(key []byte) error) error {
	if s.peek() != '{' {
		if s.Null() {
			return nil
		}
		return ErrUnhandled
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return ErrUnhandled
		}
		key, err := s.rawKey()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return ErrUnhandled
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
			return ErrUnhandled
		}
	}
}

// Array consumes an array, calling elem for each element; elem must
// consume it.
func (s *Scanner) Array(elem func() error) error {
	if s.peek() != '[' {
		return ErrUnhandled
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
			return ErrUnhandled
		}
	}
}

// rawKey returns the key at s.i (an opening quote) as it is written;
// escaped keys decline.
func (s *Scanner) rawKey() ([]byte, error) {
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], nil
		case c == '\\' || c < 0x20:
			return nil, ErrUnhandled
		}
	}
	return nil, ErrUnhandled
}

// Str decodes a string as encoding/json does: escapes decoded, a lone or
// broken surrogate and each byte of invalid UTF-8 replaced by U+FFFD.
// Anything but a string, null included, declines.
func (s *Scanner) Str() (string, error) {
	if s.peek() != '"' {
		return "", ErrUnhandled
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
			return "", ErrUnhandled
		case c == '\\':
			if j+1 >= len(s.b) {
				return "", ErrUnhandled
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
					return "", ErrUnhandled
				}
				j += 6
				if utf16.IsSurrogate(r) {
					// A pair is one rune; half of one is U+FFFD, and
					// what follows it is read on its own.
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
				return "", ErrUnhandled
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			j++
		default:
			r, size := utf8.DecodeRune(s.b[j:])
			if r == utf8.RuneError && size == 1 {
				// encoding/json writes U+FFFD for each invalid byte.
				out = utf8.AppendRune(out, utf8.RuneError)
				j++
				continue
			}
			out = append(out, s.b[j:j+size]...)
			j += size
		}
	}
	return "", ErrUnhandled
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

// StrOrNull decodes a string into *dst; null leaves *dst alone, as
// encoding/json does. A string that is one of known is stored as that
// name, without allocating: the strings a stream repeats (an event type,
// the model) cost nothing after the first. Every name in known must be
// Plain (the caller checks it once, not every call here): the bytes of
// another could match a string they do not spell.
func (s *Scanner) StrOrNull(dst *string, known ...string) error {
	if s.Null() {
		return nil
	}
	if len(known) > 0 {
		if v, ok := s.known(known); ok {
			*dst = v
			return nil
		}
	}
	v, err := s.Str()
	*dst = v
	return err
}

// known consumes the next value if it is one of names written as is
// and returns that name. Otherwise it consumes nothing and returns false.
func (s *Scanner) known(names []string) (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	start := s.i + 1
	end := bytes.IndexByte(s.b[start:], '"')
	if end < 0 {
		return "", false
	}
	raw := s.b[start : start+end]
	for _, n := range names {
		if string(raw) == n {
			s.i = start + end + 1
			return n, true
		}
	}
	return "", false
}

// Plain reports whether v is ASCII with no byte below 0x20, no quote and
// no backslash: JSON writes it as it is, so a string whose bytes are v's
// is v.
func Plain(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\\' || c == '"' || c < 0x20 || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// skipStr consumes a string without decoding it (and so without
// allocating), checking it as encoding/json does.
func (s *Scanner) skipStr() error {
	if s.peek() != '"' {
		return ErrUnhandled
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return nil
		case c < 0x20:
			return ErrUnhandled
		case c == '\\':
			if j+1 >= len(s.b) {
				return ErrUnhandled
			}
			switch s.b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if hex4(s.b[j+2:]) < 0 {
					return ErrUnhandled
				}
				j += 5
			default:
				return ErrUnhandled
			}
		}
	}
	return ErrUnhandled
}

// Int decodes a plain integer of up to 15 digits into *dst; null leaves
// *dst alone, as encoding/json does. Any other number declines: a
// fraction or an exponent, which encoding/json refuses for an int, and
// longer integers, which it alone knows whether an int holds.
func (s *Scanner) Int(dst *int) error {
	if s.Null() {
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
		return ErrUnhandled
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return ErrUnhandled
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	if err != nil {
		return ErrUnhandled
	}
	*dst = n
	return nil
}

// Float decodes a number into *dst as encoding/json decodes a float64;
// null leaves *dst alone. A number out of float64's range declines.
func (s *Scanner) Float(dst *float64) error {
	if s.Null() {
		return nil
	}
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return ErrUnhandled
	}
	start := s.i
	if err := s.number(); err != nil {
		return err
	}
	f, err := strconv.ParseFloat(string(s.b[start:s.i]), 64)
	if err != nil {
		return ErrUnhandled
	}
	*dst = f
	return nil
}

// Bool decodes true or false into *dst; null leaves *dst alone.
func (s *Scanner) Bool(dst *bool) error {
	switch c := s.peek(); {
	case c == 't' && bytes.HasPrefix(s.b[s.i:], trueLit):
		s.i += 4
		*dst = true
	case c == 'f' && bytes.HasPrefix(s.b[s.i:], falseLit):
		s.i += 5
		*dst = false
	case !s.Null():
		return ErrUnhandled
	}
	return nil
}

var trueLit, falseLit = []byte("true"), []byte("false")

// Skip consumes any value, checking it as encoding/json does (escaped
// keys included), without decoding or allocating. Values nested more than
// 1,000 levels deep decline.
func (s *Scanner) Skip() error { return s.skip(0) }

func (s *Scanner) skip(depth int) error {
	switch c := s.peek(); {
	case c == '{' || c == '[':
		if depth == maxDepth {
			return ErrUnhandled
		}
		end := c + 2 // '}' or ']'
		s.i++
		if s.peek() == end {
			s.i++
			return nil
		}
		for {
			if c == '{' {
				if err := s.skipStr(); err != nil {
					return err
				}
				if s.peek() != ':' {
					return ErrUnhandled
				}
				s.i++
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case end:
				s.i++
				return nil
			default:
				return ErrUnhandled
			}
		}
	case c == '"':
		return s.skipStr()
	case c == 't' && bytes.HasPrefix(s.b[s.i:], trueLit):
		s.i += 4
	case c == 'f' && bytes.HasPrefix(s.b[s.i:], falseLit):
		s.i += 5
	case c == 'n' && s.Null():
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return ErrUnhandled
	}
	return nil
}

// number consumes a number, s.i at its first byte.
func (s *Scanner) number() error {
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
		return ErrUnhandled
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return ErrUnhandled
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return ErrUnhandled
		}
	}
	return nil
}

// Decode decodes the next value into dst with encoding/json; a value it
// refuses declines. It is for the rare nested objects a fast decoder does
// not read itself: encoding/json on one value, rather than on the whole
// input, keeps its recursion (about 1 KiB of stack a level) shallow.
func (s *Scanner) Decode(dst any) error {
	s.ws()
	start := s.i
	if err := s.Skip(); err != nil {
		return err
	}
	if json.Unmarshal(s.b[start:s.i], dst) != nil {
		return ErrUnhandled
	}
	return nil
}

// Other consumes the value of a key the decoder does not read, its
// fields being names: a key encoding/json would match to one of them
// case-insensitively declines, and any other key's value is skipped.
func (s *Scanner) Other(key []byte, names ...string) error {
	if FoldMatch(key, names...) {
		return ErrUnhandled
	}
	return s.Skip()
}

// FoldMatch reports whether encoding/json would match key to one of
// names case-insensitively (its rule is bytes.EqualFold). A decoder that
// matches keys exactly sends such a key to encoding/json rather than skip
// it.
func FoldMatch(key []byte, names ...string) bool {
	for _, n := range names {
		// When both first bytes are ASCII they are the first runes, which
		// fold alike only if they are equal or the same letter: most keys
		// part there, without EqualFold's call.
		if len(key) > 0 && len(n) > 0 && key[0] < utf8.RuneSelf && n[0] < utf8.RuneSelf && lower(key[0]) != lower(n[0]) {
			continue
		}
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
