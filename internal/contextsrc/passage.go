package contextsrc

import (
	"unicode"
	"unicode/utf8"
)

// Passage sizes, in words (runs of non-space characters).
const (
	minPassageWords = 40
	maxPassageWords = 200
)

// splitPassages splits a document into passages of roughly 40 to 200 words.
// Paragraphs (separated by blank lines) are the unit: short paragraphs are
// merged with the following ones until a passage has at least 40 words, a
// short last passage joins the one before when they fit together, and text
// longer than 200 words is cut into even pieces, preferably after a
// sentence. Each passage is a substring of text (formatting kept) starting
// and ending with a word; passages are in order and do not overlap. Every
// passage has at most 200 words, and every passage but the last at least
// 40.
func splitPassages(text string) []string {
	// The words' byte ranges, and which words start a paragraph.
	var starts, ends []int
	var para []bool
	newlines := 0 // newlines since the last word
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			if r == '\n' {
				newlines++
			}
			i += size
			continue
		}
		j := i + size
		for j < len(text) {
			r, size := utf8.DecodeRuneInString(text[j:])
			if unicode.IsSpace(r) {
				break
			}
			j += size
		}
		starts, ends = append(starts, i), append(ends, j)
		para = append(para, len(starts) > 1 && newlines >= 2)
		newlines = 0
		i = j
	}
	if len(starts) == 0 {
		return nil
	}

	var out []string
	var counts []int // words per passage in out
	emit := func(a, b int) {
		out = append(out, text[starts[a]:ends[b-1]])
		counts = append(counts, b-a)
	}
	a := 0 // the current passage is words [a, b)
	for b := 0; b < len(starts); {
		// Extend to the end of the paragraph starting at b.
		e := b + 1
		for e < len(starts) && !para[e] {
			e++
		}
		if b > a && b-a >= minPassageWords {
			emit(a, b)
			a = b
		}
		b = e
		for b-a > maxPassageWords {
			pieces := (b - a + maxPassageWords - 1) / maxPassageWords
			size := (b - a + pieces - 1) / pieces
			cut := a + size
			for k := a + size; k > a+size/2; k-- {
				if endsSentence(text[starts[k-1]:ends[k-1]]) {
					cut = k
					break
				}
			}
			emit(a, cut)
			a = cut
		}
	}
	n := len(starts) - a
	if k := len(out) - 1; k >= 0 && n < minPassageWords && counts[k]+n <= maxPassageWords {
		out[k] = text[starts[len(starts)-counts[k]-n]:ends[len(ends)-1]]
		return out
	}
	emit(a, len(starts))
	return out
}

// endsSentence reports whether word ends a sentence.
func endsSentence(word string) bool {
	r, _ := utf8.DecodeLastRuneInString(word)
	switch r {
	case '.', '!', '?', ':', ';', '…', '。', '！', '？':
		return true
	}
	return false
}
