package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// resumeConfig serves long, quick answers; the grace window outlasts any
// of them, so an answer whose client dropped always finishes.
const resumeConfig = `
heartbeat: 200ms
chat:
  checkpoint_interval: 100ms
providers:
  sim: {type: sim}
models:
  chat:
    timeout: 30s
    deployments: [{provider: sim, model: small}]
resume:
  grace: %s
`

func resumeGateway(t *testing.T, grace string) *gatewaytest.Gateway {
	return gatewaytest.Start(t, gatewaytest.MustParse(t, fmt.Sprintf(resumeConfig, grace)))
}

// resume reads GET /v1/conversations/{id}/stream with the cursor lastID
// ("" for none), to the end or until stop says to close.
func resume(t *testing.T, url, convID, lastID string, stop func(int, chatEvent) bool) chatResult {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/v1/conversations/"+convID+"/stream", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if stop == nil {
		stop = func(int, chatEvent) bool { return false }
	}
	return readChat(t, req, "", stop)
}

// seqOf is the number of an event id <message_id>:<n>.
func seqOf(t *testing.T, id string) int {
	t.Helper()
	n, err := strconv.Atoi(id[strings.LastIndexByte(id, ':')+1:])
	if err != nil {
		t.Fatalf("event id %q has no number", id)
	}
	return n
}

// checkContinuous fails unless the events' numbers run from first up by
// one: each event exactly once, in order, no gap.
func checkContinuous(t *testing.T, evs []chatEvent, first int) {
	t.Helper()
	for i, ev := range evs {
		if got := seqOf(t, ev.id); got != first+i {
			t.Fatalf("event %d has id %q, want number %d (a gap or a duplicate)", i, ev.id, first+i)
		}
	}
}

// TestResumeAtRandomPoints drops the client at random points of an answer
// (before its first token, mid-text, just before the end) and resumes
// from the last event id each time: the resumed events continue the ids
// with no gap or duplicate, end with the terminal event, and the text
// received over both connections is the stored text, which is the whole
// answer the upstream produced.
func TestResumeAtRandomPoints(t *testing.T) {
	t.Run("one process", func(t *testing.T) {
		gw := resumeGateway(t, "30s")
		dropAndResume(t, gw.URL, gw.URL)
	})
	// The same with the resume on a second process that shares the
	// Redis journal and the PostgreSQL store.
	t.Run("another process", func(t *testing.T) {
		a, b := replicaPair(t)
		dropAndResume(t, a.url, b.url)
	})
}

func dropAndResume(t *testing.T, postURL, resumeURL string) {
	const tokens = 40
	rng := rand.New(rand.NewPCG(1, 2))
	rounds := 100
	if testing.Short() {
		rounds = 20
	}
	for round := range rounds {
		// Drop after k deltas: 0 is right after meta, before the first
		// token; tokens-1 is just before the last one.
		k := rng.IntN(tokens)
		if round < 3 {
			k = []int{0, 1, tokens - 1}[round]
		}
		msg := fmt.Sprintf("round %d [sim ttft=2ms gap=1ms tokens=%d]", round, tokens)
		body := map[string]any{"message": msg}
		first := chatOnceUntil(t, postURL, body, func(deltas int, ev chatEvent) bool {
			return ev.kind == "meta" && k == 0 || ev.kind == "delta" && deltas == k
		})
		if first.meta == nil {
			t.Fatalf("round %d: no meta event: %s", round, first.body)
		}
		conv := first.meta["conversation_id"].(string)
		rest := resume(t, resumeURL, conv, first.last.id, nil)
		if rest.status != 200 {
			t.Fatalf("round %d (drop after %d): resume status %d %s", round, k, rest.status, rest.body)
		}
		if len(rest.events) == 0 || rest.last.kind != "done" || rest.last.data["status"] != "complete" {
			t.Fatalf("round %d (drop after %d): resumed stream ended with %q %v", round, k, rest.last.kind, rest.last.data)
		}
		checkContinuous(t, append(append([]chatEvent(nil), first.events...), rest.events...), 0)
		ans := storedAnswer(t, resumeURL, "", conv)
		if got := first.text + rest.text; got != ans["content"] || ans["status"] != "complete" {
			t.Fatalf("round %d (drop after %d): received %q, stored %q (%v)", round, k, got, ans["content"], ans["status"])
		}
		if n := ans["usage"].(map[string]any)["output_tokens"].(float64); n != tokens {
			t.Fatalf("round %d: stored %v output tokens, want the whole answer's %d", round, n, tokens)
		}
	}
}

// chatOnceUntil posts a turn and reads it until stop.
func chatOnceUntil(t *testing.T, url string, body map[string]any, stop func(int, chatEvent) bool) chatResult {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url+"/v1/chat", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	return readChat(t, req, "", stop)
}

// TestResumeFollowsLive: a client resuming while the answer is still
// being written gets the journaled events, then the live ones, and a
// second reader with no cursor (a second tab, a reload) gets the same
// events from the start.
func TestResumeFollowsLive(t *testing.T) {
	gw := resumeGateway(t, "30s")
	first := chatOnce(t, gw.URL, "", map[string]any{"message": "hi [sim ttft=2ms gap=20ms tokens=30]"}, 3)
	conv := first.meta["conversation_id"].(string)
	rest := resume(t, gw.URL, conv, first.last.id, nil)
	if rest.last.kind != "done" {
		t.Fatalf("resumed stream ended with %q", rest.last.kind)
	}
	// Live: the answer was still being written when the resume began.
	if st := rest.events[len(rest.events)-1].at.Sub(rest.events[0].at); st < 100*time.Millisecond {
		t.Errorf("the resumed events arrived within %v: the answer was not followed live", st)
	}
	tab := resume(t, gw.URL, conv, "", nil)
	if len(tab.events) != len(first.events)+len(rest.events) {
		t.Fatalf("a reader with no cursor got %d events, want %d", len(tab.events), len(first.events)+len(rest.events))
	}
	for i, ev := range append(first.events, rest.events...) {
		if tab.events[i].raw != ev.raw {
			t.Errorf("replayed event %d = %q, want %q", i, tab.events[i].raw, ev.raw)
		}
	}
	// A cursor at the last event: nothing to resume (204, on which an
	// EventSource stops reconnecting).
	end := resume(t, gw.URL, conv, rest.last.id, nil)
	if end.status != 204 || len(end.events) != 0 || end.headers.Get("X-Firstword-Resume") != "ended" {
		t.Errorf("resume after the last event: status %d, %d events, %q", end.status, len(end.events), end.headers.Get("X-Firstword-Resume"))
	}
	// The query parameter works as the header does.
	req, _ := http.NewRequest("GET", gw.URL+"/v1/conversations/"+conv+"/stream?after="+strconv.Itoa(len(tab.events)-2), nil)
	q := readChat(t, req, "", func(int, chatEvent) bool { return false })
	if len(q.events) != 1 || q.last.kind != "done" {
		t.Errorf("?after=n-2: %d events, last %q", len(q.events), q.last.kind)
	}
}

// TestGraceWindow: a client that drops and never comes back does not
// stop its answer while the grace window lasts: the answer is finished,
// stored complete and metered whole.
func TestGraceWindow(t *testing.T) {
	gw := resumeGateway(t, "30s")
	first := chatOnce(t, gw.URL, "", map[string]any{"message": "hi [sim ttft=2ms gap=5ms tokens=50]"}, 2)
	ans := storedAnswer(t, gw.URL, "", first.meta["conversation_id"].(string))
	if ans["status"] != "complete" || len(ans["content"].(string)) <= len(first.text) {
		t.Fatalf("stored %v %q after the client left at %q: want the whole answer", ans["status"], ans["content"], first.text)
	}
	if st := gw.Sim("sim").Stats(); st.Cancelled != 0 {
		t.Errorf("sim stats %+v: the upstream was cancelled within the grace window", st)
	}
}

// TestStopFromAnotherConnection: the stop route, called on another
// connection, cancels the upstream at once; the streaming client gets a
// done event with status cancelled; the answer is stored cancelled with
// exactly the text the client received.
func TestStopFromAnotherConnection(t *testing.T) {
	gw := resumeGateway(t, "30s")
	var conv string
	var stop map[string]any
	res := chatOnceUntil(t, gw.URL, map[string]any{"message": "hi [sim ttft=2ms gap=20ms tokens=500]"}, func(deltas int, ev chatEvent) bool {
		if ev.kind == "meta" {
			conv = ev.data["conversation_id"].(string)
		}
		if ev.kind == "delta" && deltas == 5 {
			resp := gatewaytest.PostPath(t, gw.URL, "/v1/conversations/"+conv+"/stop", "")
			defer resp.Body.Close()
			json.NewDecoder(resp.Body).Decode(&stop)
			if resp.StatusCode != 200 {
				t.Errorf("stop: status %d %v", resp.StatusCode, stop)
			}
		}
		return false
	})
	if stop["stopped"] != true || stop["status"] != "cancelled" {
		t.Errorf("stop answered %v, want stopped and cancelled", stop)
	}
	if res.last.kind != "done" || res.last.data["status"] != "cancelled" {
		t.Fatalf("the streaming client's last event: %q %v, want done with status cancelled", res.last.kind, res.last.data)
	}
	checkContinuous(t, res.events, 0)
	ans := storedAnswer(t, gw.URL, "", conv)
	if ans["status"] != "cancelled" || ans["content"] != res.text {
		t.Errorf("stored %v %q, want cancelled with what the client received, %q", ans["status"], ans["content"], res.text)
	}
	if st := gw.Sim("sim").Stats(); st.Cancelled != 1 {
		t.Errorf("sim stats %+v: want the upstream cancelled", st)
	}
	// Stopping it again: it is over.
	resp := gatewaytest.PostPath(t, gw.URL, "/v1/conversations/"+conv+"/stop", "")
	var again map[string]any
	json.NewDecoder(resp.Body).Decode(&again)
	resp.Body.Close()
	if resp.StatusCode != 200 || again["stopped"] != false || again["status"] != "cancelled" {
		t.Errorf("second stop: %d %v", resp.StatusCode, again)
	}
	// A resume of the stopped answer replays it to the same last event.
	replay := resume(t, gw.URL, conv, "", nil)
	if replay.last.raw != res.last.raw || replay.text != res.text {
		t.Errorf("replay ended %q with %q, want %q with %q", replay.last.raw, replay.text, res.last.raw, res.text)
	}
}

// TestResumeRefusals: unknown conversations are 404 on both routes, and a
// bad cursor is a 400.
func TestResumeRefusals(t *testing.T) {
	gw := resumeGateway(t, "30s")
	if r := resume(t, gw.URL, "conv_nope", "", nil); r.status != 404 {
		t.Errorf("resume of an unknown conversation: %d %s", r.status, r.body)
	}
	resp := gatewaytest.PostPath(t, gw.URL, "/v1/conversations/conv_nope/stop", "")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("stop of an unknown conversation: %d", resp.StatusCode)
	}
	first := chatOnce(t, gw.URL, "", map[string]any{"message": "hi [sim ttft=2ms gap=1ms tokens=5]"}, 0)
	if r := resume(t, gw.URL, first.meta["conversation_id"].(string), "msg_x:abc", nil); r.status != 400 || !strings.Contains(r.body, "cursor") {
		t.Errorf("a bad cursor: %d %s", r.status, r.body)
	}
}

// TestResumePastTheJournalsCap: an answer larger than resume.max_answer_bytes
// is journaled up to the cap; a resume gets what there is, then an error
// event that is the server's, not the answer's: no id (a client's cursor
// stays at the last event it has), not retryable, and the answer's stored
// status. The stored message has the whole text.
func TestResumePastTheJournalsCap(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, fmt.Sprintf(resumeConfig, "30s")+"  max_answer_bytes: 3000\n"))
	first := chatOnce(t, gw.URL, "", map[string]any{"message": "hi [sim ttft=2ms gap=1ms tokens=300]"}, 2)
	conv := first.meta["conversation_id"].(string)
	ans := storedAnswer(t, gw.URL, "", conv)
	rest := resume(t, gw.URL, conv, first.last.id, nil)
	last := rest.last
	if last.kind != "error" || last.data["code"] != "resume_truncated" || last.data["retryable"] != false || last.data["status"] != "complete" {
		t.Fatalf("last event %q %v, want resume_truncated, not retryable, status complete", last.kind, last.data)
	}
	if last.id != "" {
		t.Errorf("the server's error event has id %q: a client would skip an event it never had", last.id)
	}
	checkContinuous(t, append(append([]chatEvent(nil), first.events...), rest.events[:len(rest.events)-1]...), 0)
	if got := first.text + rest.text; !strings.HasPrefix(ans["content"].(string), got) || len(got) >= len(ans["content"].(string)) {
		t.Errorf("received %d bytes, stored %d: want a prefix of the whole stored answer", len(got), len(ans["content"].(string)))
	}
}
