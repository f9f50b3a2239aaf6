package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
)

// TestTokensAndCostByPart: the tokens and cost of the attempts that did
// not give the answer are counted, each at its deployment, apart from
// the answer's.
func TestTokensAndCostByPart(t *testing.T) {
	m := New(nil)
	m.Record(context.Background(), &metering.Record{Surface: "openai", Alias: "chat", Deployment: "b/m", Status: metering.StatusComplete,
		Usage: chat.Usage{InputTokens: 12, OutputTokens: 5}, Cost: 0.5,
		Spent: []metering.Spent{{Deployment: "a/m", Usage: chat.Usage{InputTokens: 900, OutputTokens: 3, CachedInputTokens: 100}, Cost: 0.25}}})
	got := scrape(m, func(line string) bool {
		return strings.HasPrefix(line, "firstword_tokens_total") || strings.HasPrefix(line, "firstword_cost_usd_total")
	})
	want := []string{
		`firstword_cost_usd_total{alias="chat",deployment="a/m",part="attempt"} 0.25`,
		`firstword_cost_usd_total{alias="chat",deployment="b/m",part="answer"} 0.5`,
		`firstword_tokens_total{alias="chat",deployment="a/m",kind="cached",part="attempt"} 100`,
		`firstword_tokens_total{alias="chat",deployment="a/m",kind="input",part="attempt"} 900`,
		`firstword_tokens_total{alias="chat",deployment="a/m",kind="output",part="attempt"} 3`,
		`firstword_tokens_total{alias="chat",deployment="b/m",kind="input",part="answer"} 12`,
		`firstword_tokens_total{alias="chat",deployment="b/m",kind="output",part="answer"} 5`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
}

// scrape returns the lines of m's exposition that keep says to keep,
// trimmed.
func scrape(m *Metrics, keep func(line string) bool) []string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	var got []string
	for line := range strings.Lines(string(b)) {
		if keep(line) {
			got = append(got, strings.TrimSpace(line))
		}
	}
	return got
}
