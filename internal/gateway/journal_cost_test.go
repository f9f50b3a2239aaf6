package gateway_test

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestJournalCommandsPerTurn (issue 35): Redis commands per 100-event
// /v1/chat turn with the Redis journal, counted by the server
// (INFO commandstats, which counts a script's own calls too) on a Redis
// of the test's own, for a turn of about 0.5 s and one of about 4 s. At
// the default flush_interval (250ms) they are at most 15 and 30; with
// flush_interval 1ms (close to one write per event, as before batching)
// the figures are logged for comparison. Answers are whole either way.
func TestJournalCommandsPerTurn(t *testing.T) {
	url, _ := ownRedis(t)
	for _, tc := range []struct {
		name  string
		gap   string
		flush string
		max   float64       // 0: logged only
		lasts time.Duration // the turn the max is for
	}{
		{"0.5s turn", "5ms", "", 15, 500 * time.Millisecond},
		{"4s turn", "40ms", "", 30, 4 * time.Second},
		{"0.5s turn, flush_interval 1ms", "5ms", "1ms", 0, 0},
		{"4s turn, flush_interval 1ms", "40ms", "1ms", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flush := ""
			if tc.flush != "" {
				flush = ", flush_interval: " + tc.flush
			}
			gw := gatewaytest.StartYAML(t, `
resume: {journal: redis, url: "`+url+`", lease: 3s`+flush+`}
providers:
  sim: {type: sim}
models:
  chat: {timeout: 60s, deployments: [{provider: sim, model: small}]}
`, "")
			const turns = 6
			before := commandstats(t, url)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var took time.Duration
			for i := range turns {
				wg.Go(func() {
					start := time.Now()
					defer func() {
						mu.Lock()
						took += time.Since(start)
						mu.Unlock()
					}()
					r := chatOnce(t, gw.URL, "", map[string]any{"message": fmt.Sprintf("count me %d [sim ttft=5ms gap=%s tokens=100]", i, tc.gap)}, 0)
					if r.last.kind != "done" {
						t.Errorf("turn %d ended %q %v", i, r.last.kind, r.last.data)
					}
				})
			}
			wg.Wait()
			time.Sleep(300 * time.Millisecond) // the last writes are off the answers' path
			after := commandstats(t, url)
			total := 0
			var calls []string
			usec := float64(after["usec"]-before["usec"]) / turns
			delete(after, "usec")
			for cmd, n := range after {
				if d := n - before[cmd]; d > 0 && cmd != "info" {
					total += d
					calls = append(calls, fmt.Sprintf("%s %.1f", cmd, float64(d)/turns))
				}
			}
			per, avg := float64(total)/turns, took/turns
			t.Logf("%s: %.1f Redis commands per 100-event turn of %v, %.0f µs of Redis's time, %.0f bytes per retained answer's stream (%s)",
				tc.name, per, avg.Round(time.Millisecond), usec, streamBytes(t, url), strings.Join(calls, ", "))
			// A turn a busy machine slowed renews its lease more often:
			// the bound grows with it.
			if limit := tc.max * max(1, float64(avg)/float64(tc.lasts)); tc.max > 0 && per > limit {
				t.Errorf("%.1f Redis commands per turn of %v, want at most %.1f", per, avg, limit)
			}
		})
	}
}

// commandstats is each command's call count on the Redis at url, and
// under "usec" the microseconds Redis spent in all but INFO.
func commandstats(t *testing.T, url string) map[string]int {
	t.Helper()
	out, err := exec.Command("redis-cli", "-u", url, "INFO", "commandstats").Output()
	if err != nil {
		t.Fatalf("redis-cli INFO commandstats: %v", err)
	}
	stats := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		stats[name] = n
		if _, us, ok := strings.Cut(rest, ",usec="); ok && name != "info" {
			u, _ := strconv.Atoi(us[:strings.IndexByte(us, ',')])
			stats["usec"] += u
		}
	}
	return stats
}

// streamBytes is the mean MEMORY USAGE of the journal's answer streams
// on the Redis at url, and deletes them (the next case counts its own).
func streamBytes(t *testing.T, url string) float64 {
	t.Helper()
	out, err := exec.Command("redis-cli", "-u", url, "--scan", "--pattern", "firstword:journal:*:s").Output()
	if err != nil {
		t.Fatalf("redis-cli --scan: %v", err)
	}
	keys := strings.Fields(string(out))
	total := 0
	for _, k := range keys {
		b, err := exec.Command("redis-cli", "-u", url, "MEMORY", "USAGE", k, "SAMPLES", "0").Output()
		if err != nil {
			t.Fatalf("redis-cli MEMORY USAGE: %v", err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		total += n
		exec.Command("redis-cli", "-u", url, "DEL", k).Run()
	}
	if len(keys) == 0 {
		return 0
	}
	return float64(total) / float64(len(keys))
}
