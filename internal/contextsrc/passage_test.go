package contextsrc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// words returns n words "w<from>" … "w<from+n-1>" joined by spaces, ending a
// sentence every sentenceEvery words (0: never).
func words(from, n, sentenceEvery int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "w%d", from+i)
		if sentenceEvery > 0 && (i+1)%sentenceEvery == 0 {
			b.WriteByte('.')
		}
	}
	return b.String()
}

// passageRows are the splitter's table, also the fuzz seeds. want lists each
// passage's first word and word count.
type span struct {
	First string
	Words int
}

var passageRows = []struct {
	name string
	in   string
	want []span
}{
	{name: "empty", in: "", want: nil},
	{name: "blank", in: " \n\n \t\n", want: nil},
	{name: "one short paragraph", in: "\n\n  " + words(0, 5, 0) + "  \n", want: []span{{"w0", 5}}},
	{name: "short paragraphs merge to the minimum",
		in:   words(0, 15, 0) + "\n\n" + words(15, 15, 0) + "\n\n" + words(30, 15, 0) + "\n\n" + words(45, 50, 0),
		want: []span{{"w0", 45}, {"w45", 50}}},
	{name: "a short last paragraph joins the one before",
		in:   words(0, 60, 0) + "\n\n" + words(60, 10, 0),
		want: []span{{"w0", 70}}},
	{name: "a short last paragraph stays when the one before is full",
		in:   words(0, 195, 0) + "\n\n" + words(195, 10, 0),
		want: []span{{"w0", 195}, {"w195", 10}}},
	{name: "paragraphs at the minimum stand alone",
		in:   words(0, 40, 0) + "\n\n" + words(40, 40, 0) + "\n   \n" + words(80, 40, 0),
		want: []span{{"w0", 40}, {"w40", 40}, {"w80", 40}}},
	{name: "single newlines do not end a paragraph",
		in:   words(0, 20, 0) + "\n" + words(20, 30, 0) + "\n\n" + words(50, 45, 0),
		want: []span{{"w0", 50}, {"w50", 45}}},
	{name: "a long paragraph is cut evenly", in: words(0, 450, 0),
		want: []span{{"w0", 150}, {"w150", 150}, {"w300", 150}}},
	{name: "cuts prefer the end of a sentence", in: words(0, 300, 40),
		want: []span{{"w0", 120}, {"w120", 180}}},
	{name: "a short heading joins its section",
		in:   "# Returns\n\n" + words(0, 60, 0) + "\n\n## Refunds\n\n" + words(60, 60, 0),
		want: []span{{"#", 62}, {"##", 62}}},
}

func TestSplitPassages(t *testing.T) {
	for _, tt := range passageRows {
		t.Run(tt.name, func(t *testing.T) {
			var got []span
			for _, p := range splitPassages(tt.in) {
				f := strings.Fields(p)
				got = append(got, span{f[0], len(f)})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("splitPassages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitPassagesKeepsFormatting(t *testing.T) {
	in := "# Title\n\nFirst  paragraph,\nsecond line.\n\n- a list\n- item\n"
	want := []string{"# Title\n\nFirst  paragraph,\nsecond line.\n\n- a list\n- item"}
	if diff := cmp.Diff(want, splitPassages(in)); diff != "" {
		t.Errorf("splitPassages(%q) (-want +got):\n%s", in, diff)
	}
}

func FuzzSplitPassages(f *testing.F) {
	for _, r := range passageRows {
		f.Add(r.in)
	}
	f.Add("a\n\nb\r\n\r\nc\u2028d\u00a0e")
	f.Fuzz(func(t *testing.T, s string) {
		ps := splitPassages(s)
		var all []string
		rest := s
		for i, p := range ps {
			n := len(strings.Fields(p))
			if n == 0 || n > maxPassageWords || (i < len(ps)-1 && n < minPassageWords) {
				t.Fatalf("passage %d of %d has %d words: %q", i, len(ps), n, p)
			}
			if strings.TrimSpace(p) != p {
				t.Fatalf("passage %d %q has surrounding space", i, p)
			}
			k := strings.Index(rest, p)
			if k < 0 || strings.TrimSpace(rest[:k]) != "" {
				t.Fatalf("passage %d %q is not the next part of the text %q", i, p, rest)
			}
			rest = rest[k+len(p):]
			all = append(all, strings.Fields(p)...)
		}
		if strings.TrimSpace(rest) != "" {
			t.Fatalf("text %q lost after the passages", rest)
		}
		if want := strings.Fields(s); !cmp.Equal(want, all, cmp.Comparer(func(a, b string) bool { return a == b })) && len(want)+len(all) > 0 {
			t.Fatalf("words changed: %q -> %q", want, all)
		}
	})
}
