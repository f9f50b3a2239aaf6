package gateway_test

import (
	"context"
	"net"
	"net/http"
	"testing"

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
