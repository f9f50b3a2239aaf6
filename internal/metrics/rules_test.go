package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/metering"
)

// TestRoutingRuleFallback: a rule's decision is counted by the alias it
// chose, whether or not the request fell back from it; the fallbacks are
// counted apart.
func TestRoutingRuleFallback(t *testing.T) {
	m := New(nil)
	for _, routedTo := range []string{"fast", "fast, fell back to chat", "fast"} {
		m.Record(context.Background(), &metering.Record{Surface: "openai", Alias: "chat", Deployment: "d", Status: metering.StatusComplete,
			Rule: "short-questions", RoutedTo: routedTo})
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	var got []string
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "firstword_routing_rule") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	want := []string{
		`firstword_routing_rule_fallback_total{alias="chat",rule="short-questions",to="fast"} 1`,
		`firstword_routing_rule_total{alias="chat",rule="short-questions",to="fast"} 3`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
}
