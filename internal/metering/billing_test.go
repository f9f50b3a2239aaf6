package metering

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store"
)

// TestCharge: the answer is priced at the deployment that served it, each
// attempt that did not give it at its own; both are shared alike.
func TestCharge(t *testing.T) {
	prices := Prices{"a/m": {Input: 1, Output: 2}, "b/m": {Input: 3, Output: 4}}
	lost := &chat.Usage{InputTokens: 900, OutputTokens: 3}
	timedOut := &chat.Usage{InputTokens: 20, Estimated: true}
	answer := chat.Usage{InputTokens: 12, OutputTokens: 5}
	attempts := []router.Attempt{
		{Deployment: "a/m", Outcome: router.OutcomeHedgeLost, Usage: lost},
		{Deployment: "b/m", Outcome: router.OutcomeFirstTokenTimeout, Usage: timedOut},
		{Deployment: "a/m", Outcome: router.OutcomeError}, // refused: not billed
		{Deployment: "b/m", Outcome: router.OutcomeOK},
	}
	for _, tc := range []struct {
		name       string
		rep        levers.Report
		wantUsage  chat.Usage
		wantCost   float64
		wantSpent  []Spent
		wantTotal  chat.Usage
		wantTotalC float64
	}{
		{"served", lrep(router.Report{Deployment: "b/m", Attempts: attempts}, 1), answer, (12*3 + 5*4) / 1e6,
			[]Spent{{"a/m", *lost, (900 + 3*2) / 1e6}, {"b/m", *timedOut, 20 * 3 / 1e6}},
			chat.Usage{InputTokens: 920, OutputTokens: 3, Estimated: true}, (906 + 60) / 1e6},
		{"nothing served", lrep(router.Report{Attempts: attempts[:2]}, 1), chat.Usage{}, 0,
			[]Spent{{"a/m", *lost, 906 / 1e6}, {"b/m", *timedOut, 60 / 1e6}},
			chat.Usage{InputTokens: 920, OutputTokens: 3, Estimated: true}, 966 / 1e6},
		{"second of three sharers", levers.Report{Report: router.Report{Deployment: "b/m", Attempts: attempts[:1]}, Coalesced: true, BillShare: 1.0 / 3, BillPart: [2]int{1, 3}},
			chat.Usage{InputTokens: 4, OutputTokens: 2}, (4*3 + 2*4) / 1e6,
			[]Spent{{"a/m", chat.Usage{InputTokens: 300, OutputTokens: 1}, (300 + 2) / 1e6}},
			chat.Usage{InputTokens: 300, OutputTokens: 1}, 302 / 1e6},
		{"cache hit", levers.Report{Report: router.Report{Deployment: "b/m"}, Cached: true}, chat.Usage{}, 0, nil, chat.Usage{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Record
			prices.Charge(&r, answer, &tc.rep)
			approx := cmp.Comparer(func(a, b float64) bool { return a-b < 1e-15 && b-a < 1e-15 })
			if diff := cmp.Diff(tc.wantUsage, r.Usage); diff != "" || !cmp.Equal(tc.wantCost, r.Cost, approx) {
				t.Errorf("answer %+v costing %v, want %+v costing %v", r.Usage, r.Cost, tc.wantUsage, tc.wantCost)
			}
			if diff := cmp.Diff(tc.wantSpent, r.Spent, approx); diff != "" {
				t.Errorf("Spent (-want +got):\n%s", diff)
			}
			u, c := r.AttemptsTotal()
			if u != tc.wantTotal || !cmp.Equal(tc.wantTotalC, c, approx) {
				t.Errorf("AttemptsTotal() = %+v, %v, want %+v, %v", u, c, tc.wantTotal, tc.wantTotalC)
			}
		})
	}
}

// lrep is the report of a request the levers left alone.
func lrep(r router.Report, share float64) levers.Report {
	return levers.Report{Report: r, BillShare: share}
}

// TestChargeSharedAddsUp: the parts of an attempt billed to the sharers of
// one stream add up to the whole.
func TestChargeSharedAddsUp(t *testing.T) {
	lost := chat.Usage{InputTokens: 1001, OutputTokens: 7}
	var sum chat.Usage
	for i := range 3 {
		var r Record
		Prices{}.Charge(&r, chat.Usage{}, &levers.Report{Report: router.Report{Deployment: "b/m", Attempts: []router.Attempt{{Deployment: "a/m", Usage: &lost}}},
			BillShare: 1.0 / 3, BillPart: [2]int{i, 3}})
		u, _ := r.AttemptsTotal()
		sum.InputTokens += u.InputTokens
		sum.OutputTokens += u.OutputTokens
	}
	if sum != lost {
		t.Errorf("three parts add up to %+v, want %+v", sum, lost)
	}
}

// TestAttemptsReachTheRowLogAndTotals: the attempts' sums go to the usage
// row, the log line and the in-memory totals, apart from the answer's.
func TestAttemptsReachTheRowLogAndTotals(t *testing.T) {
	rec := &Record{RequestID: "a", Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Surface: "openai", Alias: "chat", Deployment: "b/m",
		Status: StatusComplete, Usage: chat.Usage{InputTokens: 12, OutputTokens: 5}, Cost: 0.5,
		Spent: []Spent{{Deployment: "a/m", Usage: chat.Usage{InputTokens: 900, OutputTokens: 3}, Cost: 0.25},
			{Deployment: "b/m", Usage: chat.Usage{InputTokens: 20, Estimated: true}, Cost: 0.125}}}

	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		w := newWriter(t, st, UsageOptions{})
		w.Record(context.Background(), rec)
		time.Sleep(usageLinger)
		synctest.Wait()
		want := []store.Usage{{RequestID: "a", TenantID: "local", Time: rec.Time, Surface: "openai", Model: "chat", Deployment: "b/m",
			Status: "complete", InputTokens: 12, OutputTokens: 5, Cost: 0.5,
			AttemptsInputTokens: 920, AttemptsOutputTokens: 3, AttemptsCost: 0.375}}
		rows, _ := st.written()
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
		w.Close()
	})

	var buf bytes.Buffer
	Log{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}.Record(context.Background(), rec)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"input_tokens": 12.0, "cost": 0.5, "attempts_input_tokens": 920.0, "attempts_output_tokens": 3.0,
		"attempts_estimated": true, "attempts_cost": 0.375} {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v", k, line[k], v)
		}
	}

	m := NewMemory(10)
	m.Record(context.Background(), rec)
	got := m.Totals()["chat"]
	if got.InputTokens != 12 || got.Cost != 0.5 || got.AttemptsInputTokens != 920 || got.AttemptsOutputTokens != 3 || got.AttemptsCost != 0.375 {
		t.Errorf("totals %+v", got)
	}
}
