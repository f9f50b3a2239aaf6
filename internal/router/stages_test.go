package router

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/budget"
)

// TestAddStages checks the stages the router's work adds: the
// routing until the first attempt, then each attempt as a group holding
// its time to first token and generation, or its wait when it produced
// none; an attempt still open ends at end.
func TestAddStages(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name     string
		attempts []Attempt
		want     []budget.StageTiming
	}{
		{
			name: "no attempt",
			want: []budget.StageTiming{{Name: "route", StartMs: 10, EndMs: 90}},
		},
		{
			name:     "one attempt",
			attempts: []Attempt{{Deployment: "a", Start: at(12), FirstToken: at(40), End: at(80), Outcome: OutcomeOK}},
			want: []budget.StageTiming{
				{Name: "route", StartMs: 10, EndMs: 12},
				{Name: "upstream a", StartMs: 12, EndMs: 80, Note: "ok", Group: true},
				{Name: "ttft", StartMs: 12, EndMs: 40, Note: "a"},
				{Name: "generation", StartMs: 40, EndMs: 80, Note: "a"},
			},
		},
		{
			name: "a fallback, the second still open",
			attempts: []Attempt{
				{Deployment: "a", Start: at(12), End: at(30), Outcome: OutcomeFirstTokenTimeout},
				{Deployment: "b", Start: at(30), FirstToken: at(50)},
			},
			want: []budget.StageTiming{
				{Name: "route", StartMs: 10, EndMs: 12},
				{Name: "upstream a", StartMs: 12, EndMs: 30, Note: "first_token_timeout", Group: true},
				{Name: "wait a", StartMs: 12, EndMs: 30, Note: "first_token_timeout"},
				{Name: "upstream b", StartMs: 30, EndMs: 90, Group: true},
				{Name: "ttft", StartMs: 30, EndMs: 50, Note: "b"},
				{Name: "generation", StartMs: 50, EndMs: 90, Note: "b"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := budget.New(start)
			(&Report{Attempts: tt.attempts}).AddStages(rec, at(10), at(90))
			if diff := cmp.Diff(tt.want, rec.Timings().Stages); diff != "" {
				t.Errorf("stages (-want +got):\n%s", diff)
			}
		})
	}
	(&Report{}).AddStages(nil, start, start) // no recorder: nothing to do
}
