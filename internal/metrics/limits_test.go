package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/limits"
)

// TestObserveLimits: admission's counters are read at each scrape, the
// refusals by reason.
func TestObserveLimits(t *testing.T) {
	m := New(nil)
	m.ObserveLimits(func() limits.Stats {
		return limits.Stats{Refused: map[string]uint64{"requests": 3, "budget": 1}, SharedErrors: 2, Degraded: 9,
			SoftCrossed: 4, ReloadErrors: 5}
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	var got []string
	for line := range strings.Lines(string(b)) {
		for _, p := range []string{"firstword_admission_", "firstword_budget_", "firstword_limits_"} {
			if strings.HasPrefix(line, p) {
				got = append(got, strings.TrimSpace(line))
			}
		}
	}
	want := []string{
		"firstword_admission_degraded_total 9",
		`firstword_admission_refused_total{reason="budget"} 1`,
		`firstword_admission_refused_total{reason="requests"} 3`,
		"firstword_admission_shared_errors_total 2",
		"firstword_budget_soft_threshold_crossed_total 4",
		"firstword_limits_reload_errors_total 5",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
}
