package window

import (
	"fmt"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/budget"
)

func observe(w *Window, now time.Time, id, surface string) {
	rec := budget.New(now.Add(-100 * time.Millisecond))
	rec.Add("parse", now.Add(-100*time.Millisecond), now.Add(-99*time.Millisecond), "")
	rec.Add("ttft", now.Add(-99*time.Millisecond), now.Add(-10*time.Millisecond), "")
	rec.FirstWord(now.Add(-10 * time.Millisecond))
	rec.Complete(now)
	w.Observe(now, id, surface, "m", "complete", rec)
}

// TestRecentKeepsTheLast: the report's recent waterfalls are the last
// keep requests, oldest first, filtered by surface.
func TestRecentKeepsTheLast(t *testing.T) {
	w := New(time.Minute, Targets{}, 3)
	now := time.Now()
	for i := 1; i <= 5; i++ {
		surface := "openai"
		if i == 4 {
			surface = "anthropic"
		}
		observe(w, now, fmt.Sprint(i), surface)
	}
	for _, tt := range []struct {
		surface string
		n       int
		want    string
	}{
		{"", 10, "[3 4 5]"},
		{"", 2, "[4 5]"},
		{"openai", 10, "[3 5]"},
		{"anthropic", 10, "[4]"},
	} {
		rep := w.Report(now, tt.surface, tt.n)
		var ids []string
		for _, r := range rep.Recent {
			ids = append(ids, r.ID)
		}
		if got := fmt.Sprint(ids); got != tt.want {
			t.Errorf("surface %q, %d recent: %s, want %s", tt.surface, tt.n, got, tt.want)
		}
	}
	rep := w.Report(now, "", 0)
	if len(rep.Stages) == 0 {
		t.Fatalf("no stages in %+v", rep)
	}
}
