package gateway_test

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/store"
)

// idemChat posts a /v1/chat turn with an Idempotency-Key and reads its
// stream; stopAfter > 0 drops the connection after that many deltas.
func idemChat(t *testing.T, url, idemKey string, body map[string]any, stopAfter int) chatResult {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url+"/v1/chat", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idemKey)
	return readChat(t, req, "", func(deltas int, _ chatEvent) bool { return stopAfter > 0 && deltas == stopAfter })
}

// conversationCount is how many conversations the local user has.
func conversationCount(t *testing.T, url string) int {
	t.Helper()
	_, list := gatewaytest.GetJSON(t, url+"/v1/conversations", "")
	data, _ := list["data"].([]any)
	return len(data)
}

// messageCount is how many messages a conversation holds.
func messageCount(t *testing.T, url, conv string) int {
	t.Helper()
	_, c := gatewaytest.GetJSON(t, url+"/v1/conversations/"+conv, "")
	msgs, _ := c["messages"].([]any)
	return len(msgs)
}

// TestIdempotentSend: on real sockets, a send retried with its
// Idempotency-Key creates no second turn and gets the first one's answer,
// byte for byte the same text: after it ended (from the store or the
// journal), and while it is written, when the first connection dropped
// mid-answer (from its first event). Concurrent first sends make one
// turn. The key with another body is 422, a malformed key 400.
func TestIdempotentSend(t *testing.T) {
	gw := resumeGateway(t, "30s")
	story := map[string]any{"message": "Tell me a story. [sim ttft=5ms gap=2ms tokens=60]"}

	first := idemChat(t, gw.URL, "retry-1", story, 0)
	if first.status != 200 || first.last.kind != "done" || first.headers.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first send: %d %q %v", first.status, first.last.kind, first.headers)
	}
	conv := first.meta["conversation_id"].(string)
	again := idemChat(t, gw.URL, "retry-1", story, 0)
	if again.status != 200 || again.headers.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v %s", again.status, again.headers, again.body)
	}
	if again.meta["conversation_id"] != conv || again.meta["message_id"] != first.meta["message_id"] {
		t.Errorf("retry's meta %v, want the first turn's %v", again.meta, first.meta)
	}
	if again.text != first.text || again.last.kind != "done" {
		t.Errorf("retry's text %q (ending %q), want the first's %q", again.text, again.last.kind, first.text)
	}
	if n := messageCount(t, gw.URL, conv); n != 2 {
		t.Errorf("after a send and its retry the conversation has %d messages, want 2", n)
	}
	if n := conversationCount(t, gw.URL); n != 1 {
		t.Errorf("%d conversations, want 1", n)
	}

	// The same key with another request.
	other := idemChat(t, gw.URL, "retry-1", map[string]any{"message": "Something else."}, 0)
	if other.status != 422 || !strings.Contains(other.body, `"idempotency_key_reused"`) {
		t.Errorf("the key with another body: %d %s; want 422 idempotency_key_reused", other.status, other.body)
	}
	for _, bad := range []string{strings.Repeat("k", 256), "tab\there", "é"} {
		res := idemChat(t, gw.URL, bad, story, 0)
		if res.status != 400 || !strings.Contains(res.body, "Idempotency-Key") {
			t.Errorf("Idempotency-Key %q: %d %s; want 400", bad, res.status, res.body)
		}
	}

	// Dropped mid-answer, then retried: the whole answer from its start.
	long := map[string]any{"message": "A long one. [sim ttft=5ms gap=10ms tokens=150]"}
	cut := idemChat(t, gw.URL, "retry-2", long, 5)
	if cut.status != 200 || cut.last.kind == "done" {
		t.Fatalf("the first connection should have been dropped mid-answer: %d %q", cut.status, cut.last.kind)
	}
	whole := idemChat(t, gw.URL, "retry-2", long, 0)
	if whole.status != 200 || whole.headers.Get("Idempotent-Replayed") != "true" || whole.last.kind != "done" {
		t.Fatalf("retry after the drop: %d %q %v", whole.status, whole.last.kind, whole.headers)
	}
	checkContinuous(t, whole.events, 0)
	if !strings.HasPrefix(whole.text, cut.text) {
		t.Errorf("the retry's text %q does not start with the dropped connection's %q", whole.text, cut.text)
	}
	ans := storedAnswer(t, gw.URL, "", cut.meta["conversation_id"].(string))
	if ans["content"] != whole.text || ans["status"] != "complete" {
		t.Errorf("stored %v %q, want complete with the retry's text %q", ans["status"], ans["content"], whole.text)
	}

	// Concurrent first sends: one turn, every client gets its answer.
	before := conversationCount(t, gw.URL)
	const n = 5
	results := make([]chatResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = idemChat(t, gw.URL, "race-1", map[string]any{"message": "Race. [sim ttft=20ms gap=2ms tokens=40]"}, 0)
		}()
	}
	wg.Wait()
	replays := 0
	for i, res := range results {
		if res.status != 200 || res.last.kind != "done" {
			t.Fatalf("concurrent send %d: %d %q %s", i, res.status, res.last.kind, res.body)
		}
		if res.meta["message_id"] != results[0].meta["message_id"] || res.text != results[0].text {
			t.Errorf("concurrent send %d got message %v %q, send 0 got %v %q", i, res.meta["message_id"], res.text, results[0].meta["message_id"], results[0].text)
		}
		if res.headers.Get("Idempotent-Replayed") == "true" {
			replays++
		}
	}
	if replays != n-1 {
		t.Errorf("%d of %d concurrent sends were replays, want %d", replays, n, n-1)
	}
	if got := conversationCount(t, gw.URL); got != before+1 {
		t.Errorf("concurrent sends made %d conversations, want 1", got-before)
	}

	// A claim left with no turn (its replica died after claiming) is
	// taken over once it is a minute old; a younger one is waited for.
	msg := "Orphan. [sim ttft=5ms gap=2ms tokens=10]"
	// The canonical request: /v1/chat's body, its fields in order, the
	// default model filled in.
	canonical, _ := json.Marshal(struct {
		Model          string `json:"model"`
		Message        string `json:"message"`
		ConversationID string `json:"conversation_id"`
	}{"chat", msg, ""})
	sum := sha256.Sum256(canonical)
	old := time.Now().Add(-2 * time.Minute).UTC()
	orphan := &store.IdempotencyKey{TenantID: "local", Scope: "local", Key: "orphan", RequestHash: sum[:], CreatedAt: old, ExpiresAt: old.Add(time.Hour)}
	if existing, err := gw.Store().ClaimIdempotencyKey(t.Context(), orphan, time.Now()); err != nil || existing != nil {
		t.Fatalf("seeding an orphaned claim: %v %v", existing, err)
	}
	res := idemChat(t, gw.URL, "orphan", map[string]any{"message": msg}, 0)
	if res.status != 200 || res.last.kind != "done" || res.headers.Get("Idempotent-Replayed") != "" {
		t.Fatalf("send over an orphaned claim: %d %q %v %s", res.status, res.last.kind, res.headers, res.body)
	}
	rec, err := gw.Store().GetIdempotencyKey(t.Context(), "local", "local", "orphan")
	if err != nil || rec.MessageID != res.meta["message_id"] {
		t.Errorf("the key after the takeover: %+v %v, want bound to %v", rec, err, res.meta["message_id"])
	}
}

// TestIdempotentSendAcrossReplicas: the same send posted at once to two
// real processes sharing PostgreSQL and a Redis journal makes one turn;
// both clients get its whole answer.
func TestIdempotentSendAcrossReplicas(t *testing.T) {
	a, b := replicaPair(t)
	body := map[string]any{"message": "Both. [sim ttft=20ms gap=5ms tokens=80]"}
	var ra, rb chatResult
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ra = idemChat(t, a.url, "two-replicas", body, 0) }()
	go func() { defer wg.Done(); rb = idemChat(t, b.url, "two-replicas", body, 0) }()
	wg.Wait()
	for name, res := range map[string]chatResult{"A": ra, "B": rb} {
		if res.status != 200 || res.last.kind != "done" {
			t.Fatalf("%s: %d %q %s", name, res.status, res.last.kind, res.body)
		}
	}
	if ra.meta["message_id"] != rb.meta["message_id"] || ra.text != rb.text || ra.text == "" {
		t.Errorf("A got %v %q, B got %v %q: want one answer", ra.meta["message_id"], ra.text, rb.meta["message_id"], rb.text)
	}
	if (ra.headers.Get("Idempotent-Replayed") == "true") == (rb.headers.Get("Idempotent-Replayed") == "true") {
		t.Errorf("Idempotent-Replayed: A %q, B %q; want exactly one replay", ra.headers.Get("Idempotent-Replayed"), rb.headers.Get("Idempotent-Replayed"))
	}
	if n := conversationCount(t, a.url); n != 1 {
		t.Errorf("%d conversations, want 1", n)
	}
}
