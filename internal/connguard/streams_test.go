package connguard

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// randomStream builds a keep-alive stream of requests from pieces chosen
// to sit on the edges of net/http's framing: odd spacing, folding and case
// in the two fields, duplicated and conflicting fields, chunk lines with
// extensions, whitespace and bad endings, trailers, CR/LF between
// requests, and now and then a byte that is wrong. Byte-level fuzzing
// rarely gets this deep into a head.
func randomStream(rng *rand.Rand) []byte {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	// odd picks usual most of the time and one of the others otherwise.
	odd := func(usual string, others ...string) string {
		if rng.IntN(6) == 0 {
			return pick(others...)
		}
		return usual
	}
	eol := func() string {
		if rng.IntN(4) == 0 {
			return "\n"
		}
		return "\r\n"
	}
	var b strings.Builder
	for range 1 + rng.IntN(4) {
		method := odd(pick("GET", "POST", "POST", "PUT"), "HEAD", "OPTIONS", "post", "PRI", "POSTX", "")
		target := odd(pick("/", "/v1/chat/completions"), "*", "/a?b=c d", "http://gw/x", "")
		version := odd("HTTP/1.1", "HTTP/1.0", "HTTP/1.9", "HTTP/2.0", "HTTP/1.1 ", "HTTP/11")
		fmt.Fprintf(&b, "%s %s %s%s", method, target, version, eol())
		if rng.IntN(8) != 0 {
			b.WriteString("Host: gw" + eol())
		}
		cl, te := -1, false
		for range rng.IntN(5) {
			switch rng.IntN(6) {
			case 0, 1:
				n := rng.IntN(12)
				if cl < 0 || rng.IntN(3) == 0 {
					cl = n
				}
				name := odd(pick("Content-Length", "content-length", "CONTENT-LENGTH"), "Content-Length ", "Content-Lengthx", "Content_Length")
				val := odd(pick(fmt.Sprint(cl), " "+fmt.Sprint(cl)+" "), fmt.Sprint(n), "\t0"+fmt.Sprint(cl), "", "+1", fmt.Sprint(cl)+","+fmt.Sprint(cl))
				if rng.IntN(5) == 0 {
					val = eol() + pick(" ", "\t", "  ") + val // obs-fold
				}
				b.WriteString(name + ":" + pick("", " ", "\t") + val + eol())
			case 2, 3:
				te = true
				name := odd(pick("Transfer-Encoding", "transfer-encoding", "Transfer-encoding"), "Transfer-Encoding ", "XTransfer-Encoding")
				val := odd(pick("chunked", "Chunked", " chunked "), "gzip", "chunked, chunked", "")
				if rng.IntN(5) == 0 {
					val = eol() + pick(" ", "\t") + val
				}
				b.WriteString(name + ":" + pick("", " ") + val + eol())
			case 4:
				b.WriteString(pick("Expect: 100-continue", "Connection: close", "Connection: keep-alive", "X-A: b", "Content-Type: application/json") + eol())
			case 5:
				b.WriteString(odd(" folded", "\tfolded", "no colon", "X-Bad\x00: 1", "X-Ok: \xff") + eol())
			}
		}
		b.WriteString(eol())
		switch {
		case te:
			for range rng.IntN(3) {
				n := 1 + rng.IntN(20)
				fmt.Fprintf(&b, "%s%s%s\r\n%s%s", pick(fmt.Sprintf("%x", n), fmt.Sprintf("%X", n), fmt.Sprintf("%04x", n)),
					pick("", ";ext", ";a=\"b;c\"", " ", "\t ", odd("", " ;x")), odd("", "\r"), strings.Repeat("d", n), odd("\r\n", "\n", "x\r\n"))
			}
			b.WriteString(pick("0", "00", "0;last") + odd("\r\n", "\n"))
			for range rng.IntN(3) {
				b.WriteString(odd(pick("X-Trailer: 1", "Content-Length: 5"), " folded", "bad") + eol())
			}
			b.WriteString(odd("\r\n", "\n"))
		case cl > 0:
			b.WriteString(strings.Repeat("x", cl))
		}
		b.WriteString(odd("", "\r\n", "\n", "\r\n\r\n\r\n"))
	}
	out := []byte(b.String())
	if rng.IntN(10) == 0 && len(out) > 0 {
		out[rng.IntN(len(out))] = pick("\r", "\n", " ", ":", "0", "\x00")[0]
	}
	return out
}

// TestTrackerRandomStreams checks randomStream's streams against
// net/http's framing, whole and cut at random.
func TestTrackerRandomStreams(t *testing.T) {
	n := 5000
	if testing.Short() {
		n = 500
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var rejected, served int
	for i := range n {
		in := randomStream(rng)
		if err := agree(in); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		want, wantReason := traceOf(in, nil)
		cuts := randomCuts(len(in), rng.Uint64())
		got, reason := traceOf(in, cuts)
		if diff := cmp.Diff(want, got); diff != "" || reason != wantReason {
			t.Fatalf("stream %d %q cut at %v: reason %q, want %q; events (-whole +cut):\n%s", i, in, cuts, reason, wantReason, diff)
		}
		s := summarize(netHTTPFraming(in), "")
		served += s.Messages
		if wantReason != "" {
			rejected++
		}
	}
	// The generator must reach both outcomes often, or it tests little.
	t.Logf("%d streams: net/http served %d requests; the tracker refused %d streams", n, served, rejected)
	if served < n/2 || rejected < n/20 {
		t.Errorf("%d streams: net/http served %d requests and the tracker refused %d streams; the generator has drifted", n, served, rejected)
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }
