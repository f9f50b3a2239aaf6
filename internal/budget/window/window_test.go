package window

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

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

// TestShareOfTTFW: a stage's share of TTFW is the median, over the
// requests that had a first word and ran the stage, of the stage's time
// before the first word over that request's TTFW. It is never over 1,
// whatever the mix of requests; parallel stages each keep their own share.
func TestShareOfTTFW(t *testing.T) {
	type stage struct {
		name       string
		start, end time.Duration
		group      bool
	}
	type request struct {
		ttfw   time.Duration // 0: no first word (a failure)
		stages []stage
	}
	ms := time.Millisecond
	hit := request{5 * ms, []stage{{"parse", 0, 1 * ms, false}, {"cache", 1 * ms, 4 * ms, false}}}
	miss := request{500 * ms, []stage{{"parse", 0, 1 * ms, false}, {"cache", 1 * ms, 4 * ms, false}, {"ttft", 10 * ms, 490 * ms, false}}}
	for _, tt := range []struct {
		name     string
		requests []request
		want     map[string]float64 // stages not named: no share
	}{
		{
			// TTFW's p50 is a cache hit's; the ttft stage's p50 a miss's:
			// their quotient was 96 (9600%).
			name:     "cache hits and misses",
			requests: []request{hit, hit, hit, miss, miss},
			want:     map[string]float64{"parse": 0.2, "cache": 0.6, "ttft": 0.96},
		},
		{
			// Failures without a first word made the stage's p50 large
			// while TTFW's stayed small: their quotient was 30.
			name: "failures before the first word",
			requests: []request{
				{20 * ms, []stage{{"ttft", 10 * ms, 20 * ms, false}}},
				{30 * ms, []stage{{"ttft", 10 * ms, 30 * ms, false}}},
				{1000 * ms, []stage{{"ttft", 100 * ms, 1000 * ms, false}}},
				{0, []stage{{"ttft", 10 * ms, 5000 * ms, false}}},
				{0, []stage{{"ttft", 10 * ms, 5000 * ms, false}}},
			},
			want: map[string]float64{"ttft": 0.667},
		},
		{
			name: "a stage repeated by retries counts once, in full",
			requests: []request{{200 * ms, []stage{
				{"wait sim/small", 0, 40 * ms, false},
				{"wait sim/small", 50 * ms, 90 * ms, false},
				{"ttft", 100 * ms, 190 * ms, false},
			}}},
			want: map[string]float64{"wait sim/small": 0.4, "ttft": 0.45},
		},
		{
			name: "parallel stages overlap",
			requests: []request{{100 * ms, []stage{
				{"history", 0, 80 * ms, false},
				{"retrieval", 0, 90 * ms, false},
				{"context", 0, 90 * ms, true},
			}}},
			want: map[string]float64{"history": 0.8, "retrieval": 0.9, "context": 0.9},
		},
		{
			name: "only the part before the first word counts",
			requests: []request{{100 * ms, []stage{
				{"upstream sim/small", 10 * ms, 300 * ms, true},
				{"generation", 100 * ms, 300 * ms, false},
				{"persist", 300 * ms, 302 * ms, false},
			}}},
			want: map[string]float64{"upstream sim/small": 0.9},
		},
		{
			name: "hedged attempts of one name at once",
			requests: []request{{100 * ms, []stage{
				{"upstream a", 10 * ms, 100 * ms, true},
				{"upstream a", 20 * ms, 100 * ms, true},
			}}},
			want: map[string]float64{"upstream a": 1},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := New(time.Minute, Targets{}, 10)
			now := time.Now()
			for i, r := range tt.requests {
				start := now.Add(-10 * time.Second)
				rec := budget.New(start)
				for _, s := range r.stages {
					if s.group {
						rec.AddGroup(s.name, start.Add(s.start), start.Add(s.end), "")
					} else {
						rec.Add(s.name, start.Add(s.start), start.Add(s.end), "")
					}
				}
				status := "error"
				if r.ttfw > 0 {
					rec.FirstWord(start.Add(r.ttfw))
					status = "complete"
				}
				w.Observe(now, fmt.Sprint(i), "", "", "chat", "m", status, rec)
			}
			rep := w.Report(now, "", "", "", 0)
			got := map[string]float64{}
			for _, r := range rep.Stages {
				if r.ShareOfTTFW > 1 {
					t.Errorf("%s: share of TTFW %.3f, over 1", r.Name, r.ShareOfTTFW)
				}
				if r.ShareOfTTFW != 0 {
					got[r.Name] = r.ShareOfTTFW
				}
			}
			// The median comes from a sketch with 1% relative error.
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0.011, 0.0005)); diff != "" {
				t.Errorf("shares of TTFW (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReportCreatesNothing: asking for scopes nobody used (a tenant name
// in a query) keeps no state.
func TestReportCreatesNothing(t *testing.T) {
	w := New(time.Minute, Targets{}, 10)
	now := time.Now()
	for i := range 100 {
		w.Report(now, fmt.Sprint("tenant-", i), "", "", 0)
	}
	if n := len(w.slots); n != 0 {
		t.Errorf("%d scopes kept after reports alone", n)
	}
}

// TestThinking: the time to the first thought and the thinking time are
// over the requests whose model thought; thinking's share of TTFW is the
// median of each one's thinking over its TTFW, and a request that did
// not think counts in neither.
func TestThinking(t *testing.T) {
	w := New(time.Minute, Targets{}, 10)
	now := time.Now()
	ms := time.Millisecond
	for i, r := range []struct{ thought, thinking, ttfw time.Duration }{
		{200 * ms, 600 * ms, 1000 * ms},
		{300 * ms, 1200 * ms, 2000 * ms},
		{100 * ms, 300 * ms, 500 * ms},
		{0, 0, 100 * ms}, // did not think
	} {
		start := now.Add(-10 * time.Second)
		rec := budget.New(start)
		if r.thought > 0 {
			rec.Thought(start.Add(r.thought), r.thinking)
		}
		rec.FirstWord(start.Add(r.ttfw))
		w.Observe(now, fmt.Sprint(i), "", "", "chat", "m", "complete", rec)
	}
	rep := w.Report(now, "", "", "", 10)
	approx := cmpopts.EquateApprox(0.011, 0.0005)
	if rep.TTFThought.Count != 3 || !cmp.Equal(rep.TTFThought.P50, 200.0, approx) {
		t.Errorf("ttfthought %+v, want 3 requests, p50 200ms", rep.TTFThought)
	}
	if rep.Thinking.Count != 3 || !cmp.Equal(rep.Thinking.P50, 600.0, approx) || !cmp.Equal(rep.Thinking.ShareOfTTFW, 0.6, approx) {
		t.Errorf("thinking %+v, want 3 requests, p50 600ms, 60%% of TTFW", rep.Thinking)
	}
	if rep.TTFW.Count != 4 {
		t.Errorf("ttfw %+v, want all 4 requests", rep.TTFW)
	}
	if r := rep.Recent[0]; r.TTFThoughtMs != 200 || r.ThinkingMs != 600 {
		t.Errorf("recent %+v, want its thought at 200ms, thinking 600ms", r)
	}
	if rep := New(time.Minute, Targets{}, 10).Report(now, "", "", "", 0); rep.TTFThought.Count != 0 || rep.Thinking.Count != 0 {
		t.Errorf("empty window: %+v", rep)
	}
}
