package connguard

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const (
	getReq  = "GET /v1/models HTTP/1.1\r\nHost: gw\r\nAccept: */*\r\n\r\n"
	postReq = "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"model\":\"m1\"}\n"
	// chunkReq has chunk extensions, whitespace after a size, an upper-case
	// hex size and trailers.
	chunkReq = "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
		"5;name=\"v;x\"\r\n{\"mod\r\n" + "A \r\nel\":\"m1\"}\n\r\n" + "0;last\r\nX-Sum: 1\r\nX-More: 2\r\n\r\n"
	// badHead has both fields.
	badHead = "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"
	badReq  = badHead + "0\r\n\r\nGET /admin HTTP/1.1\r\nHost: gw\r\n\r\n"
)

// summary is what a stream comes to: how many requests were framed to
// their end, the reason one was refused, whether tracking stopped.
type summary struct {
	Messages int
	Reject   string
	Off      bool
}

var trackerTests = []struct {
	name string
	in   string
	want summary
}{
	// Served.
	{"get", getReq, summary{Messages: 1}},
	{"content-length", postReq, summary{Messages: 1}},
	{"chunked with extensions and trailers", chunkReq, summary{Messages: 1}},
	{"keep-alive sequence", postReq + chunkReq + getReq + postReq, summary{Messages: 4}},
	{"bare LF", "GET / HTTP/1.1\nHost: gw\n\n" + "POST / HTTP/1.1\nHost: gw\nContent-Length: 2\n\nhi", summary{Messages: 2}},
	{"CRLF after a POST is skipped", postReq + "\r\n" + getReq, summary{Messages: 2}},
	{"4 CR and LF bytes after a POST", postReq + "\n\r\n\r" + getReq, summary{Messages: 2}},
	{"but no more", postReq + "\r\n\r\n\r\n" + getReq, summary{Messages: 1, Off: true}},
	{"CRLF after a GET is not skipped", getReq + "\r\n" + getReq, summary{Messages: 1, Off: true}},
	{"both fields inside a Content-Length body", "PUT / HTTP/1.1\r\nHost: gw\r\nContent-Length: 95\r\n\r\n" + badHead[:95], summary{Messages: 1}},
	{"both fields inside chunk data", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5f\r\n" + badHead[:95] + "\r\n0\r\n\r\n", summary{Messages: 1}},
	{"both fields inside a trailer", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n" + getReq, summary{Messages: 2}},
	{"GET with a body", "GET / HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\nabc" + getReq, summary{Messages: 2}},
	{"folded Content-Length", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length:\r\n \t3\r\n \r\n\r\nabc" + getReq, summary{Messages: 2}},
	{"repeated Content-Length", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\ncontent-length:  3 \r\n\r\nabc" + getReq, summary{Messages: 2}},
	{"Content-Length with whitespace", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: \t 3\t \r\n\r\nabc", summary{Messages: 1}},
	{"names that are not the fields", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Lengths: 3\r\nContent-Length : 4\r\nX-Content-Length: 5\r\nTransfer-Encodings: chunked\r\nTE: chunked\r\n\r\n" + getReq, summary{Messages: 2}},
	{"HTTP/1.0 with Content-Length", "POST / HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi", summary{Messages: 1}},
	{"HTTP/1.9", "GET / HTTP/1.9\r\nHost: gw\r\n\r\n", summary{Messages: 1}},
	{"Content-Lengths spelled differently (net/http refuses)", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\nContent-Length: 03\r\n\r\nabc" + getReq, summary{Messages: 2}},
	{"empty Content-Length (net/http refuses unless httplaxcontentlength=1)", "GET / HTTP/1.1\r\nHost: gw\r\nContent-Length:\r\n\r\n" + getReq, summary{Messages: 2}},
	{"Expect 100-continue", "POST / HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", summary{Messages: 1}},
	{"head in pieces", "GET / HTTP/1.1\r\nHost: gw\r\nX-Long: " + strings.Repeat("a", 5000) + "\r\n\r\n", summary{Messages: 1}},
	{"chunk size 16 hex digits", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000002\r\nhi\r\n0\r\n\r\n", summary{Messages: 1}},

	// Refused.
	{"Content-Length then Transfer-Encoding", badReq, summary{Reject: reasonBoth}},
	{"Transfer-Encoding then Content-Length", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nContent-Length: 6\r\n\r\n0\r\n\r\n", summary{Reject: reasonBoth}},
	{"chunked with Content-Length 0", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n", summary{Reject: reasonBoth}},
	{"mixed case names", "POST / HTTP/1.1\r\nHost: gw\r\ncontent-LENGTH: 5\r\ntRaNsFeR-eNcOdInG: chunked\r\n\r\n", summary{Reject: reasonBoth}},
	{"folded Transfer-Encoding", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding:\r\n chunked\r\nContent-Length: 5\r\n\r\n", summary{Reject: reasonBoth}},
	{"whitespace around values", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding:\t chunked \t\r\nContent-Length:   5  \r\n\r\n", summary{Reject: reasonBoth}},
	{"bare LF with both", "POST / HTTP/1.1\nHost: gw\nContent-Length: 5\nTransfer-Encoding: chunked\n\n", summary{Reject: reasonBoth}},
	{"both and Expect 100-continue", "POST / HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", summary{Reject: reasonBoth}},
	{"both with an unsupported coding (net/http refuses)", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\n", summary{Reject: reasonBoth}},
	{"HTTP/1.0 with Transfer-Encoding", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", summary{Reject: reasonHTTP10}},
	{"HTTP/1.0 with both", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", summary{Reject: reasonBoth}},
	{"third of a pipelined batch", postReq + getReq + badReq, summary{Messages: 2, Reject: reasonBoth}},
	{"after a POST and its CRLF", postReq + "\r\n" + badReq, summary{Messages: 1, Reject: reasonBoth}},

	// Not followed: net/http refuses these or they are not HTTP/1.x.
	{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", summary{Off: true}},
	{"TLS", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", summary{Off: true}},
	{"HTTP/0.9", "GET /\r\n\r\n", summary{Off: true}},
	{"bad version", "GET / HTTP/1.1 \r\nHost: gw\r\n\r\n", summary{Off: true}},
	{"empty method", " / HTTP/1.1\r\n\r\n", summary{Off: true}},
	{"leading space in the first field", "GET / HTTP/1.1\r\n Host: gw\r\n\r\n", summary{Off: true}},
	{"Content-Length not a number", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 1 2\r\n\r\n", summary{Off: true}},
	{"Content-Length +1", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: +1\r\n\r\n", summary{Off: true}},
	{"Content-Length overflows", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 9223372036854775808\r\n\r\n", summary{Off: true}},
	{"Content-Lengths differ", "POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", summary{Off: true}},
	{"chunk size with a space before the extension", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5 ;x\r\nhello\r\n0\r\n\r\n", summary{Off: true}},
	{"chunk line with bare LF", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", summary{Off: true}},
	{"chunk size of 17 digits", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000002\r\nhi\r\n0\r\n\r\n", summary{Off: true}},
	{"chunk data not followed by CRLF", "POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhix\r\n0\r\n\r\n", summary{Off: true}},
}

// traceOf feeds in to a tracker in pieces cut at the given offsets and
// returns its decisions and the reason for a refusal.
func traceOf(in []byte, cuts []int) (events []traceEvent, reason string) {
	t := newTracker()
	t.trace = func(e traceEvent) { events = append(events, e) }
	prev := 0
	for _, c := range append(cuts, len(in)) {
		if cut, r := t.feed(in[prev:c]); cut >= 0 {
			return events, r
		}
		prev = c
	}
	return events, ""
}

func summarize(events []traceEvent, reason string) summary {
	s := summary{Reject: reason}
	for _, e := range events {
		switch e.Kind {
		case traceEnd:
			s.Messages++
		case traceOff:
			s.Off = true
		}
	}
	return s
}

func TestTracker(t *testing.T) {
	for _, tt := range trackerTests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarize(traceOf([]byte(tt.in), nil))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestTrackerSplits feeds every row cut at every offset, and one byte at a
// time: the decisions, and the offsets they are made at, must not change.
func TestTrackerSplits(t *testing.T) {
	for _, tt := range trackerTests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			want, wantReason := traceOf(in, nil)
			bytewise := make([]int, 0, len(in))
			for i := 1; i < len(in); i++ {
				bytewise = append(bytewise, i)
				got, reason := traceOf(in, []int{i})
				if diff := cmp.Diff(want, got); diff != "" || reason != wantReason {
					t.Fatalf("cut at %d: reason %q, want %q; events (-want +got):\n%s", i, reason, wantReason, diff)
				}
			}
			got, reason := traceOf(in, bytewise)
			if diff := cmp.Diff(want, got); diff != "" || reason != wantReason {
				t.Fatalf("byte by byte: reason %q, want %q; events (-want +got):\n%s", reason, wantReason, diff)
			}
		})
	}
}

// TestTrackerAgreesWithNetHTTP checks each row against net/http's own
// framing, and that net/http frames the rows as the table says.
func TestTrackerAgreesWithNetHTTP(t *testing.T) {
	for _, tt := range trackerTests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if err := agree(in); err != nil {
				t.Error(err)
			}
			if strings.Contains(tt.name, "net/http refuses") {
				return // the tracker goes on where net/http closes the connection
			}
			want := tt.want
			want.Off = false
			got := summarize(netHTTPFraming(in), "")
			if e := netHTTPFraming(in); len(e) > 0 && e[len(e)-1].Kind == traceReject {
				got.Reject = tt.want.Reject // netHTTPFraming does not say why
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("net/http frames it differently from the table (-table +net/http):\n%s", diff)
			}
		})
	}
}

// FuzzFraming feeds random streams in random pieces: the tracker must not
// panic, must decide the same at the same offsets however the stream is
// cut, and must agree with net/http's framing wherever net/http would go
// on serving the connection.
func FuzzFraming(f *testing.F) {
	for i, tt := range trackerTests {
		f.Add([]byte(tt.in), uint64(i))
	}
	rng := newRand(9)
	for i := range 20 {
		f.Add(randomStream(rng), uint64(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		want, wantReason := traceOf(in, nil)
		cuts := randomCuts(len(in), seed)
		got, reason := traceOf(in, cuts)
		if diff := cmp.Diff(want, got); diff != "" || reason != wantReason {
			t.Fatalf("cut at %v: reason %q, want %q; events (-whole +cut):\n%s", cuts, reason, wantReason, diff)
		}
		if err := agree(in); err != nil {
			t.Fatal(err)
		}
	})
}

// randomCuts returns sorted offsets in (0, n) to cut a stream of n bytes
// at, from one piece to one byte per piece.
func randomCuts(n int, seed uint64) []int {
	if n < 2 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed>>32))
	var cuts []int
	for i := 1; i < n; i++ {
		if rng.IntN(1+int(seed%8)) == 0 {
			cuts = append(cuts, i)
		}
	}
	return cuts
}

// agree compares the tracker's decisions on in with netHTTPFraming's: the
// tracker must make every decision net/http makes, at the same offsets,
// before it may stop or make others (where net/http would refuse the
// stream and close the connection).
func agree(in []byte) error {
	want := netHTTPFraming(in)
	events, _ := traceOf(in, nil)
	got := events
	if len(got) > len(want) {
		got = got[:len(want)]
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		return fmt.Errorf("input %q: tracker and net/http disagree (-net/http +tracker):\n%s", in, diff)
	}
	return nil
}

// netHTTPFraming reads in as net/http's server would — http.ReadRequest
// is the parser the server uses, over a 4 KiB bufio.Reader like the
// server's, with the server's CRLF tolerance after a POST — and returns the
// decisions the tracker should make, up to the first request net/http
// would refuse, not serve as HTTP/1.x, or not finish reading. Which fields
// a head has is read with textproto, as net/http does before it deletes
// any.
func netHTTPFraming(in []byte) []traceEvent {
	src := &countingReader{r: bytes.NewReader(in)}
	br := bufio.NewReader(src)
	pos := func() int64 { return src.n - int64(br.Buffered()) }
	var events []traceEvent
	lastMethod := ""
	for {
		if lastMethod == "POST" {
			peek, _ := br.Peek(4)
			br.Discard(leadingCRorLF(peek))
		}
		start := pos()
		req, err := http.ReadRequest(br)
		if err != nil || req.ProtoMajor != 1 {
			return events
		}
		lastMethod = req.Method
		fields, http10 := rawFields(in[start:])
		_, cl := fields["Content-Length"]
		_, te := fields["Transfer-Encoding"]
		if te && (cl || http10) {
			return append(events, traceEvent{Kind: traceReject, At: pos() - 1, Start: start})
		}
		events = append(events, traceEvent{Kind: traceHead, At: pos(), Start: start})
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return events
		}
		if err := req.Body.Close(); err != nil {
			return events
		}
		events = append(events, traceEvent{Kind: traceEnd, At: pos(), Start: start})
	}
}

// rawFields returns the header fields of the head at the start of b before
// net/http drops any, and whether it is HTTP/1.0.
func rawFields(b []byte) (textproto.MIMEHeader, bool) {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(b)))
	line, _ := r.ReadLine()
	h, _ := r.ReadMIMEHeader()
	return h, strings.HasSuffix(line, " HTTP/1.0")
}

func leadingCRorLF(b []byte) int {
	n := 0
	for _, c := range b {
		if c != '\r' && c != '\n' {
			break
		}
		n++
	}
	return n
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// sdkReq is a request as the OpenAI Python SDK sends it.
const sdkReq = "POST /v1/chat/completions HTTP/1.1\r\n" +
	"Host: localhost:8080\r\n" +
	"Accept-Encoding: gzip, deflate\r\n" +
	"Connection: keep-alive\r\n" +
	"Accept: application/json\r\n" +
	"Content-Type: application/json\r\n" +
	"User-Agent: OpenAI/Python 1.82.0\r\n" +
	"X-Stainless-Lang: python\r\n" +
	"X-Stainless-Package-Version: 1.82.0\r\n" +
	"X-Stainless-OS: Linux\r\n" +
	"X-Stainless-Arch: x64\r\n" +
	"X-Stainless-Runtime: CPython\r\n" +
	"X-Stainless-Runtime-Version: 3.12.3\r\n" +
	"Authorization: Bearer fw-0123456789abcdef0123456789abcdef\r\n" +
	"X-Stainless-Async: false\r\n" +
	"X-Stainless-Retry-Count: 0\r\n" +
	"X-Stainless-Read-Timeout: 600\r\n" +
	"Content-Length: 94\r\n" +
	"\r\n" +
	`{"messages":[{"role":"user","content":"Say hello in one word."}],"model":"fast","stream":true}`

func TestTrackerAllocs(t *testing.T) {
	tr := newTracker()
	in := []byte(sdkReq)
	if n := testing.AllocsPerRun(100, func() { tr.feed(in) }); n != 0 {
		t.Errorf("feed allocates %v times per request, want 0", n)
	}
	if tr.st != sHeadStart {
		t.Fatalf("after whole requests the tracker is in state %d, want sHeadStart", tr.st)
	}
}

// BenchmarkTracker is the tracker's cost per request on a keep-alive
// connection: one SDK-shaped request per read.
func BenchmarkTracker(b *testing.B) {
	tr := newTracker()
	in := []byte(sdkReq)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		tr.feed(in)
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	if tr.st != sHeadStart {
		b.Fatalf("after whole requests the tracker is in state %d, want sHeadStart", tr.st)
	}
}
