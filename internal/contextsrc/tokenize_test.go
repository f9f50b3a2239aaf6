package contextsrc

import (
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tokenRows are the tokenizer's table, also the fuzz seeds.
var tokenRows = []struct {
	name string
	in   string
	want []string
}{
	{name: "empty", in: "", want: nil},
	{name: "punctuation only", in: " -- !? ", want: nil},
	{name: "lowercase and punctuation", in: "Hello, World!", want: []string{"hello", "world"}},
	{name: "stopwords", in: "How long does the shipping take to Germany?", want: []string{"long", "shipping", "take", "germany"}},
	{name: "hyphen and apostrophe split", in: "e-mail don't", want: []string{"e", "mail", "don", "t"}},
	{name: "digits", in: "Order #12345, 3.5kg", want: []string{"order", "12345", "3", "5kg"}},
	{name: "german", in: "Straße ÜBER Größe", want: []string{"straße", "über", "größe"}},
	{name: "accents", in: "Naïve CAFÉ", want: []string{"naïve", "café"}},
	{name: "combining mark stays in the word", in: "Cafe\u0301 ok", want: []string{"cafe\u0301", "ok"}},
	{name: "greek", in: "Ο ΚΌΣΜΟΣ", want: []string{"ο", "κόσμοσ"}},
	{name: "cyrillic", in: "Привет, мир", want: []string{"привет", "мир"}},
	{name: "cjk is one run", in: "日本語のテキスト。次", want: []string{"日本語のテキスト", "次"}},
	{name: "dotted capital i", in: "İstanbul", want: []string{"istanbul"}},
	{name: "arabic digits", in: "رقم ٤٢", want: []string{"رقم", "٤٢"}},
	{name: "emoji separates", in: "fast🚚delivery", want: []string{"fast", "delivery"}},
	{name: "invalid utf-8 separates", in: "abc\xffdef", want: []string{"abc", "def"}},
	{name: "underscore separates", in: "snake_case", want: []string{"snake", "case"}},
}

func TestTokenize(t *testing.T) {
	for _, tt := range tokenRows {
		t.Run(tt.name, func(t *testing.T) {
			got := appendTokens(nil, tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("appendTokens(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func FuzzTokenize(f *testing.F) {
	for _, r := range tokenRows {
		f.Add(r.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := appendTokens(nil, s)
		for _, tok := range toks {
			if tok == "" || isStopword(tok) {
				t.Fatalf("appendTokens(%q) has token %q", s, tok)
			}
			for _, r := range tok {
				if !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)) || unicode.ToLower(r) != r {
					t.Fatalf("appendTokens(%q) has token %q with rune %q", s, tok, r)
				}
			}
		}
		// Tokens are a fixed point: tokenizing them again changes nothing.
		if again := appendTokens(nil, strings.Join(toks, " ")); !cmp.Equal(toks, again, cmp.Comparer(func(a, b string) bool { return a == b })) && !(len(toks) == 0 && len(again) == 0) {
			t.Fatalf("appendTokens(%q) = %q, but again = %q", s, toks, again)
		}
	})
}
