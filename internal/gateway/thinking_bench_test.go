package gateway_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/bench"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// BenchmarkThinkingStream streams 40 chunks from a zero-delay upstream,
// directly and through the gateway: all answer, or 20 thinking deltas
// (delta.reasoning_content) then 20 answer deltas. Per request, the
// gateway's cost is the difference between its row and direct's; the
// thinking rows must cost no more than the answer rows. first-ms is the
// median time to the first event of each kind (thought or word) the
// client parsed.
func BenchmarkThinkingStream(b *testing.B) {
	for _, shape := range []struct {
		name             string
		thinking, answer int
	}{{"answer", 0, 40}, {"thinking", 20, 20}} {
		up := &bench.Upstream{Thinking: shape.thinking, Chunks: shape.answer}
		uln, _ := net.Listen("tcp", "127.0.0.1:0")
		usrv := &http.Server{Handler: up}
		go usrv.Serve(uln)
		upURL := "http://" + uln.Addr().String()
		cfg, err := config.Parse("bench.yaml", []byte("providers:\n  up: {type: openai, base_url: "+upURL+"/v1}\nmodels:\n  zero: {deployments: [{provider: up, model: bench}]}\n"), func(string) string { return "" })
		if err != nil {
			b.Fatal(err)
		}
		gwURL := gatewaytest.Start(b, cfg).URL
		for _, target := range []struct{ name, url string }{{"direct", upURL}, {"gateway", gwURL}} {
			b.Run(shape.name+"/"+target.name, func(b *testing.B) {
				c := bench.NewClient(1)
				defer c.CloseIdleConnections()
				b.ReportAllocs()
				var firsts []time.Duration
				for b.Loop() {
					s, err := bench.Stream(context.Background(), c, target.url, "zero", false)
					if err != nil {
						b.Fatal(err)
					}
					first := s.TTFT
					if shape.thinking > 0 {
						if s.FirstThought == 0 {
							b.Fatal("no thinking reached the client")
						}
						first = s.FirstThought
					}
					firsts = append(firsts, first)
				}
				slices.Sort(firsts)
				b.ReportMetric(float64(firsts[len(firsts)/2].Microseconds())/1000, "first-ms")
			})
		}
		usrv.Close()
	}
}
