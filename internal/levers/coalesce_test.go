package levers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/firstword/firstword/internal/chat"
)

// subscriber is one client of identical requests.
type subscriber struct {
	join       time.Duration // when it asks
	leaveAfter int           // it stops reading after this many chunks (0: never)
	end        time.Duration // its ctx ends then (0: never), with cause
	cause      error
}

// heard is what one subscriber got.
type heard struct {
	Chunks    []string // texts, or finish reasons in brackets
	Err       error
	Coalesced bool
	Share     float64
	Part      [2]int
}

// show renders chunks as texts, or finish reasons in brackets.
func show(chunks []chat.Chunk) []string {
	var out []string
	for _, c := range chunks {
		if c.FinishReason != "" {
			out = append(out, "["+string(c.FinishReason)+"]")
			continue
		}
		out = append(out, c.Text)
	}
	return out
}

// subscribe runs the subscribers of one question through l, each on its
// own goroutine, and returns what each heard. Call it in a synctest
// bubble.
func subscribe(t *testing.T, l *Levers, subs []subscriber) []heard {
	t.Helper()
	out := make([]heard, len(subs))
	var wg sync.WaitGroup
	for i, s := range subs {
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		if s.end > 0 {
			stop := time.AfterFunc(s.end, func() { cancel(s.cause) })
			defer stop.Stop()
		}
		wg.Go(func() {
			time.Sleep(s.join)
			rep := &Report{}
			chunks, _, err := read(ctx, l, question("chat", "Hi"), rep, s.leaveAfter)
			out[i] = heard{Chunks: show(chunks), Err: err, Coalesced: rep.Coalesced, Share: rep.BillShare, Part: rep.BillPart}
			if len(chunks) > 0 && (rep.Deployment != "dep" || rep.FirstToken.IsZero() || len(rep.Attempts) != 1) {
				t.Errorf("subscriber %d's report: %+v; want the router's", i, rep)
			}
		})
	}
	wg.Wait()
	synctest.Wait() // the flight's goroutine ends after its last client left
	return out
}

// coalescing are levers sharing alias chat's identical deterministic
// requests in flight, without a cache.
func coalescing(r Inner) *Levers {
	a := Alias{Coalesce: true}
	a.Cache.Enabled = true
	return New(Options{Inner: r, Aliases: map[string]Alias{"chat": a}})
}

// TestCoalesce checks identical requests in flight sharing one upstream
// stream: each subscriber reads it from the start at its own pace; one
// leaving (before or after the others) takes nothing from the others and
// is billed nothing, until the last leaves, which cancels the upstream
// and pays for it; those there at the end share the bill in equal parts;
// the upstream's error reaches all; a subscriber's own ctx ending ends its
// stream alone, cut with FinishTimeout at its deadline after the first
// text.
func TestCoalesce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ms := time.Millisecond
	full := []string{"Hel", "lo", "[stop]"}
	failure := chat.ProtocolError(errors.New("bad frame"))
	tests := []struct {
		name   string
		script []tick
		subs   []subscriber
		want   []heard
		cause  error // the upstream stream's ctx's as it ended
	}{
		{
			// The third joins after the first chunk: it is sent it too.
			name: "followers share one upstream", script: hello,
			subs: []subscriber{{}, {join: 50 * ms}, {join: 150 * ms}},
			want: []heard{
				{Chunks: full, Share: 1.0 / 3, Part: [2]int{0, 3}},
				{Chunks: full, Coalesced: true, Share: 1.0 / 3, Part: [2]int{1, 3}},
				{Chunks: full, Coalesced: true, Share: 1.0 / 3, Part: [2]int{2, 3}},
			},
		},
		{
			name: "a follower leaves", script: hello,
			subs: []subscriber{{}, {join: 50 * ms, leaveAfter: 1}},
			want: []heard{
				{Chunks: full, Share: 1, Part: [2]int{0, 1}},
				{Chunks: []string{"Hel"}, Coalesced: true},
			},
		},
		{
			// The upstream outlives the client that started it.
			name: "the leader leaves", script: hello,
			subs: []subscriber{{leaveAfter: 1}, {join: 50 * ms}},
			want: []heard{
				{Chunks: []string{"Hel"}},
				{Chunks: full, Coalesced: true, Share: 1, Part: [2]int{0, 1}},
			},
		},
		{
			// The last to leave cancels the upstream and pays for it.
			name: "everyone leaves", script: hello,
			subs: []subscriber{{leaveAfter: 1}, {join: 50 * ms, leaveAfter: 1}},
			want: []heard{
				{Chunks: []string{"Hel"}, Share: 0},
				{Chunks: []string{"Hel"}, Coalesced: true, Share: 1},
			},
			cause: errEveryoneLeft,
		},
		{
			name:   "the upstream fails",
			script: []tick{{after: 100 * ms, chunk: chat.Chunk{Text: "Hel"}}, {after: 100 * ms, err: failure}},
			subs:   []subscriber{{}, {join: 50 * ms}},
			want: []heard{
				{Chunks: []string{"Hel"}, Err: failure, Share: 0.5, Part: [2]int{0, 2}},
				{Chunks: []string{"Hel"}, Err: failure, Coalesced: true, Share: 0.5, Part: [2]int{1, 2}},
			},
		},
		{
			name: "a follower's client leaves before the text", script: hello,
			subs: []subscriber{{}, {join: 50 * ms, end: 80 * ms, cause: context.Canceled}},
			want: []heard{
				{Chunks: full, Share: 1, Part: [2]int{0, 1}},
				{Err: context.Canceled, Coalesced: true},
			},
		},
		{
			name: "a follower's deadline after the text", script: hello,
			subs: []subscriber{{}, {join: 50 * ms, end: 150 * ms, cause: chat.ErrDeadline}},
			want: []heard{
				{Chunks: full, Share: 1, Part: [2]int{0, 1}},
				{Chunks: []string{"Hel", "[timeout]"}, Coalesced: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &scripted{script: tt.script}
				l := coalescing(r)
				got := subscribe(t, l, tt.subs)
				// Those that finish together take the parts in any
				// order, and which leaves last (and pays) is up to the
				// scheduler: the bills are compared as a whole.
				wantBills, gotBills := bills(tt.want), bills(got)
				if diff := cmp.Diff(wantBills, gotBills, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
					t.Errorf("bills (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.want, got, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("subscribers heard (-want +got):\n%s", diff)
				}
				reqs, _, causes := r.calls()
				if len(reqs) != 1 {
					t.Errorf("the router was sent %d requests, want 1", len(reqs))
				}
				if diff := cmp.Diff([]error{tt.cause}, causes, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("the upstream's ctx ended with (-want +got):\n%s", diff)
				}
				if len(l.flights) != 0 {
					t.Errorf("%d flights left", len(l.flights))
				}
			})
		})
	}
}

// bill is what one subscriber is billed of the shared stream.
type bill struct {
	Share float64
	Part  [2]int
}

// bills takes the subscribers' bills out of hs (leaving their parts'
// totals) and returns them in order.
func bills(hs []heard) []bill {
	var out []bill
	for i := range hs {
		out = append(out, bill{hs[i].Share, hs[i].Part})
		hs[i].Share, hs[i].Part[0] = 0, 0
	}
	slices.SortFunc(out, func(a, b bill) int {
		switch {
		case a.Share < b.Share:
			return -1
		case a.Share > b.Share:
			return 1
		}
		return a.Part[0] - b.Part[0]
	})
	return out
}

// TestCoalesceLeaveAfterTheEnd: a subscriber that stops reading after the
// flight finished (it was still reading what the flight holds) takes
// nothing from the others, and cancels nothing; it was there at the end,
// so it is billed its part, and the parts add up to the one upstream
// answer.
func TestCoalesceLeaveAfterTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &scripted{script: hello}
		l := coalescing(r)
		var wg sync.WaitGroup
		var leader []chat.Chunk
		var leaderRep, followerRep Report
		wg.Go(func() { leader, _, _ = read(t.Context(), l, question("chat", "Hi"), &leaderRep, 0) })
		wg.Go(func() {
			time.Sleep(50 * time.Millisecond)
			for _, err := range streamReport(l, t.Context(), question("chat", "Hi"), &followerRep) {
				if err != nil {
					t.Errorf("the follower: %v", err)
				}
				time.Sleep(time.Second) // the flight ends meanwhile
				break
			}
		})
		wg.Wait()
		synctest.Wait()
		if diff := cmp.Diff([]string{"Hel", "lo", "[stop]"}, show(leader)); diff != "" {
			t.Errorf("the leader heard (-want +got):\n%s", diff)
		}
		reqs, _, causes := r.calls()
		if len(reqs) != 1 || len(causes) != 1 || causes[0] != nil || len(l.flights) != 0 {
			t.Errorf("%d requests to the router, ended with %v, %d flights left; want 1, nil, 0", len(reqs), causes, len(l.flights))
		}
		if s := leaderRep.BillShare + followerRep.BillShare; s != 1 || leaderRep.BillPart[0] == followerRep.BillPart[0] || followerRep.BillPart[1] != 2 {
			t.Errorf("billed %v %v and %v %v: want a half each, parts 0 and 1 of 2", leaderRep.BillShare, leaderRep.BillPart, followerRep.BillShare, followerRep.BillPart)
		}
		if followerRep.Deployment == "" {
			t.Errorf("the follower's report has no deployment: its part would be priced at nothing")
		}
	})
}

// TestCoalesceDeadline: the shared upstream has the deadline of the
// request that started it, but not its cancellation.
func TestCoalesceDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &scripted{script: hello}
		l := coalescing(r)
		deadline := time.Now().Add(time.Second)
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		defer cancel()
		if _, _, err := read(ctx, l, question("chat", "Hi"), nil, 0); err != nil {
			t.Fatal(err)
		}
		_, deadlines, _ := r.calls()
		if len(deadlines) != 1 || !deadlines[0].Equal(deadline) {
			t.Errorf("the upstream's deadline %v, want %v", deadlines, deadline)
		}
	})
}

// TestCoalesceStores: a shared answer is stored once, before anyone is
// told it finished; a request after it is a hit, not a new flight.
func TestCoalesceStores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &mapCache{}
		r := &scripted{script: hello}
		a := Alias{Coalesce: true}
		a.Cache.Enabled = true
		l := New(Options{Inner: r, Cache: c, Aliases: map[string]Alias{"chat": a}})
		subscribe(t, l, []subscriber{{}, {join: 50 * time.Millisecond}})
		rep := &Report{}
		chunks, _, err := read(t.Context(), l, question("chat", "Hi"), rep, 0)
		if diff := cmp.Diff([]string{"Hel", "lo", "[stop]"}, show(chunks)); diff != "" || err != nil || !rep.Cached {
			t.Errorf("after the flight: cached %v, %v (-want +got):\n%s", rep.Cached, err, diff)
		}
		l.Flush(t.Context())
		if reqs, _, _ := r.calls(); len(reqs) != 1 || c.writes() != 1 {
			t.Errorf("the router was sent %d requests, the cache %d writes; want 1 and 1", len(reqs), c.writes())
		}
	})
}

// TestCoalesceAfterTheFlight: a request after the flight ended starts its
// own, without a cache.
func TestCoalesceAfterTheFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &scripted{script: hello}
		l := coalescing(r)
		for range 2 {
			if _, _, err := read(t.Context(), l, question("chat", "Hi"), nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		if reqs, _, _ := r.calls(); len(reqs) != 2 {
			t.Errorf("the router was sent %d requests, want 2", len(reqs))
		}
	})
}
