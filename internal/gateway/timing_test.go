package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestNoBunching: the gaps the upstream put between its chunks reach the
// client intact; no two chunks arrive together.
func TestNoBunching(t *testing.T) {
	const gap = 30 * time.Millisecond
	const n = 20
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		gatewaytest.SSEHeaders(w)
		for i := range n {
			if i > 0 {
				time.Sleep(gap)
			}
			gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON(fmt.Sprintf("t%d ", i)))
		}
		gatewaytest.SSEWrite(w, gatewaytest.FinishJSON)
	})
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig, up.URL)
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	var arrivals []time.Time
	for _, ev := range gatewaytest.ReadEvents(resp.Body) {
		if strings.Contains(ev.Data, `"content":"t`) {
			arrivals = append(arrivals, ev.At)
		}
	}
	if len(arrivals) != n {
		t.Fatalf("got %d content chunks, want %d", len(arrivals), n)
	}
	for i := 1; i < n; i++ {
		if d := arrivals[i].Sub(arrivals[i-1]); d < gap/2 {
			t.Errorf("chunks %d and %d arrived %v apart, want about %v (bunched)", i-1, i, d, gap)
		}
	}
}

// TestHeartbeat: while the upstream is silent (a long TTFT, or a stall
// mid-stream) the client gets comment heartbeats, so idle-timeout proxies
// keep the stream open; the first heartbeat commits the response.
func TestHeartbeat(t *testing.T) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(450 * time.Millisecond)
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("first"))
		time.Sleep(350 * time.Millisecond)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON(" second"))
		gatewaytest.SSEWrite(w, gatewaytest.FinishJSON)
	})
	gw := gatewaytest.StartYAML(t, "heartbeat: 100ms\n"+gatewaytest.MinimalConfig, up.URL)
	start := time.Now()
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	if d := time.Since(start); d > 400*time.Millisecond { // the first token comes at 450 ms
		t.Errorf("headers arrived after %v; the first heartbeat should commit them at about 100ms", d)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q", ct)
	}
	events := gatewaytest.ReadEvents(resp.Body)
	before, between, sawFirst, sawSecond := 0, 0, false, false
	for _, ev := range events {
		switch {
		case ev.Comment && !sawFirst:
			before++
		case ev.Comment && !sawSecond:
			between++
		case strings.Contains(ev.Data, `"first"`):
			sawFirst = true
		case strings.Contains(ev.Data, `" second"`):
			sawSecond = true
		}
	}
	if before < 3 || between < 2 {
		t.Errorf("heartbeats: %d before the first token (want >= 3), %d during the stall (want >= 2)", before, between)
	}
	if !sawSecond || events[len(events)-1].Data != "[DONE]" {
		t.Errorf("stream did not complete: last event %+v", events[len(events)-1])
	}
}

// TestFailureAfterHeartbeatCommit: once a heartbeat committed the
// response, a failure before the first token is an error event.
func TestFailureAfterHeartbeatCommit(t *testing.T) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		w.WriteHeader(500)
		io.WriteString(w, `{"error":{"message":"boom"}}`)
	})
	gw := gatewaytest.StartYAML(t, "heartbeat: 100ms\n"+gatewaytest.MinimalConfig+oneAttempt, up.URL)
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200 (committed by a heartbeat)", resp.StatusCode)
	}
	events := gatewaytest.ReadEvents(resp.Body)
	last := events[len(events)-1]
	var e struct{ Error *struct{ Code string } }
	if json.Unmarshal([]byte(last.Data), &e); e.Error == nil || e.Error.Code != "upstream_unavailable" {
		t.Errorf("last event = %q, want an upstream_unavailable error event", last.Data)
	}
}
