package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/metering"
)

// TestObserveUsage: the usage writer's counts are read at each scrape.
func TestObserveUsage(t *testing.T) {
	m := New(nil)
	stats := metering.UsageStats{Queued: 7, InSpill: 3, Spilled: 12, Dropped: 2, Written: 100, WriteErrors: 5}
	m.ObserveUsage(func() metering.UsageStats { return stats })
	scrape := func() []string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		var lines []string
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "firstword_usage_") {
				lines = append(lines, strings.TrimSpace(line))
			}
		}
		return lines
	}
	want := []string{
		"firstword_usage_rows_dropped_total 2",
		"firstword_usage_rows_queued 7",
		"firstword_usage_rows_spilled_total 12",
		"firstword_usage_rows_written_total 100",
		"firstword_usage_spill_rows 3",
		"firstword_usage_write_errors_total 5",
	}
	if diff := cmp.Diff(want, scrape()); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
	stats.Queued, stats.Written = 0, 107
	got := scrape()
	if !strings.Contains(strings.Join(got, "\n"), "firstword_usage_rows_queued 0") || !strings.Contains(strings.Join(got, "\n"), "firstword_usage_rows_written_total 107") {
		t.Errorf("second scrape %v, want the new counts", got)
	}
}
