package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/firstword/firstword/internal/store"
)

func testLimitOverrides(t *testing.T, s store.Store) {
	ctx := t.Context()
	if got, err := s.ListLimitOverrides(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ListLimitOverrides on an empty store = %v, %v; want none", got, err)
	}
	put := func(scope, id, settings string, at time.Time) {
		t.Helper()
		if err := s.PutLimitOverride(ctx, &store.LimitOverride{Scope: scope, SubjectID: id, Settings: []byte(settings), UpdatedAt: at}); err != nil {
			t.Fatalf("PutLimitOverride(%s %s) = %v", scope, id, err)
		}
	}
	put(store.ScopeTenant, "acme", `{"requests_per_minute":5}`, at(0))
	put(store.ScopeKey, "k1", `{"usd_per_day":2.5}`, at(time.Second))
	put(store.ScopeTenant, "acme", `{"requests_per_minute":7}`, at(2*time.Second)) // replaces
	got, err := s.ListLimitOverrides(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.LimitOverride{
		{Scope: store.ScopeKey, SubjectID: "k1", Settings: []byte(`{"usd_per_day":2.5}`), UpdatedAt: at(time.Second)},
		{Scope: store.ScopeTenant, SubjectID: "acme", Settings: []byte(`{"requests_per_minute":7}`), UpdatedAt: at(2 * time.Second)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListLimitOverrides (-want +got):\n%s", diff)
	}
	if err := s.DeleteLimitOverride(ctx, store.ScopeKey, "k1"); err != nil {
		t.Fatalf("DeleteLimitOverride = %v", err)
	}
	if err := s.DeleteLimitOverride(ctx, store.ScopeKey, "k1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteLimitOverride of a missing one = %v, want ErrNotFound", err)
	}
	if got, _ := s.ListLimitOverrides(ctx); len(got) != 1 || got[0].SubjectID != "acme" {
		t.Errorf("after the delete: %+v, want acme's alone", got)
	}
}

func testUsageSpendAndReport(t *testing.T, s store.Store) {
	ctx := t.Context()
	day1 := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	rows := []store.Usage{
		{TenantID: "acme", KeyID: "k1", Model: "fast", Time: day1.Add(-time.Microsecond), InputTokens: 1000, Cost: 9}, // before since
		{TenantID: "acme", KeyID: "k1", Model: "fast", Time: day1, InputTokens: 10, OutputTokens: 20, Cost: 0.5,
			AttemptsInputTokens: 4, AttemptsOutputTokens: 1, AttemptsCost: 0.25, Status: "complete", TTFWMs: 100},
		{TenantID: "acme", KeyID: "k1", Model: "fast", Time: day1.Add(time.Hour), InputTokens: 1, OutputTokens: 2, Cost: 0.125, Status: "error"},
		{TenantID: "acme", KeyID: "k2", Model: "fast", Time: day1.Add(2 * time.Hour), InputTokens: 5, OutputTokens: 5, Cost: 1, Status: "complete", TTFWMs: 300},
		{TenantID: "acme", KeyID: "k1", Model: "fast", Time: day2, InputTokens: 3, OutputTokens: 4, Cost: 2, Status: "timeout", TTFWMs: 50},
		{TenantID: "globex", Model: "smart", Time: day2.Add(time.Hour), InputTokens: 7, OutputTokens: 8, Cost: 0, Status: "complete"},
	}
	// Twenty requests on one more key, to pin the p95's nearest rank.
	for i := range 20 {
		rows = append(rows, store.Usage{TenantID: "initech", KeyID: "k9", Model: "fast", Time: day1.Add(time.Duration(i) * time.Minute),
			Status: "complete", TTFWMs: float64(i + 1)})
	}
	var us []*store.Usage
	for i := range rows {
		rows[i].RequestID, rows[i].Surface, rows[i].UserID = fmt.Sprint("s", i), "openai", "u"
		us = append(us, &rows[i])
	}
	if err := s.RecordUsage(ctx, us...); err != nil {
		t.Fatal(err)
	}
	spend, err := s.UsageSpend(ctx, day1)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.SpendSum{
		{TenantID: "acme", KeyID: "k1", Day: "2025-03-14", Requests: 2, Tokens: 10 + 20 + 4 + 1 + 1 + 2, Cost: 0.5 + 0.25 + 0.125},
		{TenantID: "acme", KeyID: "k2", Day: "2025-03-14", Requests: 1, Tokens: 10, Cost: 1},
		{TenantID: "initech", KeyID: "k9", Day: "2025-03-14", Requests: 20},
		{TenantID: "acme", KeyID: "k1", Day: "2025-03-15", Requests: 1, Tokens: 7, Cost: 2},
		{TenantID: "globex", KeyID: "", Day: "2025-03-15", Requests: 1, Tokens: 15},
	}
	if diff := cmp.Diff(want, spend); diff != "" {
		t.Errorf("UsageSpend (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		f    store.UsageFilter
		want []store.UsageRow
	}{
		{"one key", store.UsageFilter{KeyID: "k1", From: day1}, []store.UsageRow{
			{TenantID: "acme", KeyID: "k1", Model: "fast", Day: "2025-03-14", Requests: 2, Errors: 1, InputTokens: 11, OutputTokens: 22, Cost: 0.625, AttemptsCost: 0.25, TTFWP95Ms: 100},
			{TenantID: "acme", KeyID: "k1", Model: "fast", Day: "2025-03-15", Requests: 1, Errors: 1, InputTokens: 3, OutputTokens: 4, Cost: 2, TTFWP95Ms: 50},
		}},
		{"a tenant and a window", store.UsageFilter{TenantID: "acme", From: day1, To: day2}, []store.UsageRow{
			{TenantID: "acme", KeyID: "k1", Model: "fast", Day: "2025-03-14", Requests: 2, Errors: 1, InputTokens: 11, OutputTokens: 22, Cost: 0.625, AttemptsCost: 0.25, TTFWP95Ms: 100},
			{TenantID: "acme", KeyID: "k2", Model: "fast", Day: "2025-03-14", Requests: 1, InputTokens: 5, OutputTokens: 5, Cost: 1, TTFWP95Ms: 300},
		}},
		{"a model", store.UsageFilter{Model: "smart"}, []store.UsageRow{
			{TenantID: "globex", Model: "smart", Day: "2025-03-15", Requests: 1, InputTokens: 7, OutputTokens: 8},
		}},
		// ceil(0.95 × 20) = 19th of 1..20 ms.
		{"p95 by nearest rank", store.UsageFilter{TenantID: "initech"}, []store.UsageRow{
			{TenantID: "initech", KeyID: "k9", Model: "fast", Day: "2025-03-14", Requests: 20, TTFWP95Ms: 19},
		}},
		{"nothing", store.UsageFilter{TenantID: "nobody"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.UsageReport(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("UsageReport(%+v) (-want +got):\n%s", tc.f, diff)
			}
		})
	}
}
