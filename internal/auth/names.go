package auth

import (
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes bounds a tenant's, user's, key's or name's length.
const MaxNameBytes = 128

// CheckName says what is wrong with a tenant, user, key ID or key name
// ("" if nothing): it must be UTF-8 of printable characters (no control
// characters, NUL above all), at most MaxNameBytes long.
func CheckName(v string) string {
	if len(v) > MaxNameBytes {
		return "is longer than 128 bytes"
	}
	if !utf8.ValidString(v) {
		return "is not UTF-8"
	}
	for _, r := range v {
		if !unicode.IsPrint(r) {
			return "must hold printable characters only"
		}
	}
	return ""
}
