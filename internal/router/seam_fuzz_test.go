package router

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// feedPieces feeds text through m in pieces of 1 to 16 bytes drawn from
// seed (cut anywhere, inside a character too), then ends it.
func feedPieces(m *seam, text string, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 33))
	var out strings.Builder
	for text != "" {
		n := 1 + rng.IntN(min(len(text), 16))
		out.WriteString(m.feed(text[:n], false))
		text = text[n:]
	}
	out.WriteString(m.feed("", true))
	return out.String()
}

// seamFor is the seam a continuation of delivered starts with, by
// prefill or not (see session.continuation).
func seamFor(delivered string, prefill bool) seam {
	whole, partial := given(delivered, prefill)
	return seam{tail: tailOf(whole, seamMax), partial: partial}
}

// FuzzSeam feeds a continuation through the seam of a delivered text, at
// once and in random pieces, and checks what must always hold: the seam
// only drops a start of the continuation (the output is an end of it);
// the output follows the delivered text as valid UTF-8 whenever the
// partial character and the continuation do; pieces give what the whole
// gives. And when the continuation restates an end of the delivered text
// (from a character's start, one that counts, no longer one possible)
// and goes on with rest, the output is rest.
func FuzzSeam(f *testing.F) {
	f.Add("Hello wor", "world, this is it.", uint64(1), uint16(3), false)
	f.Add("Naïve caf\xc3", "\xa9 owners", uint64(2), uint16(0), false)
	f.Add("日本語のテキ\xe3\x82", "ストも混ざります。", uint64(3), uint16(9), false)
	f.Add("an emoji \xf0\x9f", "🙂 here", uint64(4), uint16(1), false)
	f.Add("Hello world. ", "Hello world. Then more.", uint64(5), uint16(13), false)
	f.Add("Hello world.\n\n", "\n\nNext.", uint64(5), uint16(2), true)
	f.Add("abab", "ababab", uint64(6), uint16(2), false)
	f.Add("", "anything", uint64(7), uint16(0), false)
	// Found reading the seam (the fuzzer had not found them in 30 s):
	// a short restatement that the partial character's bytes make count,
	// cut before them...
	f.Add("abx\xe6\x97", "x日本", uint64(2), uint16(0), false)
	// ...and a restatement of 199 bytes before them: held up to seamMax
	// bytes only, the partial character's were passed on again.
	f.Add(strings.Repeat("abcdefghij", 30)+"\xe6\x97", "日本 rest", uint64(1), uint16(198), false)
	// Found by CI's fuzzing: a delivered text ending in a lone lead
	// byte (invalid UTF-8) matched the continuation's first byte, and the
	// seam cut its character in two.
	f.Add("\xf0 ", "🙂", uint64(1), uint16(0), true)
	f.Fuzz(func(t *testing.T, delivered, cont string, seed uint64, back uint16, prefill bool) {
		whole, partial := given(delivered, prefill)
		check := func(name, cont string) (once, pieces string) {
			m := seamFor(delivered, prefill)
			once = m.feed(cont, true)
			m = seamFor(delivered, prefill)
			pieces = feedPieces(&m, cont, seed)
			if !strings.HasSuffix(cont, once) {
				t.Fatalf("%s: delivered %q, continuation %q: output %q is not an end of the continuation", name, delivered, cont, once)
			}
			if pieces != once {
				t.Fatalf("%s: delivered %q, continuation %q: in pieces %q, at once %q", name, delivered, cont, pieces, once)
			}
			if utf8.ValidString(partial+cont) && !utf8.ValidString(partial+once) {
				t.Fatalf("%s: delivered %q, continuation %q: output %q does not follow %q as valid UTF-8", name, delivered, cont, once, partial)
			}
			return once, pieces
		}
		check("any", cont)

		// A restatement of the delivered text's last k bytes (from a
		// character's start, within the tail the seam holds), then rest:
		// dropped when it counts (seamMin bytes or more, a word's start,
		// or followed by the partial character's bytes).
		tail := tailOf(whole, seamMax)
		if tail == "" {
			return
		}
		k := 1 + int(back)%len(tail)
		for k < len(tail) && !utf8.RuneStart(tail[len(tail)-k]) {
			k++
		}
		restated := tail[len(tail)-k:] + partial + cont
		counts := func(l int) bool {
			return l >= seamMin || wordStart(tail, len(tail)-l) || partial != "" && strings.HasPrefix(restated[l:], partial)
		}
		once, _ := check("restated", restated)
		// An overlap ends on a character boundary of the continuation:
		// one that goes on with a stray continuation byte is not one.
		if !counts(k) || k < len(restated) && !utf8.RuneStart(restated[k]) {
			return
		}
		// The longest restatement that counts wins: a longer one the
		// continuation happens to make (periodic text, "abab" + "ab") is
		// the documented limit, not a failure.
		for l := k + 1; l <= min(len(tail), len(restated)); l++ {
			if utf8.RuneStart(tail[len(tail)-l]) && tail[len(tail)-l:] == restated[:l] && counts(l) {
				return
			}
		}
		if once != cont {
			t.Fatalf("delivered %q, continuation %q (restating %d bytes): output %q, want %q", delivered, restated, k, once, cont)
		}
	})
}
