package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
)

// Two sims behind one alias: primary and backup have exact timings so a
// test can reason about when things happen on real sockets.
const failoverConfig = `
heartbeat: 30s
providers:
  primary:
    type: sim
    fault: {mode: %s, after: 5}
    tiers:
      t: {ttft: 20ms, tokens_per_second: 200, jitter: 0, answer_tokens: 40}
  backup:
    type: sim
    tiers:
      t: {ttft: 10ms, tokens_per_second: 200, jitter: 0, answer_tokens: 40}
models:
  chat:
    first_token_timeout: %s
    timeout: %s
    deployments:
      - provider: primary
        model: t
      - provider: backup
        model: t
        priority: 1
`

func sprintfCfg(fault, timeout string) string {
	ftt := "500ms"
	if timeout == "400ms" {
		ftt = "300ms"
	}
	s := failoverConfig
	for _, v := range []string{fault, ftt, timeout} {
		s = strings.Replace(s, "%s", v, 1)
	}
	return s
}

type streamResult struct {
	ttfw   time.Duration
	text   string
	finish string
	done   bool
	errEv  string
	header map[string]string
	id     string
	// routeTrailer is the X-Firstword-Route trailer (a continued answer's).
	routeTrailer string
}

func streamChat(t *testing.T, url, body string) streamResult {
	t.Helper()
	start := time.Now()
	resp := gatewaytest.Post(t, url, body)
	defer resp.Body.Close()
	res := streamResult{header: map[string]string{}, id: resp.Header.Get("X-Request-Id")}
	for _, h := range []string{"X-Firstword-Deployment", "X-Firstword-Attempts", "X-Firstword-Route"} {
		res.header[h] = resp.Header.Get(h)
	}
	for _, ev := range gatewaytest.ReadEvents(resp.Body) {
		if ev.Comment {
			continue
		}
		if ev.Data == "[DONE]" {
			res.done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
			Error *json.RawMessage `json:"error"`
		}
		json.Unmarshal([]byte(ev.Data), &c)
		if c.Error != nil {
			res.errEv = ev.Data
			continue
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" && res.ttfw == 0 {
				res.ttfw = ev.At.Sub(start)
			}
			res.text += ch.Delta.Content
			if ch.FinishReason != nil {
				res.finish = *ch.FinishReason
			}
		}
	}
	res.routeTrailer = resp.Trailer.Get("X-Firstword-Route")
	return res
}

// TestFailoverOnRealSockets: a hanging primary falls back within the
// first-token timeout + 50 ms and the client sees no error; the headers
// say what happened.
func TestFailoverOnRealSockets(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, sprintfCfg("hang", "20s")))
	res := streamChat(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	// TTFW = first-token timeout (500ms) + backup TTFT (10ms) + overhead.
	if limit := 500*time.Millisecond + 10*time.Millisecond + 50*time.Millisecond; res.ttfw > limit || res.ttfw < 500*time.Millisecond {
		t.Errorf("first word after %v, want within %v", res.ttfw, limit)
	}
	if !res.done || res.errEv != "" || res.finish != "stop" {
		t.Errorf("done %v, error %q, finish %q", res.done, res.errEv, res.finish)
	}
	if h := res.header; h["X-Firstword-Deployment"] != "backup/t" || h["X-Firstword-Attempts"] != "2" || h["X-Firstword-Route"] != "primary/t=first_token_timeout, backup/t=ok" {
		t.Errorf("headers %v", h)
	}
	rec := waitRecord(t, gw, res.id)
	if rec.Status != metering.StatusComplete || rec.Deployment != "backup/t" || rec.Attempts != 2 || rec.Fallbacks != 1 {
		t.Errorf("record %+v", rec)
	}
}

// TestMidStreamFailureOnRealSockets: with on_stream_failure: end, after
// the first token a failure is an error event, never the backup's text
// (TestContinuationOnRealSockets continues it).
func TestMidStreamFailureOnRealSockets(t *testing.T) {
	cfg := strings.Replace(sprintfCfg("error_mid", "20s"), "    deployments:", "    on_stream_failure: end\n    deployments:", 1)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
	res := streamChat(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if res.errEv == "" || res.done || res.text == "" {
		t.Fatalf("error event %q, done %v, text %q", res.errEv, res.done, res.text)
	}
	if st := gw.Sim("backup").Stats(); st.Started != 0 {
		t.Errorf("the backup was called after the first token: %+v", st)
	}
	if n := len(strings.Fields(res.text)); n > 6 {
		t.Errorf("%d words before the error, want the primary's 5", n)
	}
}

// TestOverallTimeoutOnRealSockets: the overall timeout delivers the
// partial answer, then ends it with an error event (code timeout), no
// finish reason and no [DONE]; it is metered timeout, usage estimated.
func TestOverallTimeoutOnRealSockets(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, sprintfCfg("slow", "400ms")))
	res := streamChat(t, gw.URL, `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi [sim tokens=400]"}]}`)
	if res.finish != "" || res.done || !strings.Contains(res.errEv, `"code":"timeout"`) || res.text == "" {
		t.Fatalf("finish %q, done %v, error %q, text %q; want the text, then the timeout error", res.finish, res.done, res.errEv, res.text)
	}
	rec := waitRecord(t, gw, res.id)
	if rec.Status != metering.StatusTimeout || !rec.Usage.Estimated || rec.Usage.OutputTokens == 0 {
		t.Errorf("record %+v", rec)
	}
}

func TestClientTimeoutHeader(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, sprintfCfg("hang", "20s")))
	start := time.Now()
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","messages":[{"role":"user","content":"hi [sim fault=hang]"}]}`, "X-Request-Timeout", "0.3")
	resp.Body.Close()
	if d := time.Since(start); resp.StatusCode != 504 || d > time.Second {
		t.Errorf("status %d after %v, want 504 after about 300ms", resp.StatusCode, d)
	}
}
