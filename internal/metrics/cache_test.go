package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestObserveCache: the cache's health counters are read at each scrape.
func TestObserveCache(t *testing.T) {
	m := New(nil)
	m.ObserveCache(func() CacheStats {
		return CacheStats{Timeouts: 4, Errors: 1, Skipped: 30, Opens: 2, Open: true, WritesInFlight: 3, WritesDropped: 5}
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	var got []string
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "firstword_cache_") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	want := []string{
		`firstword_cache_failures_total{outcome="error"} 1`,
		`firstword_cache_failures_total{outcome="skipped"} 30`,
		`firstword_cache_failures_total{outcome="timeout"} 4`,
		"firstword_cache_skipped 1",
		"firstword_cache_skips_total 2",
		"firstword_cache_writes_dropped_total 5",
		"firstword_cache_writes_in_flight 3",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
}
