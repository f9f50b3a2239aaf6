package yardstick

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedirectNotFollowed: a target that redirects elsewhere is counted as
// http_3xx, and the place it points at receives nothing (neither the
// request nor the key).
func TestRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	other := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	redirecting := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, other+"/v1/chat/completions", http.StatusTemporaryRedirect)
	}))
	tg := &Target{Name: "r", URL: redirecting + "/v1/chat/completions"}
	tg.SetAPIKey("sk-redirect-key")
	rep, err := Run(t.Context(), Options{Targets: []*Target{tg}, Concurrency: []int{1}, Requests: 2, Rounds: 1,
		MaxTime: time.Minute, RequestTimeout: 5 * time.Second, Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cellOf(t, rep, "r", 1); c.OK != 0 || c.Errors["http_3xx"] != 2 {
		t.Errorf("redirecting target: ok %d, errors %v; want 2 http_3xx", c.OK, c.Errors)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's destination received %d requests", n)
	}
}

// TestConcurrencyReached: with the default five rounds and fewer requests
// per round than the level, the level still has conc requests in flight
// at once: the target answers none until conc have arrived, and the
// report records the peak.
func TestConcurrencyReached(t *testing.T) {
	const conc = 10
	var mu sync.Mutex
	arrived, serverPeak, now := 0, 0, 0
	gate := make(chan struct{})
	target := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		arrived++
		now++
		serverPeak = max(serverPeak, now)
		g := gate
		if arrived%conc == 0 {
			close(gate)
			gate = make(chan struct{})
		}
		mu.Unlock()
		select {
		case <-g:
		case <-time.After(5 * time.Second): // the level never got conc in flight: the assertions below say so
		}
		mu.Lock()
		now--
		mu.Unlock()
		chatTarget(0, 0, 2)(w, r)
	})
	rep, err := Run(t.Context(), Options{Targets: []*Target{{Name: "c", URL: serve(t, target) + "/v1/chat"}}, Concurrency: []int{conc},
		Requests: 20, Rounds: 5, MaxTime: time.Minute, RequestTimeout: 10 * time.Second, Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cellOf(t, rep, "c", conc); c.PeakInFlight != conc || c.OK != 20 {
		t.Errorf("concurrency %d: peak in flight %d, %d/20 ok", conc, c.PeakInFlight, c.OK)
	}
	mu.Lock()
	defer mu.Unlock()
	if serverPeak != conc {
		t.Errorf("the target saw at most %d requests at once, want %d", serverPeak, conc)
	}
	if err := (&Options{Targets: []*Target{{Name: "c", URL: "http://127.0.0.1:1"}}, Concurrency: []int{50}, Requests: 20, Rounds: 1,
		MaxTime: time.Minute}).Check(); err == nil {
		t.Error("concurrency 50 with 20 requests accepted")
	}
}

// TestCutAnswersAreErrors: a /v1/chat answer that ends with done status
// timeout, and a Responses answer that ends with response.incomplete, are
// counted as errors of their own kinds, not as successes.
func TestCutAnswersAreErrors(t *testing.T) {
	timedOut := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: meta\ndata: {}\n\nevent: delta\ndata: {\"text\":\" partial\"}\n\nevent: done\ndata: {\"status\":\"timeout\",\"finish_reason\":\"timeout\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}\n\n")
	})
	incomplete := newReplay(t, "../../wire/responses/testdata/constructed_reasoning_incomplete.sse",
		func(e []byte) bool { return bytes.Contains(e, []byte("output_text.delta")) }, 0, 0)
	complete := newReplay(t, "upstream_phase_text.sse", func(e []byte) bool { return bytes.Contains(e, []byte("output_text.delta")) }, 0, 0)
	rep, err := Run(t.Context(), Options{Targets: []*Target{
		{Name: "timeout", URL: serve(t, timedOut) + "/v1/chat"},
		{Name: "incomplete", URL: serve(t, incomplete) + "/v1/responses"},
		{Name: "complete", URL: serve(t, complete) + "/v1/responses"},
	}, Concurrency: []int{1}, Requests: 2, Rounds: 1, MaxTime: time.Minute, RequestTimeout: 5 * time.Second, Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	for name, kind := range map[string]string{"timeout": "done_timeout", "incomplete": "incomplete"} {
		if c := cellOf(t, rep, name, 1); c.OK != 0 || c.Errors[kind] != 2 {
			t.Errorf("%s: %d ok, errors %v; want 2 %s", name, c.OK, c.Errors, kind)
		}
	}
	if c := cellOf(t, rep, "complete", 1); c.OK != 2 {
		t.Errorf("complete: %d ok, errors %v", c.OK, c.Errors)
	}
}

// TestInputChecks: rates bench cannot pace, a request timeout that is not
// positive and fault settings out of range are refused, not run.
func TestInputChecks(t *testing.T) {
	for _, bad := range []func(*Options){
		func(o *Options) { o.Rate = 1e-300 },
		func(o *Options) { o.Rate = math.NaN() },
		func(o *Options) { o.Rate = math.Inf(1) },
		func(o *Options) { o.RequestTimeout = 0 },
		func(o *Options) { o.FaultProbes = -1 },
		func(o *Options) { o.Upstream, o.FaultProbes, o.CancelWait = &Upstream{}, 1, 0 },
	} {
		o := Options{Targets: []*Target{{Name: "a", URL: "http://127.0.0.1:1"}}, Concurrency: []int{1}, Requests: 1, Rounds: 1,
			MaxTime: time.Minute, RequestTimeout: time.Second}
		bad(&o)
		if _, err := Run(t.Context(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestFaultProbesWithinMaxTime: the fault probes stop at --max-time, and
// the report says the run was cut.
func TestFaultProbesWithinMaxTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	up, err := StartUpstream(ctx, "127.0.0.1:0", Pace{Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	tg := &Target{Name: "holds-on", URL: fakeGateway(t, up.URL, false, "data: [DONE]\n\n") + "/v1/chat/completions"}
	t.Cleanup(func() { cancel(); up.Close() })
	rep, err := Run(context.Background(), Options{Targets: []*Target{tg}, Concurrency: []int{1}, Requests: 1, Rounds: 1,
		MaxTime: 2 * time.Second, RequestTimeout: 5 * time.Second, Prompt: "hi", Upstream: up, FaultProbes: 1000, CancelWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Truncated || len(rep.Faults) != 1 || rep.Faults[0].CancelMid.Probes == 0 || rep.Faults[0].CancelMid.Probes >= 1000 {
		t.Errorf("truncated %v, faults %+v: want some of the 1000 probes, cut by --max-time", rep.Truncated, rep.Faults)
	}
}

// TestCutRunMeasuresEveryTarget: a --duration far past --max-time still
// measures every target at every level, in short alternating rounds, and
// the report says the run was cut.
func TestCutRunMeasuresEveryTarget(t *testing.T) {
	var targets []*Target
	for _, name := range []string{"a", "b", "c"} {
		targets = append(targets, &Target{Name: name, URL: serve(t, chatTarget(time.Millisecond, time.Millisecond, 2)) + "/v1/chat"})
	}
	rep, err := Run(t.Context(), Options{Targets: targets, Concurrency: []int{1, 2}, Duration: time.Hour, Rounds: 2,
		MaxTime: 2 * time.Second, RequestTimeout: 5 * time.Second, Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Truncated || rep.Interrupted {
		t.Errorf("truncated %v, interrupted %v: want truncated only", rep.Truncated, rep.Interrupted)
	}
	for _, name := range []string{"a", "b", "c"} {
		for _, conc := range []int{1, 2} {
			if c := cellOf(t, rep, name, conc); c.OK == 0 || c.OK != c.Requests {
				t.Errorf("%s@%d: %d/%d ok", name, conc, c.OK, c.Requests)
			}
		}
	}
}

// TestInterruptedRun: a run stopped by its caller's context is reported as
// interrupted, not as cut by --max-time, with only whole-for-every-target
// levels.
func TestInterruptedRun(t *testing.T) {
	ctx, stop := context.WithCancel(t.Context())
	var n atomic.Int64
	stopping := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 3 {
			stop()
		}
		chatTarget(0, 0, 2)(w, r)
	})
	rep, err := Run(ctx, Options{Targets: []*Target{{Name: "a", URL: serve(t, chatTarget(0, 0, 2)) + "/v1/chat"}, {Name: "b", URL: serve(t, stopping) + "/v1/chat"}},
		Concurrency: []int{1}, Requests: 100, Rounds: 5, MaxTime: time.Minute, RequestTimeout: 5 * time.Second, Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted || rep.Truncated {
		t.Errorf("interrupted %v, truncated %v: want interrupted only", rep.Interrupted, rep.Truncated)
	}
	// a's first round of 20 was whole, b was stopped in its first.
	if len(rep.Cells) != 2 {
		t.Errorf("%d cells, want a and b at level 1", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if !c.Partial {
			t.Errorf("%s@%d: not marked partial", c.Target, c.Concurrency)
		}
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "interrupted") || strings.Contains(table.String(), "--max-time") {
		t.Errorf("table:\n%s", table.String())
	}
}
