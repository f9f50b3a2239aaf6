package budget

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// MarshalJSON encodes t exactly as encoding/json would, without its
// reflection: Timings go into every request's log line.
func (t Timings) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 64+96*len(t.Stages))
	b = append(b, `{"ttfw_ms":`...)
	b = appendFloat(b, t.TTFWMs)
	b = append(b, `,"ttc_ms":`...)
	b = appendFloat(b, t.TTCMs)
	b = append(b, `,"stages":`...)
	if t.Stages == nil {
		return append(b, "null}"...), nil
	}
	b = append(b, '[')
	for i, s := range t.Stages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, s.Name)
		b = append(b, `,"start_ms":`...)
		b = appendFloat(b, s.StartMs)
		b = append(b, `,"end_ms":`...)
		b = appendFloat(b, s.EndMs)
		if s.Note != "" {
			b = append(b, `,"note":`...)
			b = appendString(b, s.Note)
		}
		if s.Group {
			b = append(b, `,"group":true`...)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// appendFloat formats f as encoding/json does (finite values only; the
// timings are).
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does, HTML characters and the
// line and paragraph separators escaped, invalid UTF-8 replaced.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
