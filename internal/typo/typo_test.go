package typo

import "testing"

func TestNearest(t *testing.T) {
	words := []string{"serve", "sim", "budget", "keys", "bench", "levers", "version", "tenants"}
	for _, tc := range []struct{ word, want string }{
		{"serv", "serve"},
		{"sreve", "serve"}, // a transposition
		{"servee", "serve"},
		{"bugdet", "budget"},
		{"key", "keys"},
		{"tenant", "tenants"},
		{"x", ""},
		{"deploy", ""},
		{"", ""},
	} {
		if got := Nearest(tc.word, words); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	if got := Nearest("first_token_timeot", []string{"timeout", "first_token_timeout", "stall_timeout"}); got != "first_token_timeout" {
		t.Errorf("Nearest(first_token_timeot) = %q", got)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"addr", "adr", 1},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
