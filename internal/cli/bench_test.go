package cli_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/bench"
	"github.com/firstword/firstword/internal/cli"
	"github.com/firstword/firstword/internal/config"
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
	app, err := cli.Build(context.Background(), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer app.Close()
	gln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- app.Serve(ctx, gln, time.Second) }()
	defer func() { cancel(); <-done }()
	gwURL := "http://" + gln.Addr().String()

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
