package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the real firstword command once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "firstword-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "firstword")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/firstword/firstword/cmd/firstword").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// process is the real binary running "serve".
type process struct {
	cmd *exec.Cmd
	url string
	log gatewaytest.LogBuffer
}

func startProcess(t *testing.T, cfgPath, addr string) *process {
	t.Helper()
	p := &process{url: "http://" + addr}
	p.cmd = exec.Command(binary(t), "serve", "--config", cfgPath)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(p.url + "/healthz"); err == nil {
			resp.Body.Close()
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.cmd.Process.Kill()
	t.Fatalf("firstword did not start:\n%s", p.log.String())
	return nil
}

// TestCrashMidStream runs the real binary, kills it with SIGKILL while an
// answer streams, restarts it, and finds the answer interrupted with its
// last checkpoint, and the user's (acknowledged) message intact. The
// client then resumes from its last event id: the restarted process
// continues the answer from the checkpoint (issue 33), the client is
// rewound to the start and given the saved text and the rest, and the
// answer is stored complete, as the unbroken answer reads.
func TestCrashMidStream(t *testing.T) {
	dir := t.TempDir()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "firstword.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %s
store: {path: %s}
chat: {checkpoint_interval: 100ms}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`, addr, filepath.Join(dir, "firstword.db"))), 0o600)

	p := startProcess(t, cfg, addr)
	message := "Tell me everything. [sim ttft=10ms gap=20ms tokens=200]"
	resp, err := http.Post(p.url+"/v1/chat", "application/json", strings.NewReader(`{"message":"`+message+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read about 30 tokens (600 ms), keeping the connection open: the
	// client is still there when the server dies.
	var meta map[string]any
	var text strings.Builder
	var lastID string
	br := bufio.NewReader(resp.Body)
	deltas := 0
	for deltas < 30 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
			lastID = id
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		json.Unmarshal([]byte(data), &ev)
		if meta == nil {
			meta = ev
			continue
		}
		if s, ok := ev["text"].(string); ok {
			text.WriteString(s)
			deltas++
		}
	}
	// At least one checkpoint (every 100 ms) after what we read, and time
	// for its write to commit on a loaded machine (a write still in flight
	// at the kill leaves the one before).
	time.Sleep(400 * time.Millisecond)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	r := struct {
		meta map[string]any
		text string
	}{meta, text.String()}

	p2 := startProcess(t, cfg, addr)
	defer func() {
		p2.cmd.Process.Signal(os.Interrupt)
		p2.cmd.Wait()
	}()
	// Log lines are written in batches within 10 ms: wait for it.
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(p2.log.String(), "interrupted") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(p2.log.String(), "interrupted") {
		t.Errorf("restart did not report interrupted answers:\n%s", p2.log.String())
	}
	conv := r.meta["conversation_id"].(string)
	code, c := gatewaytest.GetJSON(t, p2.url+"/v1/conversations/"+conv, "")
	if code != 200 {
		t.Fatalf("conversation after restart: %d", code)
	}
	msgs := c["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("%d messages after restart, want 2", len(msgs))
	}
	user, ans := msgs[0].(map[string]any), msgs[1].(map[string]any)
	if user["content"] != message || user["status"] != "complete" {
		t.Errorf("the acknowledged user message was lost: %v", user)
	}
	content, _ := ans["content"].(string)
	if ans["status"] != "interrupted" || content == "" {
		t.Fatalf("answer after restart: status %v, content %q", ans["status"], content)
	}
	// The checkpoint holds everything we had read (and perhaps a little
	// more that was in flight when the process died).
	if !strings.HasPrefix(content, r.text) {
		t.Errorf("checkpoint %q does not start with the %d bytes the client received", content, len(r.text))
	}
	t.Logf("received %d bytes before the kill; the interrupted answer kept %d", len(r.text), len(content))

	// The client resumes: the answer is continued from the checkpoint.
	rest := resume(t, p2.url, conv, lastID, nil)
	if len(rest.events) < 3 || rest.events[0].kind != "rewind" || rest.events[0].data["offset"] != float64(0) ||
		rest.last.kind != "done" || rest.last.data["status"] != "complete" || rest.last.data["continued"] != true {
		t.Fatalf("resume after the restart from %s: %d events, first %v, last %q %v", lastID, len(rest.events), rest.events[:min(1, len(rest.events))], rest.last.kind, rest.last.data)
	}
	clean := chatOnce(t, p2.url, "", map[string]any{"message": message}, 0)
	if rest.text != clean.text || !strings.HasPrefix(rest.text, content) {
		t.Errorf("the resumed answer reads\n%q\nthe unbroken answer\n%q", rest.text, clean.text)
	}
	code, c = gatewaytest.GetJSON(t, p2.url+"/v1/conversations/"+conv, "")
	if code != 200 {
		t.Fatalf("conversation after the continuation: %d", code)
	}
	ans = c["messages"].([]any)[1].(map[string]any)
	if ans["status"] != "complete" || ans["content"] != clean.text {
		t.Errorf("stored %v %q after the continuation, want complete with the whole answer", ans["status"], ans["content"])
	}
}
