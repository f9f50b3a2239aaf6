package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
)

// TestThinking: a request whose model thought is observed in the time to
// first thought and thinking histograms, and its reasoning tokens are
// counted (as part of its output); one that did not think adds to
// neither histogram.
func TestThinking(t *testing.T) {
	m := New(nil)
	m.Record(context.Background(), &metering.Record{Surface: "openai", Alias: "reasoner", Deployment: "sim/reasoner", Status: metering.StatusComplete,
		TTFThought: 250 * time.Millisecond, Thinking: 1800 * time.Millisecond, TTFW: 2100 * time.Millisecond,
		Usage: chat.Usage{InputTokens: 12, OutputTokens: 400, ReasoningTokens: 350}})
	m.Record(context.Background(), &metering.Record{Surface: "openai", Alias: "chat", Deployment: "sim/small", Status: metering.StatusComplete,
		TTFT: 90 * time.Millisecond, TTFW: 100 * time.Millisecond, Total: 500 * time.Millisecond, Usage: chat.Usage{InputTokens: 12, OutputTokens: 5}})
	got := scrape(m, func(line string) bool {
		for _, p := range []string{"firstword_time_to_first_thought_seconds_", "firstword_thinking_seconds_", `firstword_tokens_total{alias="reasoner"`} {
			if strings.HasPrefix(line, p) && (!strings.Contains(line, "_bucket") || strings.Contains(line, `le="0.25"`) || strings.Contains(line, `le="2"`)) {
				return true
			}
		}
		return false
	})
	labels := `alias="reasoner",deployment="sim/reasoner",status="complete",surface="openai"`
	want := []string{
		`firstword_thinking_seconds_bucket{` + labels + `,le="0.25"} 0`,
		`firstword_thinking_seconds_bucket{` + labels + `,le="2"} 1`,
		`firstword_thinking_seconds_sum{` + labels + `} 1.8`,
		`firstword_thinking_seconds_count{` + labels + `} 1`,
		`firstword_time_to_first_thought_seconds_bucket{` + labels + `,le="0.25"} 1`,
		`firstword_time_to_first_thought_seconds_bucket{` + labels + `,le="2"} 1`,
		`firstword_time_to_first_thought_seconds_sum{` + labels + `} 0.25`,
		`firstword_time_to_first_thought_seconds_count{` + labels + `} 1`,
		`firstword_tokens_total{alias="reasoner",deployment="sim/reasoner",kind="input",part="answer"} 12`,
		`firstword_tokens_total{alias="reasoner",deployment="sim/reasoner",kind="output",part="answer"} 400`,
		`firstword_tokens_total{alias="reasoner",deployment="sim/reasoner",kind="reasoning",part="answer"} 350`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
	if chat := scrape(m, func(line string) bool { return strings.Contains(line, `seconds_count{alias="chat"`) }); len(chat) != 3 {
		// ttft, ttfw, ttc
		t.Errorf("a request that did not think: %q, want its ttft, ttfw and ttc, no thinking", chat)
	}
}
