package guard

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// wordBefore reports whether the rune ending at s[:i] is part of a word.
func wordBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return isWordRune(r)
}

// wordAfter reports whether the rune starting at s[i:] is part of a word.
func wordAfter(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return isWordRune(r)
}

// scanCards calls fn with the byte range of every payment card number in s,
// in order: 13 to 19 ASCII digits, single spaces or dashes allowed between
// them, not touching a letter or digit on either side, valid under the Luhn
// check. In a longer run of digit groups ("order 1234 4111 1111 1111 1111")
// any window of whole groups can be a card; the earliest start and then the
// longest valid window wins. A single group of more than 19 digits is never
// a card.
func scanCards(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			i++
			continue
		}
		// The run: digit groups joined by single separators.
		runStart, runEnd := i, i
		for j := i; j < len(s) && isDigit(s[j]); {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			runEnd = j
			if j+1 < len(s) && (s[j] == ' ' || s[j] == '-') && isDigit(s[j+1]) {
				j++
			} else {
				break
			}
		}
		i = runEnd
		leftOK := !wordBefore(s, runStart)
		rightOK := !wordAfter(s, runEnd)

		for gs := runStart; gs < runEnd; {
			var ends [8]int
			n := 0
			if gs != runStart || leftOK {
				digits := 0
				for j := gs; j < runEnd; j++ { // j steps over a separator
					for j < runEnd && isDigit(s[j]) {
						j++
						digits++
					}
					if digits > 19 {
						break
					}
					if digits >= 13 && (j < runEnd || rightOK) && n < len(ends) {
						ends[n] = j
						n++
					}
				}
			}
			next := -1
			for k := n - 1; k >= 0; k-- {
				if luhn(s[gs:ends[k]]) {
					fn(gs, ends[k])
					next = ends[k] + 1
					break
				}
			}
			if next < 0 { // the next group
				next = gs
				for next < runEnd && isDigit(s[next]) {
					next++
				}
				next++
			}
			gs = next
		}
	}
}

// luhn reports whether the digits of s pass the Luhn check. Non-digits are
// skipped.
func luhn(s string) bool {
	sum, double := 0, false
	for i := len(s) - 1; i >= 0; i-- {
		if !isDigit(s[i]) {
			continue
		}
		d := int(s[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// isLocalRune reports whether r may be part of an e-mail address's local
// part as this scanner sees it.
func isLocalRune(r rune) bool {
	return isWordRune(r) || r == '.' || r == '_' || r == '%' || r == '+' || r == '-'
}

// isDomainRune reports whether r may be part of an e-mail domain.
func isDomainRune(r rune) bool {
	return isWordRune(r) || r == '.' || r == '-'
}

// scanEmails calls fn for every e-mail address in s, in order, with its byte
// range and the index of its "@". An address is a local part of letters,
// digits and "._%+-" and a domain of two or more dot-separated labels of
// letters, digits and hyphens whose last label is at least two letters.
// Leading dots of the local part and trailing dots and hyphens of the domain
// are left out, so "write to ann@example.com." ends before the period.
func scanEmails(s string, fn func(start, at, end int)) {
	floor := 0 // the end of the last address: the next one starts after it
	for off := 0; off < len(s); {
		k := strings.IndexByte(s[off:], '@')
		if k < 0 {
			return
		}
		at := off + k
		off = at + 1

		start := at
		for start > floor {
			r, n := utf8.DecodeLastRuneInString(s[floor:start])
			if !isLocalRune(r) {
				break
			}
			start -= n
		}
		for start < at && s[start] == '.' {
			start++
		}
		if start == at {
			continue
		}
		end := at + 1
		for end < len(s) {
			r, n := utf8.DecodeRuneInString(s[end:])
			if !isDomainRune(r) {
				break
			}
			end += n
		}
		for end > at+1 && (s[end-1] == '.' || s[end-1] == '-') {
			end--
		}
		if !validDomain(s[at+1 : end]) {
			continue
		}
		fn(start, at, end)
		off, floor = end, end
	}
}

// validDomain reports whether d has two or more non-empty labels, none
// starting or ending with a hyphen, and a last label of two or more letters.
func validDomain(d string) bool {
	labels := 0
	for label := range strings.SplitSeq(d, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		labels++
	}
	if labels < 2 {
		return false
	}
	tld := d[strings.LastIndexByte(d, '.')+1:]
	if utf8.RuneCountInString(tld) < 2 {
		return false
	}
	for _, r := range tld {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}
