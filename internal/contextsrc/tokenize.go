package contextsrc

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// appendTokens appends the search tokens of s to dst: maximal runs of
// letters, digits and combining marks (Unicode-aware), lowercased, without
// English stopwords. Everything else, including invalid UTF-8, separates
// tokens. A token that is already lowercase ASCII is a substring of s.
func appendTokens(dst []string, s string) []string {
	start, fold := -1, false // fold: the token needs lowercasing
	for i := 0; i < len(s); {
		c, size := s[i], 1
		word, upper := false, false
		if c < utf8.RuneSelf {
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				word = true
			case 'A' <= c && c <= 'Z':
				word, upper = true, true
			}
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			word = unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
			upper = word
		}
		switch {
		case word && start < 0:
			start, fold = i, upper
		case word:
			fold = fold || upper
		case start >= 0:
			dst = appendToken(dst, s[start:i], fold)
			start = -1
		}
		i += size
	}
	if start >= 0 {
		dst = appendToken(dst, s[start:], fold)
	}
	return dst
}

func appendToken(dst []string, tok string, fold bool) []string {
	if fold {
		tok = toLower(tok)
	}
	if isStopword(tok) {
		return dst
	}
	return append(dst, tok)
}

// toLower lowercases s rune by rune (no special casing, so it never changes
// what counts as a letter).
func toLower(s string) string {
	return strings.Map(unicode.ToLower, s)
}

// isStopword reports whether the lowercase token w is too common to search
// for: Lucene's English stopwords plus pronouns and question words.
func isStopword(w string) bool {
	switch w {
	case "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in",
		"into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the",
		"their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
		"i", "me", "my", "we", "our", "you", "your", "he", "she", "his", "her", "its",
		"am", "been", "do", "does", "did", "can", "could", "would", "should",
		"how", "what", "when", "where", "which", "who", "why",
		"has", "have", "had", "from", "so", "than", "about":
		return true
	}
	return false
}
