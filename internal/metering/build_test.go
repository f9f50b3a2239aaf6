package metering

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/router"
)

// TestBuild checks the one builder of a request's record: who asked,
// what the levers and the router did, what was delivered, how it ended.
func TestBuild(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	prices := Prices{"b/m": {Input: 1, Output: 2}}
	served := router.Report{Alias: "chat", Deployment: "b/m", Model: "m", FirstToken: at(100),
		Attempts: []router.Attempt{{Deployment: "b/m", Start: at(10), Outcome: router.OutcomeOK}}}
	twice := served
	twice.Attempts = []router.Attempt{{Deployment: "a/m", Start: at(5), Outcome: router.OutcomeError, Status: 502}, served.Attempts[0]}
	reported := chat.Usage{InputTokens: 10, OutputTokens: 2}
	base := Record{
		RequestID: "req_1", Time: start, Surface: "chat_completions", Tenant: "t1", User: "u1", Alias: "chat",
		Deployment: "b/m", Model: "m", Stream: true, Status: StatusComplete, FinishReason: "stop",
		Usage: reported, Cost: 14 / 1e6, TTFT: 100 * time.Millisecond, TTFW: 120 * time.Millisecond, Total: 300 * time.Millisecond,
		Attempts: 1, StreamMs: 50, TraceID: "trace", TraceParent: "parent", CallStart: 10 * time.Millisecond,
	}
	tests := []struct {
		name   string
		rep    levers.Report
		usage  *chat.Usage // reported by the provider
		ending Ending
		want   func(*Record)
	}{
		{name: "complete", rep: levers.Report{Report: served, BillShare: 1}, usage: &reported, ending: Ending{Status: StatusComplete}},
		{
			name: "complete, usage not reported", rep: levers.Report{Report: served, BillShare: 1}, ending: Ending{Status: StatusComplete},
			want: func(r *Record) { r.UsageMissing = true },
		},
		{
			name: "a cache hit: nothing billed, no usage missing", rep: levers.Report{Report: served, Cached: true}, ending: Ending{Status: StatusComplete},
			want: func(r *Record) { r.Usage, r.Cost, r.Cached = chat.Usage{Estimated: true}, 0, true },
		},
		{
			name: "routed by a rule, after a fallback", rep: levers.Report{Report: twice, BillShare: 1, Rule: "short", Requested: "chat"}, usage: &reported, ending: Ending{Status: StatusComplete},
			want: func(r *Record) {
				r.Rule, r.RoutedTo, r.Attempts, r.Fallbacks, r.Route = "short", "chat", 2, 1, "a/m=error(502), b/m=ok"
				r.CallStart = 5 * time.Millisecond
			},
		},
		{
			name: "a first-token timeout, then the answer, with the request's fingerprint",
			rep: func() levers.Report {
				r := twice
				r.Attempts = []router.Attempt{{Deployment: "a/m", Start: at(5), Outcome: router.OutcomeFirstTokenTimeout}, served.Attempts[0]}
				return levers.Report{Report: r, BillShare: 1, Fingerprint: levers.Fingerprint{Repeat: 7, Prefix: 9, PrefixTokens: 300}}
			}(),
			usage: &reported, ending: Ending{Status: StatusComplete},
			want: func(r *Record) {
				r.Attempts, r.Fallbacks, r.Route, r.CallStart, r.FirstTokenTimeouts = 2, 1, "a/m=first_token_timeout, b/m=ok", 5*time.Millisecond, 1
				r.Fingerprint = levers.Fingerprint{Repeat: 7, Prefix: 9, PrefixTokens: 300}
			},
		},
		{
			name: "failed", rep: levers.Report{Report: served, BillShare: 1}, ending: Ending{Status: StatusError, ErrorCode: "upstream_error", Error: "boom"},
			want: func(r *Record) { r.Status, r.ErrorCode, r.Error = StatusError, "upstream_error", "boom" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := budget.New(start)
			rec.FirstWord(at(120))
			rec.Complete(at(300))
			var tl Tally
			tl.Add(&chat.Chunk{Model: "m"})
			tl.Add(&chat.Chunk{Text: "Hello"})
			tl.Last = tl.First.Add(50 * time.Millisecond)
			tl.Add(&chat.Chunk{FinishReason: chat.FinishStop, Usage: tt.usage})
			q := Request{ID: "req_1", Surface: "chat_completions", Tenant: "t1", User: "u1", Alias: "chat", Stream: true, Timings: rec, TraceID: "trace", TraceParent: "parent"}
			u := tl.Usage(&chat.Request{})
			got := prices.Build(q, &tt.rep, &tl, u, tt.ending)
			want := base
			if tt.usage == nil {
				want.Usage, want.Cost = u, prices.Cost("b/m", u)
			}
			if tt.want != nil {
				tt.want(&want)
			}
			if got.Timings != rec || got.Gaps != &tl.Gaps {
				t.Errorf("the record's timings %p and gaps %p, want the request's %p and the tally's %p", got.Timings, got.Gaps, rec, &tl.Gaps)
			}
			if diff := cmp.Diff(want, *got, cmpopts.IgnoreFields(Record{}, "Timings", "Gaps"), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
		})
	}
}
