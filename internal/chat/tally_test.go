package chat

import (
	"slices"
	"testing"
)

// TestTallyKeepsUsageSoFar: a stream that ends without the provider's
// final usage is metered with what it reported before, plus an estimate
// of the text after; its final usage replaces both.
func TestTallyKeepsUsageSoFar(t *testing.T) {
	req := &Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}
	start := Chunk{Model: "m", UsageSoFar: &Usage{InputTokens: 1234, OutputTokens: 1, CachedInputTokens: 1000}}
	for _, tc := range []struct {
		name   string
		chunks []Chunk
		want   Usage
	}{
		{"nothing reported", []Chunk{{Model: "m"}, {Text: "Hello there"}},
			Usage{InputTokens: EstimateInputTokens(req), OutputTokens: 3, Estimated: true}},
		{"input reported, then text", []Chunk{start, {Text: "Hello there"}},
			Usage{InputTokens: 1234, OutputTokens: 1 + 3, CachedInputTokens: 1000, Estimated: true}},
		{"usage on a text chunk counts its text", []Chunk{{Text: "Hello", UsageSoFar: &Usage{InputTokens: 31, OutputTokens: 1}}, {Text: " world"}},
			Usage{InputTokens: 31, OutputTokens: 1 + 2, Estimated: true}},
		{"reported up to the end", []Chunk{{Text: "Hello world"}, {UsageSoFar: &Usage{InputTokens: 31, OutputTokens: 7}}},
			Usage{InputTokens: 31, OutputTokens: 7}},
		{"final usage wins", []Chunk{start, {Text: "Hello there"}, {FinishReason: FinishStop, Usage: &Usage{InputTokens: 1234, OutputTokens: 2}}},
			Usage{InputTokens: 1234, OutputTokens: 2}},
		{"a restart drops a failed attempt's counts", []Chunk{start, {Thinking: "a long thought of the failed attempt"}, {Thought: &Thought{Restart: true}}, {Thinking: "Hmm"}, {Text: "Hello there"}},
			Usage{InputTokens: EstimateInputTokens(req), OutputTokens: 1 + 3, Estimated: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tl Tally
			for i := range tc.chunks {
				tl.Add(&tc.chunks[i])
			}
			if got := tl.Usage(req); got != tc.want {
				t.Errorf("Usage = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTallyOpen: the choices that showed something and did not end, and
// what else a tally counts.
func TestTallyOpen(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chunks  []Chunk
		open    []int
		visible bool
		text    int
		finish  FinishReason
	}{
		{name: "nothing"},
		{name: "nothing visible", chunks: []Chunk{{Model: "m"}, {UsageSoFar: &Usage{InputTokens: 3}}}},
		{name: "one choice writing", chunks: []Chunk{{Text: "Hel"}, {Text: "lo"}}, open: []int{0}, visible: true, text: 5},
		{name: "one choice ended", chunks: []Chunk{{Text: "Hello"}, {FinishReason: FinishStop}}, visible: true, text: 5, finish: FinishStop},
		{
			name:   "two choices, one ended",
			chunks: []Chunk{{Choice: 1, Refusal: "no"}, {Choice: 0, Text: "ok"}, {Choice: 0, FinishReason: FinishStop}},
			open:   []int{1}, visible: true, text: 4, finish: FinishStop,
		},
		{name: "a tool call", chunks: []Chunk{{Choice: 2, ToolCalls: []ToolCallDelta{{Name: "f"}}}}, open: []int{2}, visible: true},
		{name: "a choice out of range counts, in no set", chunks: []Chunk{{Choice: MaxChoices, Text: "x"}}, visible: true, text: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tl Tally
			for i := range tc.chunks {
				tl.Add(&tc.chunks[i])
			}
			if got := tl.Open(); !slices.Equal(got, tc.open) {
				t.Errorf("Open() = %v, want %v", got, tc.open)
			}
			if tl.Visible != tc.visible || tl.Text != tc.text || tl.Finish != tc.finish || tl.Chunks != len(tc.chunks) {
				t.Errorf("visible %v, text %d, finish %q, chunks %d; want %v, %d, %q, %d",
					tl.Visible, tl.Text, tl.Finish, tl.Chunks, tc.visible, tc.text, tc.finish, len(tc.chunks))
			}
		})
	}
}
