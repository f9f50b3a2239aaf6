package sse

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// splits feeds in whole, one byte at a time and in halves.
func splits(in string) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":   func() io.Reader { return strings.NewReader(in) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(in)) },
		"half":    func() io.Reader { return iotest.HalfReader(strings.NewReader(in)) },
	}
}

// TestReaderPartial: a stream that ends inside an event still ends in
// io.ErrUnexpectedEOF and dispatches nothing, as the standard says, and
// Partial reports that event, its unterminated last line included, for
// the callers that can tell it is whole (an end marker at the end of a
// body that lacks its blank line).
func TestReaderPartial(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		events  []ev
		partial *ev // nil: no data in the unfinished event
	}{
		{"end marker, one newline", "data: a\n\ndata: [DONE]\n", []ev{{"", "a", "", -1}}, &ev{"", "[DONE]", "", -1}},
		{"end marker, no newline", "data: a\n\ndata: [DONE]", []ev{{"", "a", "", -1}}, &ev{"", "[DONE]", "", -1}},
		{"end marker, CR", "data: a\r\rdata: [DONE]\r", []ev{{"", "a", "", -1}}, &ev{"", "[DONE]", "", -1}},
		{"typed event, no newline", "event: message_stop\ndata: {\"type\":\"message_stop\"}", nil, &ev{"message_stop", `{"type":"message_stop"}`, "", -1}},
		{"typed event, CRLF", "event: message_stop\r\ndata: {}\r\n", nil, &ev{"message_stop", "{}", "", -1}},
		{"multi-line data", "data: a\ndata: b", nil, &ev{"", "a\nb", "", -1}},
		{"cut inside the data", "data: {\"trunc", nil, &ev{"", "{\"trunc", "", -1}},
		{"event line only", "event: x\n", nil, nil},
		{"unterminated comment", "data: a\n\n: ping", []ev{{"", "a", "", -1}}, nil},
		{"id and retry kept", "id: 7\nretry: 10\ndata: a", nil, &ev{"", "a", "7", 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for split, mk := range splits(tt.in) {
				got, partial, err := readChecked(t, mk(), 0)
				if err != io.ErrUnexpectedEOF {
					t.Fatalf("%s: error = %v, want io.ErrUnexpectedEOF", split, err)
				}
				if diff := cmp.Diff(tt.events, got); diff != "" {
					t.Errorf("%s: events (-want +got):\n%s", split, diff)
				}
				if diff := cmp.Diff(tt.partial, partial); diff != "" {
					t.Errorf("%s: Partial() (-want +got):\n%s", split, diff)
				}
			}
		})
	}
	t.Run("none after a clean end", func(t *testing.T) {
		rd := NewReader(strings.NewReader("data: a\n\n"), 0)
		for {
			if _, err := rd.Next(); err != nil {
				if err != io.EOF || rd.Partial() != nil {
					t.Fatalf("Next() = %v, Partial() = %+v; want io.EOF and nil", err, rd.Partial())
				}
				return
			}
		}
	})
}

// TestReaderUnknown: the lines the standard ignores are returned, whole,
// to a caller that asks for them (llama.cpp's "error:" field, a JSON
// object written into the stream raw), and ignored otherwise.
func TestReaderUnknown(t *testing.T) {
	in := "data: a\n\n" +
		`error: {"code":400,"message":"the request exceeds the available context size, try increasing it"}` + "\r\n\r\n" +
		"{\r\n  \"error\": {\r\n    \"code\": 499\r\n  }\r\n}\r\n" +
		"data: b\n\n"
	want := []string{"data a", `unknown error: {"code":400,"message":"the request exceeds the available context size, try increasing it"}`,
		"unknown {", `unknown   "error": {`, `unknown     "code": 499`, "unknown   }", "unknown }", "data b"}
	for split, mk := range splits(in) {
		for _, on := range []bool{true, false} {
			rd := NewReader(mk(), 0)
			rd.ReturnUnknown(on)
			var got []string
			for {
				e, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", split, err)
				}
				if e.Unknown != nil {
					got = append(got, "unknown "+string(e.Unknown))
				} else {
					got = append(got, "data "+string(e.Data))
				}
			}
			w := want
			if !on {
				w = []string{"data a", "data b"}
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("%s, ReturnUnknown(%v): (-want +got):\n%s", split, on, diff)
			}
		}
	}
}

// TestEventBuffered: only a whole event with data counts. A keep-alive
// comment after an event (OpenRouter's ": OPENROUTER PROCESSING\r\n\r\n"
// included) used to count, because its blank line matched, so a reader
// told its caller that more was coming and the chunk in hand waited for
// the upstream's next event.
func TestEventBuffered(t *testing.T) {
	tests := []struct {
		name, in string
		want     bool // after the first event
	}{
		{"CRLF comment", "data: a\r\n\r\n: OPENROUTER PROCESSING\r\n\r\n", false},
		{"LF comment", "data: a\n\n: ping\n\n", false},
		{"CR comment", "data: a\r\r: ping\r\r", false},
		{"event without data", "data: a\n\nevent: ping\n\n", false},
		{"incomplete event", "data: a\n\ndata: b\n", false},
		{"incomplete CR event", "data: a\n\ndata: b\r", false},
		{"LF event", "data: a\n\ndata: b\n\n", true},
		{"CRLF event", "data: a\r\n\r\ndata: b\r\n\r\n", true},
		{"CR event", "data: a\r\rdata: b\r\r", true},
		{"mixed LF then CRLF", "data: a\n\ndata: b\n\r\n", true},
		{"mixed CRLF then LF", "data: a\n\ndata: b\r\n\n", true},
		{"mixed LF then CR", "data: a\n\ndata: b\n\r", true},
		{"comment then event", "data: a\n\n: c\r\n\r\ndata: b\r\n\r\n", true},
		{"comment inside an event", "data: a\n\ndata: b\n: c\n\n", true},
		{"data without colon", "data: a\n\ndata\n\n", true},
		{"not data", "data: a\n\ndatum: b\n\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := NewReader(strings.NewReader(tt.in), 0)
			if _, err := rd.Next(); err != nil {
				t.Fatal(err)
			}
			if got := rd.EventBuffered(); got != tt.want {
				t.Errorf("EventBuffered() = %v, want %v", got, tt.want)
			}
			// Whatever the splits, the answer is exact.
			for split, mk := range splits(tt.in) {
				if _, _, err := readChecked(t, mk(), 0); err != nil && err != io.ErrUnexpectedEOF {
					t.Fatalf("%s: %v", split, err)
				}
			}
		})
	}
}

// TestEventBufferedSplitCRLF: a CRLF whose LF comes in the next read is
// one line ending, not a blank line after the CR.
func TestEventBufferedSplitCRLF(t *testing.T) {
	for _, parts := range [][]string{
		{"data: a\r\n\r\ndata: b\r", "\n: ping\r\n\r\n"},
		{"data: a\r", "\n\r\n", "data: b\r", "\n\r", "\n"},
		{"data: a\r\n\r", "\ndata: b\r\n", "\r\n"},
	} {
		var rs []io.Reader
		for _, p := range parts {
			rs = append(rs, strings.NewReader(p))
		}
		got, _, err := readChecked(t, io.MultiReader(rs...), 0)
		if err != nil {
			t.Fatalf("%q: %v", parts, err)
		}
		if len(got) == 0 || got[0].Data != "a" {
			t.Errorf("%q: events %+v", parts, got)
		}
	}
}
