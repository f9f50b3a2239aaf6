package cli_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// BenchmarkChatPipeline measures the /v1/chat pipeline's own cost per
// request at 50 concurrent chats, on SQLite: an instant sim provider
// (no TTFT, 20 tokens at once), so the server-side time to complete
// reported in the done event is all firstword's own (auth, store writes,
// guard, context, prompt, routing, streaming, checkpoint, persist).
// Reported: p50 and p99 of that time, in ms.
func BenchmarkChatPipeline(b *testing.B) {
	cfg := fmt.Sprintf(`
heartbeat: 10s
store: {path: %s}
guard: {blocklist: [dynamite]}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`, filepath.Join(b.TempDir(), "bench.db"))
	gw := startApp(b, mustParse(b, cfg))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var own []float64
	body := `{"model":"chat","message":"Where is my order? [sim ttft=0s gap=0s tokens=20]"}`
	b.SetParallelism(25) // 50 concurrent chats on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(gw.URL+"/v1/chat", "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			var done map[string]any
			for _, ev := range readEvents(resp.Body) {
				if strings.Contains(ev.data, `"timings"`) && strings.Contains(ev.data, `"status":"complete"`) {
					json.Unmarshal([]byte(ev.data), &done)
				}
			}
			resp.Body.Close()
			if done == nil {
				b.Error("no done event")
				return
			}
			ttc := done["timings"].(map[string]any)["ttc_ms"].(float64)
			mu.Lock()
			own = append(own, ttc)
			mu.Unlock()
		}
	})
	b.StopTimer()
	slices.Sort(own)
	pct := func(p float64) float64 { return own[min(len(own)-1, int(p/100*float64(len(own))))] }
	b.ReportMetric(pct(50), "p50-ms")
	b.ReportMetric(pct(99), "p99-ms")
}
