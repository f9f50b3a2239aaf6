package yardstick

import (
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzChatReader: any bytes end in a clean end or an error, never a
// panic, and a clean end only after a done event.
func FuzzChatReader(f *testing.F) {
	f.Add("event: meta\ndata: {}\n\nevent: delta\ndata: {\"text\":\"a\"}\n\nevent: done\ndata: {\"usage\":{\"output_tokens\":1}}\n\n")
	f.Add("event: error\ndata: {\"code\":\"protocol\"}\n\n")
	f.Add(": ping\n\nevent: delta\ndata: {\"text\":null}\n\n")
	f.Add("event: done\ndata: [\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := newChatReader(strings.NewReader(in))
		for range 10000 {
			c, err := r.Next()
			if err == io.EOF {
				if !strings.Contains(in, "done") {
					t.Fatalf("clean end without a done event: %q", in)
				}
				return
			}
			if err != nil {
				if _, again := r.Next(); again != err {
					t.Fatalf("ending not sticky: %v then %v", err, again)
				}
				return
			}
			if !utf8.ValidString(c.Text) && utf8.ValidString(in) {
				t.Fatalf("invalid text %q from valid input", c.Text)
			}
		}
		t.Fatal("no end after 10000 chunks")
	})
}

// FuzzProcParsers: /proc contents of any shape parse or fail, never
// panic, and never give a negative figure.
func FuzzProcParsers(f *testing.F) {
	f.Add([]byte("1 (a) S 1 2 3 4 5 6 7 8 9 10 11 12 0 0 20 0 1 0 1 1 1\n"))
	f.Add([]byte("1 (a) b) R 1 2 3 4 5 6 7 8 9 10 18446744073709551615 1\n"))
	f.Add([]byte("VmRSS:\t 12 kB\n"))
	f.Add([]byte("VmRSS: -5 kB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if cpu, err := parseStatCPU(b); err == nil && cpu < 0 {
			t.Fatalf("cpu %v", cpu)
		}
		if rss, err := parseStatusRSS(b); err == nil && rss < 0 {
			t.Fatalf("rss %d", rss)
		}
	})
}
