package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/router"
)

// instant is a provider that answers at once with n one-word chunks and
// usage, so that benchmarks measure firstword's own cost.
func instant(n int) provider.Provider {
	return provider.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			for i := range n {
				if !yield(chat.Chunk{Text: " word", Model: "m", More: i < n-1}, nil) {
					return
				}
			}
			yield(chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 10, OutputTokens: n}}, nil)
		}
	})
}

func benchServer(b *testing.B, p provider.Provider) *Server {
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: p}}}}})
	if err != nil {
		b.Fatal(err)
	}
	return New(Options{Router: r, Meter: metering.NewMemory(100)})
}

// BenchmarkHandler is the gateway's own CPU cost per streamed request,
// without sockets: parse, route, stream 20 chunks, meter, log.
func BenchmarkHandler(b *testing.B) {
	s := benchServer(b, instant(20))
	body := `{"model":"m","stream":true,"messages":[{"role":"system","content":"You are brief."},{"role":"user","content":"Hello there, how are you today?"}]}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
