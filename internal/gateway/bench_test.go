package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/bench"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// BenchmarkStream streams a 20-chunk answer from a zero-delay upstream,
// directly and through the gateway, all in this process on loopback
// sockets. The difference is the gateway's cost per request.
func BenchmarkStream(b *testing.B) {
	up := &bench.Upstream{Chunks: 20}
	uln, _ := net.Listen("tcp", "127.0.0.1:0")
	usrv := &http.Server{Handler: up}
	go usrv.Serve(uln)
	defer usrv.Close()
	upURL := "http://" + uln.Addr().String()

	cfg, err := config.Parse("bench.yaml", []byte("providers:\n  up: {type: openai, base_url: "+upURL+"/v1}\nmodels:\n  zero: {deployments: [{provider: up, model: bench}]}\n"), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	gwURL := gatewaytest.Start(b, cfg).URL
	for _, tc := range []struct{ name, url string }{{"direct", upURL}, {"gateway", gwURL}} {
		b.Run(tc.name, func(b *testing.B) {
			c := bench.NewClient(8)
			defer c.CloseIdleConnections()
			b.ReportAllocs()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := bench.Stream(context.Background(), c, tc.url, "zero", false); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkJournalFirstWord measures what the resume journal adds to
// /v1/chat's first word: two gateways, the same but for resume.journal
// (memory, the default, against redis, named by FIRSTWORD_TEST_REDIS_URL),
// served in alternating rounds at concurrency 1 and 50, each request
// timed from its send to its first delta. It reports each journal's p50
// and p99 and the Redis journal's added p50 (ms). The store is SQLite in
// memory and the sim answers at once, so the difference is the journal.
//
//	FIRSTWORD_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench JournalFirstWord ./internal/gateway/
func BenchmarkJournalFirstWord(b *testing.B) {
	redisURL := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if redisURL == "" {
		b.Skip("FIRSTWORD_TEST_REDIS_URL not set: skipping the Redis journal's benchmark")
	}
	const yaml = "providers:\n  sim: {type: sim}\nmodels:\n  chat: {timeout: 30s, deployments: [{provider: sim, model: small}]}\nresume: {journal: %s, url: %q}\n"
	urls := map[string]string{}
	for _, j := range []string{"memory", "redis"} {
		cfg, err := config.Parse("bench.yaml", []byte(fmt.Sprintf(yaml, j, redisURL)), func(string) string { return "" })
		if err != nil {
			b.Fatal(err)
		}
		urls[j] = gatewaytest.Start(b, cfg).URL
	}
	for _, conc := range []int{1, 50} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			c := bench.NewClient(conc)
			defer c.CloseIdleConnections()
			ttfw := map[string][]time.Duration{}
			perRound := max(conc*4, 40)
			for range b.N {
				for _, j := range []string{"memory", "redis"} {
					ttfw[j] = append(ttfw[j], chatFirstWords(b, c, urls[j], conc, perRound)...)
				}
			}
			p := func(ds []time.Duration, q float64) float64 {
				slices.Sort(ds)
				return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(p(ttfw["memory"], 0.5), "memory-p50-ms")
			b.ReportMetric(p(ttfw["memory"], 0.99), "memory-p99-ms")
			b.ReportMetric(p(ttfw["redis"], 0.5), "redis-p50-ms")
			b.ReportMetric(p(ttfw["redis"], 0.99), "redis-p99-ms")
			b.ReportMetric(p(ttfw["redis"], 0.5)-p(ttfw["memory"], 0.5), "added-p50-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// chatFirstWords sends n /v1/chat turns, conc at a time, and returns each
// one's time from its send to its first delta.
func chatFirstWords(b *testing.B, c *http.Client, url string, conc, n int) []time.Duration {
	out, _ := chatStages(b, c, url, conc, n, "")
	return out
}

// chatStages is chatFirstWords that also returns, when stage is not "",
// each turn's time in that stage, from its done event's timings.
func chatStages(b *testing.B, c *http.Client, url string, conc, n int, stage string) (first, inStage []time.Duration) {
	out := make([]time.Duration, n)
	inStage = make([]time.Duration, n)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				req, _ := http.NewRequest("POST", url+"/v1/chat", strings.NewReader(`{"message":"hi [sim ttft=0ms gap=0ms tokens=20]"}`))
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				br := bufio.NewReader(resp.Body)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						if out[i] == 0 {
							b.Errorf("no delta: %v", err)
						}
						break
					}
					if line == "event: delta\n" && out[i] == 0 {
						out[i] = time.Since(start)
					}
					if d, ok := strings.CutPrefix(line, "data: "); ok && stage != "" && strings.Contains(d, `"timings"`) {
						inStage[i] = stageTime(b, d, stage)
					}
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return out, inStage
}

// stageTime reads a stage's duration from a done event's data.
func stageTime(b *testing.B, data, stage string) time.Duration {
	var done struct {
		Timings struct {
			Stages []struct {
				Name    string
				StartMs float64 `json:"start_ms"`
				EndMs   float64 `json:"end_ms"`
			}
		}
	}
	if err := json.Unmarshal([]byte(data), &done); err != nil {
		b.Fatalf("done event: %v", err)
	}
	for _, st := range done.Timings.Stages {
		if st.Name == stage {
			return time.Duration((st.EndMs - st.StartMs) * float64(time.Millisecond))
		}
	}
	b.Fatalf("no %s stage in %s", stage, data)
	return 0
}

// redisRoundTrips times n bare PINGs, conc at a time, each on a
// connection of its own: the round trip admission cannot do without.
func redisRoundTrips(b *testing.B, redisURL string, conc, n int) []time.Duration {
	u, err := url.Parse(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]time.Duration, n)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range conc {
		wg.Go(func() {
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				start := time.Now()
				if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
					b.Error(err)
					return
				}
				if line, err := br.ReadString('\n'); err != nil || line != "+PONG\r\n" {
					b.Errorf("PING: %q %v", line, err)
					return
				}
				out[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	return out
}

// BenchmarkLimitsFirstWord is what admission on Redis costs the first
// word: gateways that differ only in limits (none; the local tenant
// limited in requests, tokens and open streams, counted in Redis; the
// same counted in process), in alternating rounds at concurrency 1 and
// 50, each /v1/chat turn timed from its send to its first delta. The
// added figures are medians over the rounds of each round's p50 minus
// that round's p50 without limits.
//
//	FIRSTWORD_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench LimitsFirstWord -benchtime 10x ./internal/gateway/
func BenchmarkLimitsFirstWord(b *testing.B) {
	redisURL := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if redisURL == "" {
		b.Skip("FIRSTWORD_TEST_REDIS_URL not set: skipping the Redis limits' benchmark")
	}
	const base = "providers:\n  sim: {type: sim}\nmodels:\n  chat: {timeout: 30s, deployments: [{provider: sim, model: small}]}\n"
	configs := map[string]string{
		"off": base,
		"redis": base + fmt.Sprintf("limits: {driver: redis, url: %q}\n", redisURL) +
			"tenants:\n  local: {limits: {requests_per_minute: 100000000, tokens_per_minute: 1000000000, concurrent_streams: 100000}}\n",
		"memory": base + "tenants:\n  local: {limits: {requests_per_minute: 100000000, tokens_per_minute: 1000000000, concurrent_streams: 100000}}\n",
	}
	urls := map[string]string{}
	for name, y := range configs {
		cfg, err := config.Parse("bench.yaml", []byte(y), func(string) string { return "" })
		if err != nil {
			b.Fatal(err)
		}
		urls[name] = gatewaytest.Start(b, cfg).URL
	}
	for _, conc := range []int{1, 50} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			c := bench.NewClient(conc)
			defer c.CloseIdleConnections()
			ttfw := map[string][]time.Duration{}
			perRound := max(conc*4, 40)
			p := func(ds []time.Duration, q float64) float64 {
				ds = slices.Sorted(slices.Values(ds))
				return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000
			}
			// Added latency per round (its p50 minus the same round's
			// p50 without limits), whose median is reported: a round's
			// modes ran within a second of each other, on the same
			// machine state.
			var added, memAdded []float64
			admission := map[string][]time.Duration{}
			modes := []string{"off", "redis", "memory"}
			for i := range b.N {
				round := map[string][]time.Duration{}
				// Each round in another order: the first of a round is
				// not always the same gateway.
				for k := range modes {
					m := modes[(i+k)%len(modes)]
					stage := "admission"
					if m == "off" {
						stage = ""
					}
					var st []time.Duration
					round[m], st = chatStages(b, c, urls[m], conc, perRound, stage)
					ttfw[m] = append(ttfw[m], round[m]...)
					admission[m] = append(admission[m], st...)
				}
				added = append(added, p(round["redis"], 0.5)-p(round["off"], 0.5))
				memAdded = append(memAdded, p(round["memory"], 0.5)-p(round["off"], 0.5))
				ttfw["rtt"] = append(ttfw["rtt"], redisRoundTrips(b, redisURL, conc, perRound)...)
			}
			median := func(v []float64) float64 { v = slices.Sorted(slices.Values(v)); return v[len(v)/2] }
			b.ReportMetric(p(ttfw["off"], 0.5), "off-p50-ms")
			b.ReportMetric(p(ttfw["redis"], 0.5), "redis-p50-ms")
			b.ReportMetric(median(added), "added-p50-ms")
			b.ReportMetric(median(memAdded), "memory-added-p50-ms")
			// Admission is one stage before the model call: its own time
			// is what it adds, read from each turn's timings.
			b.ReportMetric(p(admission["redis"], 0.5), "redis-admission-p50-ms")
			b.ReportMetric(p(admission["redis"], 0.95), "redis-admission-p95-ms")
			b.ReportMetric(p(admission["memory"], 0.5), "memory-admission-p50-ms")
			// The floor: one bare Redis round trip (PING on a connection of
			// its own) at the same concurrency, in the same rounds.
			b.ReportMetric(p(ttfw["rtt"], 0.5), "redis-rtt-p50-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
