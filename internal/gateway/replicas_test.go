package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// replicaPair starts two real firstword processes, A and B, on one
// PostgreSQL schema and one Redis journal (skipping without either).
func replicaPair(t *testing.T) (a, b *process) {
	t.Helper()
	redisURL := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if redisURL == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL not set: skipping the two-replica resume test")
	}
	pg := pgSchema(t, "the two-replica resume test")
	dir := t.TempDir()
	start := func(name string) *process {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cfg := filepath.Join(dir, name+".yaml")
		os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %s
store: {driver: postgres, url: %q}
usage: {spill_path: %s}
chat: {checkpoint_interval: 100ms}
resume: {journal: redis, url: %q, grace: 30s, lease: 1500ms}
providers:
  sim: {type: sim}
models:
  chat: {timeout: 60s, deployments: [{provider: sim, model: small}]}
`, addr, pg, filepath.Join(dir, name+".spill"), redisURL)), 0o600)
		p := startProcess(t, cfg, addr)
		t.Cleanup(func() {
			p.cmd.Process.Signal(os.Interrupt)
			p.cmd.Wait()
			if t.Failed() {
				t.Logf("replica %s's log:\n%s", name, p.log.String())
			}
		})
		return p
	}
	return start("a"), start("b")
}

// TestReplicasResumeStopAndCrash (issues 19, 33): an answer streamed on
// replica A is resumed on replica B from the client's last event id,
// followed live there, and stopped from B: the stop reaches A, which
// cancels the upstream and stores exactly the text sent. Then A is killed
// (SIGKILL) mid-answer while B follows it: B takes the answer over and
// continues it under the same message id, so its follower reads the
// whole answer, the one an unbroken stream gives, and it is stored
// complete (continued). A client that had seen past what A journaled is
// rewound to the durable point and given the rest.
func TestReplicasResumeStopAndCrash(t *testing.T) {
	a, b := replicaPair(t)

	// Resume on B, stop from B.
	first := chatOnce(t, a.url, "", map[string]any{"message": "Tell me a story. [sim ttft=5ms gap=20ms tokens=2000]"}, 5)
	conv := first.meta["conversation_id"].(string)
	var stopStatus int
	rest := resume(t, b.url, conv, first.last.id, func(deltas int, ev chatEvent) bool {
		if ev.kind == "delta" && deltas == 10 {
			resp, err := http.Post(b.url+"/v1/conversations/"+conv+"/stop", "application/json", nil)
			if err != nil {
				t.Errorf("stop: %v", err)
				return true
			}
			resp.Body.Close()
			stopStatus = resp.StatusCode
		}
		return false
	})
	if stopStatus != 200 {
		t.Errorf("stop on B: status %d", stopStatus)
	}
	if rest.last.kind != "done" || rest.last.data["status"] != "cancelled" {
		t.Fatalf("B's stream ended with %q %v, want done cancelled", rest.last.kind, rest.last.data)
	}
	checkContinuous(t, append(append([]chatEvent(nil), first.events...), rest.events...), 0)
	ans := storedAnswer(t, b.url, "", conv)
	if ans["status"] != "cancelled" || ans["content"] != first.text+rest.text {
		t.Errorf("stored %v %q, want cancelled with the text sent, %q", ans["status"], ans["content"], first.text+rest.text)
	}

	// Kill A mid-answer while B follows it.
	const story = "Another one. [sim ttft=5ms gap=10ms tokens=300]"
	second := chatOnce(t, a.url, "", map[string]any{"message": story}, 5)
	conv = second.meta["conversation_id"].(string)
	var killedAt time.Time
	follow := resume(t, b.url, conv, "", func(deltas int, ev chatEvent) bool {
		if ev.kind == "delta" && deltas == 20 && killedAt.IsZero() {
			if err := a.cmd.Process.Kill(); err != nil {
				t.Errorf("kill: %v", err)
			}
			killedAt = time.Now()
		}
		return false
	})
	if killedAt.IsZero() {
		t.Fatalf("B's follower ended before the kill: %q %v", follow.last.kind, follow.last.data)
	}
	if follow.last.kind != "done" || follow.last.data["status"] != "complete" || follow.last.data["continued"] != true {
		t.Fatalf("B's follower ended with %q %v, want done, complete, continued", follow.last.kind, follow.last.data)
	}
	// The same question in a new conversation, unbroken: the sim's
	// answer follows the prompt.
	clean := chatOnce(t, b.url, "", map[string]any{"message": story}, 0)
	if follow.text != clean.text || !strings.HasPrefix(follow.text, second.text) {
		t.Errorf("B's follower read\n%q\nthe unbroken answer is\n%q", follow.text, clean.text)
	}
	// A's generation, then B's: each numbered on by one; the rewind
	// that starts B's is not sent to a follower that had every event A
	// journaled.
	var fromA, fromB []chatEvent
	for _, ev := range follow.events {
		if strings.Count(ev.id, ":") == 1 {
			fromA = append(fromA, ev)
		} else {
			fromB = append(fromB, ev)
		}
	}
	if len(fromB) == 0 || !strings.Contains(fromB[0].id, ":1:") {
		t.Fatalf("no event of the continuing generation (<id>:1:<n>): %d events", len(follow.events))
	}
	checkContinuous(t, fromA, 0)
	// B's numbers start past a fence far beyond A's last (see
	// journal/redis Take), then rise by one.
	if first := seqOf(t, fromB[0].id); first <= seqOf(t, fromA[len(fromA)-1].id) {
		t.Errorf("B's first event %s is not after A's last %s", fromB[0].id, fromA[len(fromA)-1].id)
	} else {
		checkContinuous(t, fromB, first)
	}
	var gap time.Duration
	for _, ev := range fromB {
		if ev.kind == "delta" {
			gap = ev.at.Sub(killedAt)
			break
		}
	}
	ans = storedAnswer(t, b.url, "", conv)
	if ans["status"] != "complete" || ans["content"] != clean.text {
		t.Errorf("stored %v %q, want complete with the whole answer", ans["status"], ans["content"])
	}
	// A client that saw two events A never journaled resumes: it is told
	// to rewind to what A journaled, then gets the rest.
	msgID := second.meta["message_id"].(string)
	seen := fmt.Sprintf("%s:%d", msgID, seqOf(t, fromA[len(fromA)-1].id)+2)
	rewound := resume(t, b.url, conv, seen, nil)
	if len(rewound.events) == 0 || rewound.events[0].kind != "rewind" || rewound.last.kind != "done" {
		t.Fatalf("resume from %s: %d events, fromA %+v, last %q", seen, len(rewound.events), rewound.events, rewound.last.kind)
	}
	durable := 0
	for _, ev := range fromA {
		if ev.kind == "delta" {
			durable += utf8.RuneCountInString(ev.data["text"].(string))
		}
	}
	if off := rewound.events[0].data["offset"]; off != float64(durable) {
		t.Errorf("rewind offset %v, want %d (the characters A journaled)", off, durable)
	}
	if got := string([]rune(clean.text)[:durable]) + rewound.text; got != clean.text {
		t.Errorf("the durable text and the resumed rest read\n%q\nwant\n%q", got, clean.text)
	}
	t.Logf("kill to the first continued word: %v; %d of %d events from A", gap, len(fromA), len(follow.events))
}

// TestReplicaDiesUnattended: replica A is killed mid-answer while nobody
// follows the answer (its client left, within the grace window). B's
// lost-answer sweep finds it (the sweep asks the journal about rows
// quieter than a healthy journal's rare checkpoints, and A's lease has
// lapsed) and continues it: stored complete, the unbroken answer.
func TestReplicaDiesUnattended(t *testing.T) {
	a, b := replicaPair(t)
	const story = "Nobody is watching. [sim ttft=5ms gap=10ms tokens=300]"
	first := chatOnce(t, a.url, "", map[string]any{"message": story}, 30)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	killedAt := time.Now()
	conv := first.meta["conversation_id"].(string)
	var ans map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, c := gatewaytest.GetJSON(t, b.url+"/v1/conversations/"+conv, "")
		msgs, _ := c["messages"].([]any)
		if len(msgs) == 2 {
			if ans = msgs[1].(map[string]any); ans["status"] != "streaming" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answer is still %v 30 s after its replica was killed", ans["status"])
		}
	}
	t.Logf("kill to the answer stored %v: %v", ans["status"], time.Since(killedAt).Round(time.Millisecond))
	clean := chatOnce(t, b.url, "", map[string]any{"message": story}, 0)
	if ans["status"] != "complete" || ans["content"] != clean.text || !strings.HasPrefix(clean.text, first.text) {
		t.Errorf("stored %v\n%q\nthe unbroken answer is\n%q", ans["status"], ans["content"], clean.text)
	}
}
