package chat

import (
	"strings"
	"testing"
)

func TestEstimateTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"héllo", 2}, // four ASCII bytes (one token) and é
		{"日本語", 3},
	} {
		if got := EstimateTokens(tc.in); got != tc.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// A stream's deltas are a few characters each: counted piece by piece,
// they must come to what the whole text does, not a token per delta.
func TestTokenCountOfPiecesIsTheWhole(t *testing.T) {
	words := strings.Fields("The quick brown fox jumps over the lazy dog, and then some more text follows in small deltas as a model streams it, naïvely, 日本語 too.")
	var whole strings.Builder
	var c TokenCount
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		whole.WriteString(w)
		c.Add(w)
	}
	if got, want := c.Tokens(), EstimateTokens(whole.String()); got != want {
		t.Errorf("pieces counted %d tokens, the whole text %d", got, want)
	}
}

func TestEstimateUsage(t *testing.T) {
	req := &Request{Messages: []Message{{Role: RoleUser, Content: "how much was that?"}}}
	in := EstimateInputTokens(req)
	count := func(s string) *TokenCount {
		var c TokenCount
		c.Add(s)
		return &c
	}
	for _, tc := range []struct {
		name  string
		soFar *Usage
		after string
		want  Usage
	}{
		{"nothing reported", nil, "some text", Usage{InputTokens: in, OutputTokens: 3, Estimated: true}},
		{"nothing at all", nil, "", Usage{InputTokens: in, Estimated: true}},
		{"input reported, text after", &Usage{InputTokens: 1234, OutputTokens: 1, CachedInputTokens: 1000}, "some text",
			Usage{InputTokens: 1234, OutputTokens: 4, CachedInputTokens: 1000, Estimated: true}},
		{"all reported", &Usage{InputTokens: 31, OutputTokens: 7}, "", Usage{InputTokens: 31, OutputTokens: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EstimateUsage(req, tc.soFar, count(tc.after)); got != tc.want {
				t.Errorf("EstimateUsage(%+v, %q) = %+v, want %+v", tc.soFar, tc.after, got, tc.want)
			}
		})
	}
}
