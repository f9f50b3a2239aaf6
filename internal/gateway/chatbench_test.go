package gateway_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// BenchmarkChatPipeline measures the /v1/chat pipeline's own cost per
// request with SQLite at 50 concurrent chats: everything but the
// provider's time, with the guardrail and checkpoints on. From
// each done event's timings, own cost = the time before the upstream call
// started (auth, parse, store, guard, context, prompt, routing) + the time
// after its last token until done was sent (persisting the answer).
// Reported: p50 and p99 of that, and of TTFW, in ms.
func BenchmarkChatPipeline(b *testing.B) {
	cfg := fmt.Sprintf(`
heartbeat: 10s
store: {path: %s}

guard: {blocklist: [dynamite]}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: medium}]}
`, filepath.Join(b.TempDir(), "bench.db"))
	gw := gatewaytest.Start(b, gatewaytest.MustParse(b, cfg))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var own, ttfw, pre, post []float64
	// The sim's medium tier (TTFT ~600 ms, 80 tokens/s, jittered) with
	// 40-token answers; each client starts at a random moment, so the 50
	// chats are not in lockstep.
	body := `{"model":"chat","message":"Where is my order? [sim tokens=40]"}`
	b.SetParallelism(25) // 50 concurrent chats on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		time.Sleep(rand.N(time.Second))
		for pb.Next() {
			resp, err := client.Post(gw.URL+"/v1/chat", "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			var done struct {
				Status  string `json:"status"`
				Timings struct {
					TTFW   float64 `json:"ttfw_ms"`
					TTC    float64 `json:"ttc_ms"`
					Stages []struct {
						Name    string
						StartMs float64 `json:"start_ms"`
						EndMs   float64 `json:"end_ms"`
					} `json:"stages"`
				} `json:"timings"`
			}
			for _, ev := range gatewaytest.ReadEvents(resp.Body) {
				if strings.Contains(ev.Data, `"timings"`) {
					json.Unmarshal([]byte(ev.Data), &done)
				}
			}
			resp.Body.Close()
			if done.Status != "complete" {
				b.Errorf("turn ended %q", done.Status)
				return
			}
			var upStart, upEnd float64
			for _, s := range done.Timings.Stages {
				if strings.HasPrefix(s.Name, "upstream ") {
					upStart, upEnd = s.StartMs, s.EndMs
				}
			}
			mu.Lock()
			own = append(own, upStart+done.Timings.TTC-upEnd)
			pre = append(pre, upStart)
			post = append(post, done.Timings.TTC-upEnd)
			ttfw = append(ttfw, done.Timings.TTFW)
			mu.Unlock()
		}
	})
	b.StopTimer()
	pct := func(v []float64, p float64) float64 {
		slices.Sort(v)
		return v[min(len(v)-1, int(p/100*float64(len(v))))]
	}
	b.ReportMetric(pct(own, 50), "own-p50-ms")
	b.ReportMetric(pct(own, 99), "own-p99-ms")
	b.ReportMetric(pct(pre, 99), "before-p99-ms")
	b.ReportMetric(pct(post, 99), "after-p99-ms")
	b.ReportMetric(pct(ttfw, 50), "ttfw-p50-ms")
	b.ReportMetric(pct(ttfw, 99), "ttfw-p99-ms")
}
