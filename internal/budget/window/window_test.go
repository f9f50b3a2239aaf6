package window

import (
	"fmt"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/budget"
)

func observe(w *Window, now time.Time, id, surface string) { observeFor(w, now, id, "", surface) }

func observeFor(w *Window, now time.Time, id, tenant, surface string) {
	observeBy(w, now, id, tenant, "", surface)
}

func observeBy(w *Window, now time.Time, id, tenant, user, surface string) {
	rec := budget.New(now.Add(-100 * time.Millisecond))
	rec.Add("parse", now.Add(-100*time.Millisecond), now.Add(-99*time.Millisecond), "")
	rec.Add("ttft", now.Add(-99*time.Millisecond), now.Add(-10*time.Millisecond), "")
	rec.FirstWord(now.Add(-10 * time.Millisecond))
	rec.Complete(now)
	w.Observe(now, id, tenant, user, surface, "m", "complete", rec)
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
		rep := w.Report(now, "", "", tt.surface, tt.n)
		var ids []string
		for _, r := range rep.Recent {
			ids = append(ids, r.ID)
		}
		if got := fmt.Sprint(ids); got != tt.want {
			t.Errorf("surface %q, %d recent: %s, want %s", tt.surface, tt.n, got, tt.want)
		}
	}
	rep := w.Report(now, "", "", "", 0)
	if len(rep.Stages) == 0 {
		t.Fatalf("no stages in %+v", rep)
	}
}

// TestReportOfOneTenant: a tenant's report counts and lists its own
// requests only; the report of all tenants counts everyone's.
func TestReportOfOneTenant(t *testing.T) {
	w := New(time.Minute, Targets{}, 10)
	now := time.Now()
	observeFor(w, now, "a1", "acme", "openai")
	observeFor(w, now, "a2", "acme", "chat")
	observeFor(w, now, "g1", "globex", "openai")
	observeBy(w, now, "a3", "acme", "bob", "openai")
	for _, tt := range []struct {
		tenant, surface string
		requests        int
		recent          string
	}{
		{"", "", 4, "[a1 a2 g1 a3]"},
		{"acme", "", 3, "[a1 a2 a3]"},
		{"acme", "openai", 2, "[a1 a3]"},
		{"globex", "", 1, "[g1]"},
		{"globex", "chat", 0, "[]"},
		{"initech", "", 0, "[]"},
	} {
		rep := w.Report(now, tt.tenant, "", tt.surface, 10)
		ids := []string{}
		for _, r := range rep.Recent {
			ids = append(ids, r.ID)
		}
		if rep.Requests != tt.requests || fmt.Sprint(ids) != tt.recent {
			t.Errorf("Report(%q, %q): %d requests, recent %v; want %d, %s", tt.tenant, tt.surface, rep.Requests, ids, tt.requests, tt.recent)
		}
	}
}

// TestRecentOfOneUser: with a user, the waterfalls are that user's only
// while the percentiles stay the tenant's.
func TestRecentOfOneUser(t *testing.T) {
	w := New(time.Minute, Targets{}, 10)
	now := time.Now()
	observeBy(w, now, "a1", "acme", "ann", "openai")
	observeBy(w, now, "b1", "acme", "bob", "openai")
	rep := w.Report(now, "acme", "bob", "", 10)
	if rep.Requests != 2 || len(rep.Recent) != 1 || rep.Recent[0].ID != "b1" {
		t.Errorf("bob's view: %d requests, recent %+v; want 2 and [b1]", rep.Requests, rep.Recent)
	}
}
