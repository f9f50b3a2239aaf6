package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/store"
)

// chatEvent is one /v1/chat event as a client saw it.
type chatEvent struct {
	at   time.Time
	id   string
	kind string
	data map[string]any
	raw  string
}

type chatResult struct {
	status  int
	events  []chatEvent
	text    string // concatenated deltas
	meta    map[string]any
	last    chatEvent
	retry   bool
	headers http.Header
	body    string
}

// chatOnce posts a turn and reads the stream; stopAfter > 0 closes the
// connection after that many deltas.
func chatOnce(t *testing.T, url, key string, body map[string]any, stopAfter int) chatResult {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url+"/v1/chat", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	return readChat(t, req, key, func(deltas int, _ chatEvent) bool { return stopAfter > 0 && deltas == stopAfter })
}

// readChat sends req and reads its /v1/chat event stream until it ends or
// stop says to close the connection (it sees each event after it is
// recorded, with the number of deltas so far).
func readChat(t *testing.T, req *http.Request, key string, stop func(deltas int, ev chatEvent) bool) chatResult {
	t.Helper()
	res, err := readChatErr(req, key, stop)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// readChatErr is readChat for a goroutine of its own: a request that
// fails to get a response is an error, not the test's end. A read that
// breaks (the server went away, req's context ended) ends the result
// without an error, as readChat's does.
func readChatErr(req *http.Request, key string, stop func(deltas int, ev chatEvent) bool) (chatResult, error) {
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return chatResult{}, err
	}
	defer resp.Body.Close()
	res := chatResult{status: resp.StatusCode, headers: resp.Header}
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		res.body = string(raw)
		return res, nil
	}
	var cur chatEvent
	buf := make([]byte, 0, 1<<16)
	chunk := make([]byte, 4096)
	deltas := 0
	for {
		n, err := resp.Body.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := strings.Index(string(buf), "\n\n")
			if i < 0 {
				break
			}
			block := string(buf[:i])
			buf = buf[i+2:]
			cur = chatEvent{at: time.Now(), raw: block}
			for _, line := range strings.Split(block, "\n") {
				switch {
				case strings.HasPrefix(line, "retry: "):
					res.retry = true
				case strings.HasPrefix(line, "id: "):
					cur.id = line[4:]
				case strings.HasPrefix(line, "event: "):
					cur.kind = line[7:]
				case strings.HasPrefix(line, "data: "):
					json.Unmarshal([]byte(line[6:]), &cur.data)
				}
			}
			if cur.kind == "" {
				continue
			}
			res.events = append(res.events, cur)
			res.last = cur
			switch cur.kind {
			case "meta":
				res.meta = cur.data
			case "delta":
				res.text += cur.data["text"].(string)
				deltas++
			case "rewind":
				// The text from offset (characters) on is replaced by
				// the deltas that follow.
				if off, ok := cur.data["offset"].(float64); ok {
					if r := []rune(res.text); int(off) < len(r) {
						res.text = string(r[:int(off)])
					}
				}
			}
			if stop(deltas, cur) {
				return res, nil
			}
		}
		if err != nil {
			return res, nil
		}
	}
}

// storedAnswer polls the conversation until the answer leaves streaming.
func storedAnswer(t *testing.T, url, key, convID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		_, conv := gatewaytest.GetJSON(t, url+"/v1/conversations/"+convID, key)
		msgs, _ := conv["messages"].([]any)
		if len(msgs) > 0 {
			last := msgs[len(msgs)-1].(map[string]any)
			if last["status"] != "streaming" {
				return last
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("answer of %s still streaming", convID)
	return nil
}

const chatConfig = `
heartbeat: 200ms
chat:
  checkpoint_interval: 100ms
providers:
  sim: {type: sim}
models:
  chat:
    timeout: %s
    deployments: [{provider: sim, model: small}]
`

func chatGateway(t *testing.T, timeout string) *gatewaytest.Gateway {
	return gatewaytest.Start(t, gatewaytest.MustParse(t, fmt.Sprintf(chatConfig, timeout)))
}

func TestChatTurns(t *testing.T) {
	gw := chatGateway(t, "20s")
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "Why stream? [sim ttft=5ms gap=1ms tokens=30]"}, 0)
	if r.status != 200 || !r.retry || r.meta == nil || r.last.kind != "done" {
		t.Fatalf("status %d, retry %v, meta %v, last %q %s", r.status, r.retry, r.meta, r.last.kind, r.body)
	}
	for i, ev := range r.events {
		if want := fmt.Sprintf("%s:%d", r.meta["message_id"], i); ev.id != want {
			t.Errorf("event %d id %q, want %q", i, ev.id, want)
		}
	}
	done := r.last.data
	if done["status"] != "complete" || done["finish_reason"] != "stop" || done["deployment"] != "sim/small" {
		t.Errorf("done = %v", done)
	}
	timings := done["timings"].(map[string]any)
	if timings["ttfw_ms"].(float64) <= 0 || len(timings["stages"].([]any)) < 4 {
		t.Errorf("timings %v", timings)
	}
	if st := r.headers.Get("Server-Timing"); !strings.Contains(st, "store.prepare;dur=") {
		t.Errorf("Server-Timing = %q", st)
	}
	convID := r.meta["conversation_id"].(string)
	ans := storedAnswer(t, gw.URL, "", convID)
	if ans["content"] != r.text || ans["status"] != "complete" || ans["deployment"] != "sim/small" {
		t.Errorf("stored %v, want content %q", ans, r.text)
	}
	if u := ans["usage"].(map[string]any); u["output_tokens"].(float64) != 30 {
		t.Errorf("stored usage %v", u)
	}
	// A second turn continues the conversation.
	r2 := chatOnce(t, gw.URL, "", map[string]any{"message": "And then? [sim ttft=5ms gap=1ms tokens=5]", "conversation_id": convID}, 0)
	if r2.meta["conversation_id"] != convID || r2.meta["created"] != false || r2.last.kind != "done" {
		t.Fatalf("second turn: %v / %v", r2.meta, r2.last.data)
	}
	_, conv := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+convID, "")
	if msgs := conv["messages"].([]any); len(msgs) != 4 {
		t.Errorf("%d messages stored, want 4", len(msgs))
	}
	_, list := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", "")
	if data := list["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != convID {
		t.Errorf("list = %v", list)
	}
}

// TestChatEndings: every way an answer can end stores exactly the text the
// client received, with the right status.
func TestChatEndings(t *testing.T) {
	tests := []struct {
		name      string
		message   string
		timeout   string
		grace     string // resume.grace
		stopAfter int
		status    string
		lastEvent string
	}{
		// The sim stalls after 8 tokens, so nothing is in flight when the
		// client leaves: what it received is exactly what was sent.
		{"client disconnects", "hi [sim ttft=5ms gap=2ms tokens=100 fault=stall_mid after=8]", "20s", "0s", 8, "cancelled", ""},
		// Nobody resumes within the grace window: the answer is
		// cancelled when it ends (the resume tests show the other way).
		{"client disconnects, nobody resumes", "hi [sim ttft=5ms gap=2ms tokens=100 fault=stall_mid after=8]", "20s", "300ms", 8, "cancelled", ""},
		{"upstream error mid-answer", "hi [sim ttft=5ms gap=2ms tokens=100 fault=error_mid after=8]", "20s", "15s", 0, "error", "error"},
		{"overall timeout", "hi [sim ttft=5ms gap=20ms tokens=500]", "400ms", "15s", 0, "timeout", "done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := gatewaytest.Start(t, gatewaytest.MustParse(t, fmt.Sprintf(chatConfig, tt.timeout)+"resume: {grace: "+tt.grace+"}\n"))
			r := chatOnce(t, gw.URL, "", map[string]any{"message": tt.message}, tt.stopAfter)
			if r.text == "" {
				t.Fatal("no text received")
			}
			if tt.lastEvent != "" && r.last.kind != tt.lastEvent {
				t.Errorf("last event %q %v, want %q", r.last.kind, r.last.data, tt.lastEvent)
			}
			ans := storedAnswer(t, gw.URL, "", r.meta["conversation_id"].(string))
			if ans["status"] != tt.status {
				t.Errorf("stored status %v, want %s", ans["status"], tt.status)
			}
			if ans["content"] != r.text {
				t.Errorf("stored content differs from what the client received:\nstored   %q\nreceived %q", ans["content"], r.text)
			}
			if tt.stopAfter > 0 {
				if st := gw.Sim("sim").Stats(); st.Cancelled != 1 {
					t.Errorf("sim stats %+v: the upstream was not cancelled", st)
				}
			}
		})
	}
}

// lookupServer answers after delay, counting requests that were cancelled.
func lookupServer(t *testing.T, delay time.Duration, status int, cancelled *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
			w.WriteHeader(status)
			fmt.Fprintf(w, "lookup %s answered", r.URL.Path)
		case <-r.Context().Done():
			if cancelled != nil {
				cancelled.Add(1)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func stage(t *testing.T, done map[string]any, name string) float64 {
	t.Helper()
	for _, s := range done["timings"].(map[string]any)["stages"].([]any) {
		m := s.(map[string]any)
		if m["name"] == name {
			return m["end_ms"].(float64) - m["start_ms"].(float64)
		}
	}
	t.Fatalf("no stage %q in %v", name, done["timings"])
	return 0
}

// TestChatContextInParallel: three sources of 30, 120 and 60 ms make a
// context stage of about 120 ms, not 210.
func TestChatContextInParallel(t *testing.T) {
	a, b, c := lookupServer(t, 30*time.Millisecond, 200, nil), lookupServer(t, 200*time.Millisecond, 200, nil), lookupServer(t, 60*time.Millisecond, 200, nil)
	cfg := fmt.Sprintf(chatConfig, "20s") + fmt.Sprintf(`
sources:
  lookups:
    - {name: history_db, url: "%s/h", timeout: 1s}
    - {name: docs, url: "%s/d", timeout: 1s}
    - {name: orders, url: "%s/o?user={{user}}&q={{question}}", timeout: 1s}
`, a.URL, b.URL, c.URL)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "where is my order? [sim ttft=5ms gap=1ms tokens=5]"}, 0)
	if r.last.kind != "done" {
		t.Fatalf("last event %v", r.last)
	}
	ctxMs := stage(t, r.last.data, "context")
	t.Logf("context stage %.1f ms (sources: 30, 200, 60 ms)", ctxMs)
	// In parallel the stage lasts as long as the slowest source (200 ms);
	// one after another it would be their sum (290 ms). The bound between
	// leaves a busy machine room.
	if ctxMs < 200 || ctxMs > 260 {
		t.Errorf("context stage %.1f ms, want about 200 (the slowest), under 260 (the sum is 290)", ctxMs)
	}
}

func TestChatOptionalSourceFailure(t *testing.T) {
	bad := lookupServer(t, 0, 500, nil)
	slow := lookupServer(t, 2*time.Second, 200, nil)
	cfg := fmt.Sprintf(chatConfig, "20s") + fmt.Sprintf(`
sources:
  lookups:
    - {name: broken, url: "%s/x", timeout: 1s}
    - {name: slow, url: "%s/y", timeout: 50ms}
`, bad.URL, slow.URL)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "hi [sim ttft=5ms gap=1ms tokens=5]"}, 0)
	if r.last.kind != "done" || r.last.data["status"] != "complete" {
		t.Fatalf("last %v", r.last)
	}
	got := map[string]string{}
	for _, s := range r.last.data["sources"].([]any) {
		m := s.(map[string]any)
		got[m["name"].(string)] = m["status"].(string)
	}
	if got["broken"] != "failed" || got["slow"] != "timeout" {
		t.Errorf("sources %v", got)
	}
}

// guardServer is a remote guard that answers after delay, blocking
// messages containing "forbidden".
func guardServer(t *testing.T, delay time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Text string }
		json.NewDecoder(r.Body).Decode(&in)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		allowed := !strings.Contains(in.Text, "forbidden")
		json.NewEncoder(w).Encode(map[string]any{"allowed": allowed, "reason": "the topic is not allowed"})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestChatGuardBlockCancels: a blocking guardrail cancels a slow source and
// the model call at once, and the client gets a refusal, not an answer.
func TestChatGuardBlockCancels(t *testing.T) {
	var cancelled atomic.Int32
	slow := lookupServer(t, 2*time.Second, 200, &cancelled)
	g := guardServer(t, 100*time.Millisecond)
	cfg := fmt.Sprintf(chatConfig, "20s") + fmt.Sprintf(`
guard:
  blocklist: [dynamite]
  http: {url: "%s", timeout: 1s}
sources:
  lookups:
    - {name: slow, url: "%s/y", timeout: 3s}
`, g.URL, slow.URL)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))

	start := time.Now()
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "tell me the forbidden thing"}, 0)
	took := time.Since(start)
	if r.last.kind != "error" || r.last.data["code"] != "guardrail_blocked" || r.text != "" {
		t.Fatalf("last %v, text %q", r.last, r.text)
	}
	if took > time.Second {
		t.Errorf("refusal took %v: the slow source was not cancelled", took)
	}
	deadline := time.Now().Add(2 * time.Second)
	for cancelled.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if cancelled.Load() != 1 {
		t.Error("the slow source never saw its request cancelled")
	}
	if st := gw.Sim("sim").Stats(); st.Started != 0 {
		t.Errorf("the model was called: %+v", st)
	}
	ans := storedAnswer(t, gw.URL, "", r.meta["conversation_id"].(string))
	if ans["status"] != "error" || ans["error"].(map[string]any)["code"] != "guardrail_blocked" {
		t.Errorf("stored %v", ans)
	}
	// The local blocklist refuses at once.
	r = chatOnce(t, gw.URL, "", map[string]any{"message": "how to make dynamite"}, 0)
	if r.last.data["code"] != "guardrail_blocked" {
		t.Errorf("blocklist: %v", r.last)
	}
}

// TestChatGuardCancelsModel: in parallel mode the model call starts before
// the verdict; a block cancels it and nothing it wrote reaches the client.
func TestChatGuardCancelsModel(t *testing.T) {
	g := guardServer(t, 200*time.Millisecond)
	cfg := fmt.Sprintf(chatConfig, "20s") + fmt.Sprintf("guard:\n  http: {url: \"%s\", timeout: 1s}\n", g.URL)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "forbidden [sim ttft=50ms gap=5ms tokens=100]"}, 0)
	if r.last.data["code"] != "guardrail_blocked" || r.text != "" {
		t.Fatalf("last %v, text %q", r.last, r.text)
	}
	if st := gw.Sim("sim").Stats(); st.Started != 1 || st.Cancelled != 1 {
		t.Errorf("sim %+v: want the model started and cancelled", st)
	}
}

// TestGuardModes measures what each guard mode costs in TTFW with an
// 80 ms remote guard (the lesson's classifier).
func TestGuardModes(t *testing.T) {
	g := guardServer(t, 80*time.Millisecond)
	ttfw := map[string]float64{}
	for _, mode := range []string{"before", "parallel"} {
		cfg := fmt.Sprintf(chatConfig, "20s") + fmt.Sprintf("chat:\n  guard_mode: %s\n  checkpoint_interval: 100ms\nguard:\n  http: {url: \"%s\", timeout: 1s}\n", mode, g.URL)
		cfg = strings.Replace(cfg, "chat:\n  checkpoint_interval: 100ms\nproviders", "providers", 1)
		gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
		var sum float64
		for range 5 {
			r := chatOnce(t, gw.URL, "", map[string]any{"message": "hello [sim ttft=100ms gap=1ms tokens=5]"}, 0)
			sum += r.last.data["timings"].(map[string]any)["ttfw_ms"].(float64)
		}
		ttfw[mode] = sum / 5
	}
	t.Logf("mean TTFW with an 80 ms remote guard and a 100 ms TTFT: before %.1f ms, parallel %.1f ms", ttfw["before"], ttfw["parallel"])
	if d := ttfw["before"] - ttfw["parallel"]; d < 50 {
		t.Errorf("parallel mode saved only %.1f ms", d)
	}
}

// TestTenantIsolation: a tenant can never read, list, continue or delete
// another tenant's conversation.
func TestTenantIsolation(t *testing.T) {
	gw := chatGateway(t, "20s")
	keys := map[string]string{}
	for _, tenant := range []string{"acme", "globex"} {
		if err := auth.EnsureTenant(context.Background(), gw.Store(), tenant, tenant); err != nil {
			t.Fatal(err)
		}
		key, prefix, hash := auth.NewKey()
		err := gw.Store().CreateAPIKey(context.Background(), &store.APIKey{ID: store.NewID("key_"), TenantID: tenant, UserID: tenant + "-user", Prefix: prefix, Hash: hash, CreatedAt: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		keys[tenant] = key
	}
	// Keys now exist: anonymous requests are refused (after the cache).
	time.Sleep(10 * time.Millisecond)
	r := chatOnce(t, gw.URL, keys["acme"], map[string]any{"message": "secret plans [sim ttft=5ms gap=1ms tokens=5]"}, 0)
	if r.status != 200 {
		t.Fatalf("acme: %d %s", r.status, r.body)
	}
	conv := r.meta["conversation_id"].(string)
	storedAnswer(t, gw.URL, keys["acme"], conv)

	if code, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+conv, keys["globex"]); code != 404 {
		t.Errorf("globex read acme's conversation: %d", code)
	}
	if _, list := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", keys["globex"]); len(list["data"].([]any)) != 0 {
		t.Errorf("globex listed %v", list)
	}
	if r := chatOnce(t, gw.URL, keys["globex"], map[string]any{"message": "hi", "conversation_id": conv}, 0); r.status != 404 {
		t.Errorf("globex continued acme's conversation: %d %s", r.status, r.body)
	}
	req, _ := http.NewRequest("DELETE", gw.URL+"/v1/conversations/"+conv, nil)
	req.Header.Set("Authorization", "Bearer "+keys["globex"])
	resp, _ := http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("globex deleted acme's conversation: %d", resp.StatusCode)
	}
	if code, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+conv, keys["acme"]); code != 200 {
		t.Errorf("acme lost its conversation: %d", code)
	}
	if code, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", ""); code != 401 {
		t.Errorf("no key: %d, want 401", code)
	}
	if code, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", "fw_aaaaaaaa_"+strings.Repeat("b", 32)); code != 401 {
		t.Errorf("wrong key: %d, want 401", code)
	}
	// Usage rows are written in the background, within moments.
	var usage map[string]any
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, usage = gatewaytest.GetJSON(t, gw.URL+"/v1/usage", keys["acme"]); len(usage["data"].([]any)) > 0 {
			break
		}
	}
	if data := usage["data"].([]any); len(data) != 1 || data[0].(map[string]any)["tenant_id"] != "acme" {
		t.Errorf("acme usage %v", usage)
	}
}

func TestChatBadRequests(t *testing.T) {
	gw := chatGateway(t, "20s")
	tests := []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"empty message", map[string]any{"message": "  "}, 400},
		{"unknown model", map[string]any{"message": "hi", "model": "gpt-9"}, 404},
		{"unknown conversation", map[string]any{"message": "hi", "conversation_id": "conv_nope"}, 404},
		{"unknown field", map[string]any{"message": "hi", "temperature": 2}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := chatOnce(t, gw.URL, "", tt.body, 0); r.status != tt.status || !strings.Contains(r.body, `"error"`) {
				t.Errorf("got %d %s, want %d", r.status, r.body, tt.status)
			}
		})
	}
}

// TestChatRedactsEverywhere: with the guard redacting personal data, no
// stored copy holds it: not the message, not the conversation's title, not
// the database file, and the model never sees it.
func TestChatRedactsEverywhere(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(chatConfig, "20s") + fmt.Sprintf("guard: {pii_action: redact}\nstore: {path: %s}\n", filepath.Join(dir, "fw.db"))
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
	const card, mail = "4111 1111 1111 1111", "bob@example.com"
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "mail me at " + mail + ", card " + card + " [sim echo ttft=1ms gap=1ms]"}, 0)
	if r.last.kind != "done" || !strings.Contains(r.text, "[redacted card]") || strings.Contains(r.text, card) || strings.Contains(r.text, mail) {
		t.Fatalf("the model saw %q (last event %v)", r.text, r.last)
	}
	convID := r.meta["conversation_id"].(string)
	storedAnswer(t, gw.URL, "", convID)
	_, conv := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+convID, "")
	_, list := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", "")
	for what, v := range map[string]any{"conversation": conv, "list": list} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), card) || strings.Contains(string(b), mail) || !strings.Contains(string(b), "[redacted email]") {
			t.Errorf("%s holds the raw data or lost the redaction: %s", what, b)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "fw.db*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(card)) || bytes.Contains(b, []byte(mail)) {
			t.Errorf("%s holds the raw data", filepath.Base(f))
		}
	}
}

// TestBuiltInConfigGuards: with no config file, /v1/chat has the guard on
// with its documented defaults.
func TestBuiltInConfigGuards(t *testing.T) {
	gw := gatewaytest.Start(t, config.Default())
	r := chatOnce(t, gw.URL, "", map[string]any{"model": "sim-small", "message": "card 4111 1111 1111 1111 [sim echo ttft=1ms gap=1ms]"}, 0)
	if r.last.kind != "done" || !strings.Contains(r.text, "[redacted card]") {
		t.Errorf("pii: text %q, last %v", r.text, r.last)
	}
	r = chatOnce(t, gw.URL, "", map[string]any{"model": "sim-small", "message": strings.Repeat("long ", 7000)}, 0)
	if r.last.kind != "error" || r.last.data["code"] != "guardrail_blocked" {
		t.Errorf("a 35,000-character message: last %v", r.last)
	}
}

// TestChatOnPostgres runs a chat turn end to end on PostgreSQL.
func TestChatOnPostgres(t *testing.T) {
	url := os.Getenv("FIRSTWORD_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("FIRSTWORD_TEST_POSTGRES_URL not set: skipping /v1/chat on PostgreSQL")
	}
	t.Setenv("FW_PG_URL", url)
	cfg := gatewaytest.MustParseEnv(t, "store: {driver: postgres, url_env: FW_PG_URL}\nresume: {grace: 0s}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n")
	gw := gatewaytest.Start(t, cfg)
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "hi [sim ttft=5ms gap=1ms tokens=12 fault=stall_mid after=6]"}, 6)
	ans := storedAnswer(t, gw.URL, "", r.meta["conversation_id"].(string))
	if ans["status"] != "cancelled" || ans["content"] != r.text {
		t.Errorf("stored %v, received %q", ans, r.text)
	}
	r = chatOnce(t, gw.URL, "", map[string]any{"message": "again [sim ttft=5ms gap=1ms tokens=12]", "conversation_id": r.meta["conversation_id"]}, 0)
	if r.last.kind != "done" || r.last.data["status"] != "complete" {
		t.Errorf("second turn: %v", r.last)
	}
}
