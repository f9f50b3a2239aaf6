package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestCPUPerEvent measures the gateway process's CPU (user+system, from
// /proc) per streamed event: a /v1/chat event against a
// /v1/chat/completions chunk, in one process, with the memory journal and
// with the Redis journal (on a Redis of the test's own). It is a
// measurement, not a check (CI machines are noisy): it runs only with
// FIRSTWORD_CPU_PER_EVENT=1 and reports in the test log; the figures go
// in docs/BENCHMARKS.md.
//
//	FIRSTWORD_CPU_PER_EVENT=1 go test -run TestCPUPerEvent -v ./internal/gateway/
func TestCPUPerEvent(t *testing.T) {
	if os.Getenv("FIRSTWORD_CPU_PER_EVENT") == "" {
		t.Skip("a measurement: set FIRSTWORD_CPU_PER_EVENT=1 to run it")
	}
	url, _ := ownRedis(t)
	const turns, tokens = 30, 100
	for _, journal := range []string{"memory", "redis", "redis, flush_interval 1ms"} {
		t.Run(journal, func(t *testing.T) {
			dir := t.TempDir()
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			addr := ln.Addr().String()
			ln.Close()
			resume := "resume: {journal: memory}"
			switch journal {
			case "redis":
				resume = fmt.Sprintf("resume: {journal: redis, url: %q}", url)
			case "redis, flush_interval 1ms": // about one write per event, as before batching
				resume = fmt.Sprintf("resume: {journal: redis, url: %q, flush_interval: 1ms}", url)
			}
			cfg := filepath.Join(dir, "fw.yaml")
			os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %s
store: {driver: sqlite, path: %q}
usage: {spill_path: %q}
%s
providers:
  sim: {type: sim}
models:
  chat: {timeout: 60s, deployments: [{provider: sim, model: small}]}
`, addr, filepath.Join(dir, "fw.db"), filepath.Join(dir, "spill"), resume)), 0o600)
			p := startProcess(t, cfg, addr)
			t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
			directive := fmt.Sprintf("[sim ttft=1ms gap=1ms tokens=%d]", tokens)
			client := &http.Client{}
			post := func(path, body string) {
				resp, err := client.Post(p.url+path, "application/json", bytes.NewReader([]byte(body)))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d", path, resp.StatusCode)
				}
			}
			chat := func(i int) {
				post("/v1/chat", fmt.Sprintf(`{"message":"cpu %d %s"}`, i, directive))
			}
			completion := func(i int) {
				post("/v1/chat/completions", fmt.Sprintf(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"cpu %d %s"}]}`, i, directive))
			}
			pid := []int{p.cmd.Process.Pid}
			for i := range 5 { // warm up
				chat(i)
				completion(i)
			}
			measure := func(run func(int)) float64 {
				c0 := cpuTicks(t, pid)
				for i := range turns {
					run(i)
				}
				return float64(cpuTicks(t, pid)-c0) * 10000 / (turns * tokens) // µs per event (ticks are 10 ms)
			}
			completions := measure(completion)
			chatEvent := measure(chat)
			t.Logf("%s journal: %.0f µs of CPU per /v1/chat event, %.0f µs per /v1/chat/completions chunk: %.2fx", journal, chatEvent, completions, chatEvent/completions)
		})
	}
}
