package yardstick

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fakeGateway relays OpenAI Chat Completions streams to upstream byte for
// byte. With cancels, the upstream request carries the client's context
// (as httputil.ReverseProxy does); without, it outlives the client and
// is read to its end. When the upstream breaks, it ends the client's
// stream with onDrop.
func fakeGateway(t *testing.T, upstream string, cancels bool, onDrop string) string {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if !cancels {
			ctx = context.WithoutCancel(ctx)
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", upstream+"/v1/chat/completions", r.Body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr == nil {
					rc.Flush()
				} else if cancels {
					return
				}
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				io.WriteString(w, onDrop)
				rc.Flush()
				return
			}
		}
	}))
}

// TestFaultColumns: through the fake upstream, a gateway that passes the
// client's leaving on is seen to cancel, mid-stream and before the first
// token, and one that does not is seen not to; a gateway that ends a
// dropped stream with an error event, and one that ends it with [DONE],
// are told apart.
func TestFaultColumns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	up, err := StartUpstream(ctx, "127.0.0.1:0", Pace{TTFT: 5 * time.Millisecond, Gap: time.Millisecond, Chunks: 5})
	if err != nil {
		t.Fatal(err)
	}
	errorEvent := `data: {"error":{"message":"upstream dropped","type":"server_error"}}` + "\n\n"
	targets := []*Target{
		{Name: "cancels", URL: fakeGateway(t, up.URL, true, errorEvent) + "/v1/chat/completions"},
		{Name: "holds-on", URL: fakeGateway(t, up.URL, false, "data: [DONE]\n\n") + "/v1/chat/completions"},
		{Name: "direct", URL: up.URL + "/v1/chat/completions"},
	}
	// Registered after the gateways: runs first, so the upstream's held
	// streams end before the gateways' servers wait for their handlers.
	t.Cleanup(func() { cancel(); up.Close() })
	rep, err := Run(context.Background(), Options{
		Targets: targets, Concurrency: []int{2}, Requests: 4, Rounds: 2, MaxTime: time.Minute,
		RequestTimeout: 10 * time.Second, MaxTokens: 16, Prompt: "hi", BunchAfter: 5 * time.Millisecond,
		Upstream: up, FaultProbes: 2, CancelWait: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	faults := map[string]Faults{}
	for _, f := range rep.Faults {
		faults[f.Target] = f
	}
	for _, tc := range []struct {
		target  string
		cancels bool
		drop    string
	}{{"cancels", true, "error_event"}, {"holds-on", false, "fake_success"}, {"direct", true, "cut"}} {
		f := faults[tc.target]
		for what, c := range map[string]CancelResult{"mid-stream": f.CancelMid, "before the first token": f.CancelBefore} {
			want := 0
			if tc.cancels {
				want = 2
			}
			if c.Probes != 2 || c.Cancelled != want || c.NotReached != 0 {
				t.Errorf("%s, cancel %s: %+v, want 2 probes, %d cancelled", tc.target, what, c, want)
			}
			if tc.cancels && (c.P50 <= 0 || c.Max >= 1000) {
				t.Errorf("%s, cancel %s: took p50 %.3f ms, max %.3f ms", tc.target, what, c.P50, c.Max)
			}
		}
		if f.Drop.Probes != 2 || f.Drop.Outcomes[tc.drop] != 2 {
			t.Errorf("%s, upstream drop: %+v, want %s twice", tc.target, f.Drop, tc.drop)
		}
	}
	var table strings.Builder
	rep.WriteTable(&table)
	for _, want := range []string{"NO (0/2)", "yes 2/2", "fake_success 2 (of 2)", "error_event 2 (of 2)"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestFaultsNotViaUpstream: a target that does not call the fake upstream
// is reported as such, not as one that does not cancel.
func TestFaultsNotViaUpstream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up, err := StartUpstream(ctx, "127.0.0.1:0", Pace{Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	other := serve(t, chatTarget(time.Millisecond, time.Millisecond, 3))
	tg := &Target{Name: "elsewhere", URL: other + "/v1/chat"}
	if err := tg.Resolve(); err != nil {
		t.Fatal(err)
	}
	f := measureFaults(ctx, tg, up, clientFor(2), 1, 100*time.Millisecond, 16)
	if f.CancelMid.Probes != 0 || f.CancelMid.NotReached != 1 || f.CancelMid.String() != "not via the upstream" {
		t.Errorf("cancel mid-stream: %+v %q", f.CancelMid, f.CancelMid)
	}
	// The target answered cleanly, but not about a drop it never saw.
	if f.Drop.Probes != 1 || f.Drop.Outcomes["fake_success"] != 0 || f.Drop.String() != "not via the upstream" {
		t.Errorf("upstream drop: %+v %q", f.Drop, f.Drop)
	}
}
