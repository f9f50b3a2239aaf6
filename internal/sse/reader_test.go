package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// ev is a comparable event for tests.
type ev struct {
	Type, Data, ID string
	Retry          int
}

func readAll(t testing.TB, r io.Reader, max int) ([]ev, error) {
	t.Helper()
	rd := NewReader(r, max)
	var out []ev
	for {
		e, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		out = append(out, ev{e.Type, string(e.Data), e.ID, e.Retry})
	}
}

// reference is a direct transcription of the WHATWG algorithm over a whole
// input, used to check the incremental reader. It also returns the event
// the input ends inside (what Partial reports), if it has data: the lines
// since the last blank line, an unterminated last line included.
func reference(in string) (events []ev, partial *ev) {
	in = strings.TrimPrefix(in, "\uFEFF")
	var lines []string
	for len(in) > 0 {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			lines = append(lines, in) // unterminated: never dispatched
			break
		}
		lines = append(lines, in[:i], "\n") // "\n" marks the line's end
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	return collectRef(lines)
}

func collectRef(lines []string) (out []ev, partial *ev) {
	var data, typ, id string
	hasData := false
	retry := -1
	for k, l := range lines {
		if l == "\n" {
			continue
		}
		terminated := k+1 < len(lines)
		if l == "" && terminated {
			if hasData {
				out = append(out, ev{typ, data, id, retry})
			}
			data, typ, hasData = "", "", false
			continue
		}
		if l == "" || l[0] == ':' {
			continue
		}
		name, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData = true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		case "retry":
			if n, ok := digits([]byte(value)); ok {
				retry = n
			}
		}
	}
	if hasData {
		partial = &ev{typ, data, id, retry}
	}
	return out, partial
}

func TestReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"single", "data: hello\n\n", []ev{{"", "hello", "", -1}}},
		{"no space after colon", "data:hello\n\n", []ev{{"", "hello", "", -1}}},
		{"only one space stripped", "data:  two\n\n", []ev{{"", " two", "", -1}}},
		{"multi-line data", "data: a\ndata: b\ndata\n\n", []ev{{"", "a\nb\n", "", -1}}},
		{"crlf", "event: x\r\ndata: y\r\n\r\n", []ev{{"x", "y", "", -1}}},
		{"cr only", "data: a\rdata: b\r\r", []ev{{"", "a\nb", "", -1}}},
		{"mixed endings", "data: 1\r\n\ndata: 2\r\rdata: 3\n\r\n", []ev{{"", "1", "", -1}, {"", "2", "", -1}, {"", "3", "", -1}}},
		{"bom", "\uFEFFdata: x\n\n", []ev{{"", "x", "", -1}}},
		{"bom only at start", "data: x\n\n\uFEFFdata: y\n\n", []ev{{"", "x", "", -1}}},
		{"comments", ": ping\n\n:\ndata: x\n: mid\n\n", []ev{{"", "x", "", -1}}},
		{"event without data is dropped", "event: ping\n\ndata: x\n\n", []ev{{"", "x", "", -1}}},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\n", []ev{{"", "a", "7", -1}, {"", "b", "7", -1}}},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", []ev{{"", "a", "1", -1}, {"", "b", "1", -1}}},
		{"retry", "retry: 1500\ndata: a\n\nretry: x\ndata: b\n\n", []ev{{"", "a", "", 1500}, {"", "b", "", 1500}}},
		{"unknown field", "foo: bar\ndata: a\n\n", []ev{{"", "a", "", -1}}},
		{"empty data dispatches", "data\n\n", []ev{{"", "", "", -1}}},
		{"field without colon", "data\ndata\n\n", []ev{{"", "\n", "", -1}}},
		{"colon in value", "data: {\"a\":\"b\"}\n\n", []ev{{"", `{"a":"b"}`, "", -1}}},
		{"utf8", "data: héllo 日本\n\n", []ev{{"", "héllo 日本", "", -1}}},
		{"every field", "retry: 1000\n\nid: 3\nevent: delta\ndata: line1\ndata: line2\ndata: line3\n\n: ping\n\ndata: {\"x\":1}\n\n",
			[]ev{{"delta", "line1\nline2\nline3", "3", 1000}, {"", `{"x":1}`, "3", 1000}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, split := range []string{"whole", "onebyte", "half"} {
				var src io.Reader = strings.NewReader(tt.in)
				switch split {
				case "onebyte":
					src = iotest.OneByteReader(src)
				case "half":
					src = iotest.HalfReader(src)
				}
				got, err := readAll(t, src, 0)
				if err != nil {
					t.Fatalf("%s: Next() error = %v", split, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: events mismatch (-want +got):\n%s", split, diff)
				}
			}
		})
	}
}

func TestReaderUnexpectedEOF(t *testing.T) {
	for _, in := range []string{"data: {\"trunc", "data: a\n", "data: a\n\ndata: b"} {
		_, err := readAll(t, strings.NewReader(in), 0)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("readAll(%q) error = %v, want io.ErrUnexpectedEOF", in, err)
		}
	}
}

func TestReaderTooLong(t *testing.T) {
	long := "data: " + strings.Repeat("x", 10<<20) + "\n\n"
	_, err := readAll(t, strings.NewReader(long), 1<<20)
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("10 MB line: error = %v, want ErrTooLong", err)
	}
	// Many lines each under the limit, whose sum is over it.
	many := strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", 2000) + "\n"
	_, err = readAll(t, strings.NewReader(many), 1<<20)
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("2 MB of data lines: error = %v, want ErrTooLong", err)
	}
	// Just under the limit is fine.
	ok := "data: " + strings.Repeat("z", 1<<19) + "\n\n"
	got, err := readAll(t, strings.NewReader(ok), 1<<20)
	if err != nil || len(got) != 1 || len(got[0].Data) != 1<<19 {
		t.Fatalf("512 KiB line: got %d events, err %v", len(got), err)
	}
}

func TestReaderComments(t *testing.T) {
	rd := NewReader(strings.NewReader(": ping\n\ndata: x\n\n"), 0)
	rd.ReturnComments(true)
	e, err := rd.Next()
	if err != nil || string(e.Comment) != " ping" {
		t.Fatalf("Next() = %+v, %v; want comment \" ping\"", e, err)
	}
	e, err = rd.Next()
	if err != nil || e.Comment != nil || string(e.Data) != "x" {
		t.Fatalf("Next() = %+v, %v; want data x", e, err)
	}
}

// TestFixtures reads the real provider captures (testdata/README.md) at
// random split points and checks the incremental reader against the
// reference on the whole input, and EventBuffered on the way.
func TestFixtures(t *testing.T) {
	files := []string{"openai_chat_stream_usage.sse", "openai_chat_stream_toolcall.sse", "anthropic_messages_stream.sse", "anthropic_stream_error.sse", "gemini_stream.sse", "framing_openrouter_crlf.sse"}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile("testdata/" + f)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := reference(string(b))
			if len(want) == 0 {
				t.Fatal("reference found no events")
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(b))))
			for range 50 {
				got, _, err := readChecked(t, &randomReader{b: b, rng: rng}, 0)
				if err != nil {
					t.Fatalf("Next() error = %v", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("events mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// randomReader returns its bytes in random-sized reads.
type randomReader struct {
	b   []byte
	rng *rand.Rand
}

func (r *randomReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := 1 + r.rng.IntN(min(len(r.b), len(p), 64))
	n = copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// countingReader counts the reads that reach its source.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// readChecked reads src to its end and checks, before every call to Next,
// that EventBuffered is exact: true if and only if Next then returns an
// event without reading from src. It returns the events and, when the
// input ended inside an event, Partial's.
func readChecked(t testing.TB, src io.Reader, max int) ([]ev, *ev, error) {
	t.Helper()
	cr := &countingReader{r: src}
	rd := NewReader(cr, max)
	var out []ev
	for {
		buffered, reads := rd.EventBuffered(), cr.reads
		e, err := rd.Next()
		if got := err == nil && cr.reads == reads; got != buffered {
			t.Fatalf("after %d events: EventBuffered() = %v, but Next read %d times and returned %v", len(out), buffered, cr.reads-reads, err)
		}
		if err != nil {
			var p *ev
			if pe := rd.Partial(); pe != nil {
				p = &ev{pe.Type, string(pe.Data), pe.ID, pe.Retry}
			}
			if err == io.EOF {
				err = nil
			}
			return out, p, err
		}
		out = append(out, ev{e.Type, string(e.Data), e.ID, e.Retry})
	}
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "data:b\r\n\r\n", "\uFEFFevent: x\rdata: y\r\r", ": c\ndata\nid: 1\nretry: 10\n\n", "data: a\ndata: b\n\n",
		": OPENROUTER PROCESSING\r\n\r\ndata: x\n\n", "data: [DONE]\n", "event: message_stop\ndata: {}", "data: 1\n\r\n: c\r\rdata: 2\r\n\n"} {
		f.Add([]byte(s), uint64(1))
	}
	if b, err := os.ReadFile("testdata/anthropic_messages_stream.sse"); err == nil {
		f.Add(b, uint64(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		want, wantPartial := reference(string(in))
		rd := &randomReader{b: in, rng: rand.New(rand.NewPCG(seed, 0))}
		got, partial, err := readChecked(t, rd, 1<<16)
		if errors.Is(err, ErrTooLong) {
			return
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("unexpected error %v", err)
		}
		if len(want) == 0 {
			want = nil
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("input %q: events mismatch (-want +got):\n%s", in, diff)
		}
		if diff := cmp.Diff(wantPartial, partial); diff != "" {
			t.Fatalf("input %q: partial event mismatch (-want +got):\n%s", in, diff)
		}
		if partial != nil && err == nil {
			t.Fatalf("input %q: a partial event without io.ErrUnexpectedEOF", in)
		}
	})
}

func BenchmarkReader(b *testing.B) {
	data, err := os.ReadFile("testdata/openai_chat_stream_usage.sse")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		rd := NewReader(bytes.NewReader(data), 0)
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
	}
}

// limitedReads counts the reads made of it and gives at most chunk
// bytes each.
type limitedReads struct {
	r     io.Reader
	chunk int
	reads int
}

func (c *limitedReads) Read(p []byte) (int, error) {
	c.reads++
	if len(p) > c.chunk {
		p = p[:c.chunk]
	}
	return c.r.Read(p)
}

// A busy stream's reader grows its buffer to readAhead, so that what the
// source has ready is taken in one read (and one EventBuffered run); one
// whose reads never fill the buffer keeps the first, small one.
func TestReaderReadAhead(t *testing.T) {
	event := "data: " + strings.Repeat("x", 94) + "\n\n" // 102 bytes
	body := strings.Repeat(event, 400)                   // ~40 KB
	for _, tc := range []struct {
		name      string
		chunk     int // bytes the source has ready at each read
		wantBuf   int
		wantReads int // at most
	}{
		{"all ready at once", len(body), readAhead, len(body)/readAhead + 4},
		{"a few events at a time", 3 * len(event), 1024, len(body)/(3*len(event)) + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &limitedReads{r: strings.NewReader(body), chunk: tc.chunk}
			r := NewReader(src, 0)
			n, unbuffered := 0, 0
			for {
				_, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
				if !r.EventBuffered() {
					unbuffered++
				}
			}
			if n != 400 {
				t.Fatalf("read %d events, want 400", n)
			}
			if len(r.buf) != tc.wantBuf {
				t.Errorf("buffer = %d bytes, want %d", len(r.buf), tc.wantBuf)
			}
			if src.reads > tc.wantReads {
				t.Errorf("%d reads of the source, want at most %d", src.reads, tc.wantReads)
			}
			// Each read ends at most one run of buffered events.
			if unbuffered > src.reads {
				t.Errorf("EventBuffered false after %d events, more than the %d reads", unbuffered, src.reads)
			}
		})
	}
}
