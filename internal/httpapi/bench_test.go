package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/budget/window"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/metrics"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/router"
)

// instant is a provider that answers at once with n one-word chunks and
// usage, so that benchmarks measure firstword's own cost.
func instant(n int) provider.Provider {
	return providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			for i := range n {
				if !yield(chat.Chunk{Text: " word", Model: "m", More: i > 0 && i < n-1}, nil) {
					return
				}
			}
			yield(chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 10, OutputTokens: n}}, nil)
		}
	})
}

func benchServer(b *testing.B, p provider.Provider, observed bool) *Server {
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: p}}}}})
	if err != nil {
		b.Fatal(err)
	}
	opt := Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(100)}
	if observed {
		m := metrics.New(r.Health)
		w := window.New(5*time.Minute, window.Targets{}, 50)
		opt.Meter = metering.Multi{metering.NewMemory(100), m, windowMeter{w}, metering.Log{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}}
		opt.Streams = m
	}
	return New(opt)
}

// noLevers puts r behind levers that leave every request alone (no cache,
// no coalescing, no rules), as the surfaces expect a router to be.
func noLevers(r *router.Router) *levers.Levers {
	return levers.New(levers.Options{Inner: r, Unlisted: &levers.Alias{}})
}

type windowMeter struct{ w *window.Window }

func (m windowMeter) Record(_ context.Context, r *metering.Record) {
	m.w.Observe(time.Now(), r.RequestID, r.Tenant, r.User, r.Surface, r.Alias, string(r.Status), r.Timings)
}

// BenchmarkHandler is the gateway's own CPU cost per streamed request,
// without sockets: parse, route, stream 20 chunks, meter. "bare" keeps
// only in-memory metering; "observed" adds what serve runs: Prometheus
// metrics, the budget window, and the JSON request log.
func BenchmarkHandler(b *testing.B) {
	body := `{"model":"m","stream":true,"messages":[{"role":"system","content":"You are brief."},{"role":"user","content":"Hello there, how are you today?"}]}`
	for _, observed := range []bool{false, true} {
		name := "bare"
		if observed {
			name = "observed"
		}
		b.Run(name, func(b *testing.B) {
			s := benchServer(b, instant(20), observed)
			b.ReportAllocs()
			var ttft time.Duration
			for b.Loop() {
				req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				w := &firstWrite{ResponseRecorder: httptest.NewRecorder()}
				start := time.Now()
				s.ServeHTTP(w, req)
				ttft += w.at.Sub(start)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code, w.Body.String())
				}
			}
			b.ReportMetric(float64(ttft.Nanoseconds())/float64(b.N), "ns-to-first-byte")
		})
	}
}

// firstWrite records when the first body byte was written.
type firstWrite struct {
	*httptest.ResponseRecorder
	at time.Time
}

func (w *firstWrite) Write(p []byte) (int, error) {
	if w.at.IsZero() {
		w.at = time.Now()
	}
	return w.ResponseRecorder.Write(p)
}

func (w *firstWrite) Flush() { w.ResponseRecorder.Flush() }
