package httpapi

import (
	"strings"
	"testing"
)

func TestParseIdempotencyKey(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		ok        bool
	}{
		{"uuid", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"printable with spaces", "order 42 / retry", true},
		{"255 chars", strings.Repeat("k", 255), true},
		{"empty", "", false},
		{"256 chars", strings.Repeat("k", 256), false},
		{"control char", "a\x01b", false},
		{"tab", "a\tb", false},
		{"non-ASCII", "clé", false},
		{"DEL", "a\x7f", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ParseIdempotencyKey(tc.key); (err == nil) != tc.ok {
				t.Errorf("ParseIdempotencyKey(%q) = %v, want ok %v", tc.key, err, tc.ok)
			}
		})
	}
}

func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{"", "0f8fad5b-d9cb", strings.Repeat("k", 256), "a\x01b", "clé"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ParseIdempotencyKey(key)
		printable := len(key) > 0 && len(key) <= 255 && !strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e })
		if (err == nil) != printable {
			t.Errorf("ParseIdempotencyKey(%q) = %v, printable %v", key, err, printable)
		}
	})
}

// FuzzCORSRequestHeaders: a preflight's Access-Control-Request-Headers
// never panics, and a list of only listed headers is allowed.
func FuzzCORSRequestHeaders(f *testing.F) {
	for _, s := range []string{"", "authorization,content-type", " Authorization , X-Other", ",,,", "accept"} {
		f.Add(s)
	}
	c := CORS{AllowedOrigins: []string{"https://a.example"}}
	f.Fuzz(func(t *testing.T, list string) {
		allowed := c.allowsHeaders(list)
		onlyListed := true
		for h := range strings.SplitSeq(list, ",") {
			h = strings.TrimSpace(h)
			if h != "" && !safelistedHeader(h) && !containsFold(DefaultCORSHeaders, h) {
				onlyListed = false
			}
		}
		if allowed != onlyListed {
			t.Errorf("allowsHeaders(%q) = %v, want %v", list, allowed, onlyListed)
		}
	})
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
