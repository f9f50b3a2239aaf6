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

// TestReplicasResumeStopAndCrash (issue 19): an answer streamed on replica
// A is resumed on replica B from the client's last event id, followed
// live there, and stopped from B: the stop reaches A, which cancels the
// upstream and stores exactly the text sent. Then A is killed (SIGKILL)
// mid-answer while B follows it: B's client gets every journaled event
// and a terminal interrupted error within the lease, and the message is
// stored interrupted with the text B's client received.
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
	second := chatOnce(t, a.url, "", map[string]any{"message": "Another one. [sim ttft=5ms gap=20ms tokens=2000]"}, 5)
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
	took := time.Since(killedAt)
	if follow.last.kind != "error" || follow.last.data["code"] != "interrupted" || follow.last.data["status"] != "interrupted" {
		t.Fatalf("B's follower ended with %q %v, want an interrupted error", follow.last.kind, follow.last.data)
	}
	if took > 15*time.Second {
		t.Errorf("the interrupted event came %v after the kill; the lease is 1.5s", took)
	}
	// The interrupted event is the server's, not the answer's: no id.
	checkContinuous(t, follow.events[:len(follow.events)-1], 0)
	if follow.last.id != "" {
		t.Errorf("the interrupted event has id %q", follow.last.id)
	}
	if !strings.HasPrefix(follow.text, second.text) {
		t.Errorf("B's replay %q does not start with what A's client saw, %q", follow.text, second.text)
	}
	ans = storedAnswer(t, b.url, "", conv)
	if ans["status"] != "interrupted" || ans["content"] != follow.text {
		t.Errorf("stored %v %q, want interrupted with the journaled text %q", ans["status"], ans["content"], follow.text)
	}
	t.Logf("interrupted event %v after the kill; %d deltas journaled", took, strings.Count(follow.text, " "))
}
