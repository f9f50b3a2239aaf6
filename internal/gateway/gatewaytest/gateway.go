package gatewaytest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/gateway"
	"github.com/firstword/firstword/internal/provider/sim"
)

// Gateway is a running firstword on a real socket.
type Gateway struct {
	*gateway.Gateway
	URL string
	cfg *config.Config

	once    sync.Once
	stopped error
	stop    func() error
}

// StartYAML builds firstword from YAML text (with {{UP}} replaced by the
// upstream's URL) and serves it as Start does.
func StartYAML(t testing.TB, yamlText, upstream string) *Gateway {
	t.Helper()
	yamlText = strings.ReplaceAll(yamlText, "{{UP}}", upstream)
	cfg, err := config.Parse("test.yaml", []byte(yamlText), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return Start(t, cfg)
}

// Start builds a gateway from cfg, wraps its handler in mw (the first
// outermost), and serves it with Gateway.Serve on a loopback socket until
// the test ends (or Stop). Its drain on stopping, cfg.ShutdownTimeout, is
// cut to 5 s at most: a stream a test left open should not hold the
// test's end for the default 30 s. The log is discarded, unless go test
// runs with -v.
func Start(t testing.TB, cfg *config.Config, mw ...func(http.Handler) http.Handler) *Gateway {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.ShutdownTimeout = min(cfg.ShutdownTimeout, 5*time.Second)
	gw, err := gateway.Build(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	ln, err := gateway.ListenTCP("127.0.0.1:0")
	if err != nil {
		gw.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, ln, mw...) }()
	g := &Gateway{Gateway: gw, URL: "http://" + ln.Addr().String(), cfg: cfg}
	g.stop = func() error {
		cancel()
		err := <-done
		gw.Close()
		return err
	}
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return g
}

// Stop shuts the gateway down as SIGTERM does (Serve's context ends),
// waits for Serve to return, closes the gateway and returns Serve's
// error. Later calls return the same; the test's end calls it.
func (g *Gateway) Stop() error {
	g.once.Do(func() { g.stopped = g.stop() })
	return g.stopped
}

// Config is the configuration the gateway was built from.
func (g *Gateway) Config() *config.Config { return g.cfg }

// SimStats reads the counters of the simulated provider configured as
// name from GET /admin/sim, with key (none in local mode).
func (g *Gateway) SimStats(t testing.TB, name, key string) sim.Stats {
	t.Helper()
	var stats map[string]sim.Stats
	if code := getInto(t, g.URL+"/admin/sim", key, &stats); code != http.StatusOK {
		t.Fatalf("GET /admin/sim: %d", code)
	}
	return stats[name]
}

// LogBuffer collects a server's log (a child process's output, or
// serve's stderr) while the test reads it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
