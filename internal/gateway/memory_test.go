package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/bench"
	"github.com/firstword/firstword/internal/sse"
)

// TestOpenStreamStacks holds 200 streams open through the real binary
// (built as it is served, without the race detector) and reads what each
// costs in goroutine stacks. An open stream has four goroutines: the
// client connection's, its background read, and the upstream
// connection's read and write loops. Together they fit in 18 KiB only if
// the connection's goroutine stays at 8 KiB, which holds as long as the
// deepest moment of a stream, the first chunk's write (headers and all,
// made under every frame between the handler and the upstream read),
// stays within it. A frame too many and every open stream costs 8 KiB
// more: this is what catches it.
func TestOpenStreamStacks(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: it builds and runs the binary (make test and .ci/run run it)")
	}
	up := httptest.NewServer(bench.Upstreams())
	defer up.Close()
	defer up.CloseClientConnections()
	anth := httptest.NewServer(http.HandlerFunc(holdAnthropic))
	defer anth.Close()
	defer anth.CloseClientConnections()
	gem := httptest.NewServer(http.HandlerFunc(holdGemini))
	defer gem.Close()
	defer gem.CloseClientConnections()
	oll := httptest.NewServer(http.HandlerFunc(holdOllama))
	defer oll.Close()
	defer oll.CloseClientConnections()
	// With an upstream: the connection's 8 KiB, the upstream
	// connection's read and write loops at 4 KiB each, the background
	// read's 2 KiB. The sim has no upstream connection. A connection
	// goroutine that outgrew 8 KiB adds 8 more.
	for _, tt := range []struct {
		name, provider, model, content string
		limit                          float64
	}{
		{"openai upstream", "{type: openai, base_url: " + up.URL + "/hold/v1}", "bench", "benchmark", 22},
		{"anthropic upstream", "{type: anthropic, base_url: " + anth.URL + "/v1}", "claude", "benchmark", 22},
		{"gemini upstream", "{type: gemini, base_url: " + gem.URL + "/v1beta}", "gemini-x", "benchmark", 22},
		{"ollama upstream", "{type: ollama, base_url: " + oll.URL + "}", "llama", "benchmark", 22},
		// The sim's first token, then a minute's wait for the next.
		{"sim", "{type: sim}", "small", "[sim ttft=1ms gap=60s tokens=5]", 14},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stackPer, heapPer := openStreamCost(t, tt.provider, tt.model, tt.content)
			t.Logf("per open stream: %.1f KiB of goroutine stacks, %.1f KiB of heap", stackPer, heapPer)
			if stackPer > tt.limit {
				t.Errorf("%.1f KiB of goroutine stacks per open stream, want at most %.0f (the connection's goroutine outgrew 8 KiB)", stackPer, tt.limit)
			}
		})
	}
}

// openStreamCost runs the binary with one alias on provider, holds 200
// streams open on it and returns the goroutine stacks and heap each
// costs, in KiB.
func openStreamCost(t *testing.T, provider, model, content string) (stack, heap float64) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "firstword.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %s
store: {path: %s}
auth: {cache_ttl: 10m}
providers:
  up: %s
models:
  hold: {deployments: [{provider: up, model: %s}]}
`, addr, filepath.Join(dir, "firstword.db"), provider, model)), 0o600)
	p := startProcess(t, cfg, addr)
	defer func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}()

	body := `{"model":"hold","stream":true,"messages":[{"role":"user","content":"` + content + `"}]}`
	open := func(c *http.Client) io.Closer {
		t.Helper()
		resp, err := c.Post(p.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		// Wait for the first text.
		rd := sse.NewReader(resp.Body, 0)
		for {
			ev, err := rd.Next()
			if err != nil {
				t.Fatalf("stream ended before its first text: %v", err)
			}
			if bytes.Contains(ev.Data, []byte(`"content":"`)) && !bytes.Contains(ev.Data, []byte(`"content":""`)) {
				return resp.Body
			}
		}
	}
	warm := bench.NewClient(4)
	for range 10 {
		open(warm).Close()
	}
	warm.CloseIdleConnections()

	stats := func() (stack, heap float64) {
		resp, err := http.Post(p.url+"/admin/gc", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST /admin/gc: %d, %v", resp.StatusCode, err)
		}
		return v["stack_inuse"].(float64), v["heap_alloc"].(float64)
	}
	stack0, heap0 := stats()
	const n = 200
	c := bench.NewClient(n)
	defer c.CloseIdleConnections()
	var bodies []io.Closer
	defer func() {
		for _, b := range bodies {
			b.Close()
		}
	}()
	for range n {
		bodies = append(bodies, open(c))
	}
	stack1, heap1 := stats()
	return (stack1 - stack0) / n / 1024, (heap1 - heap0) / n / 1024
}

// holdAnthropic is an Anthropic upstream that streams its first text and
// then holds the stream open until the client leaves.
func holdAnthropic(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n"+
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func holdGemini(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"modelVersion":"gemini-x"}`+"\r\n\r\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func holdOllama(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/x-ndjson")
	io.WriteString(w, `{"model":"llama","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"Hello"},"done":false}`+"\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}
