package router

import (
	"context"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider/providertest"
)

// answer is an upstream that answers at once with a few chunks.
var answer = providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		for _, c := range [...]chat.Chunk{{Text: "Hello"}, {Text: " world"}, {FinishReason: chat.FinishStop}} {
			if !yield(c, nil) {
				return
			}
		}
	}
})

// BenchmarkRoute measures the router's overhead per request. With every
// circuit closed (the common case) it must not pay for the breakers.
func BenchmarkRoute(b *testing.B) {
	three := []Deployment{dep(answer, "a", "m", 0), dep(answer, "b", "m", 0), dep(answer, "c", "m", 1)}
	for _, bc := range []struct {
		name string
		deps []Deployment
		open string // a deployment whose circuit is open
	}{
		{"one", []Deployment{dep(answer, "a", "m", 0)}, ""},
		{"three", three, ""},
		{"three-one-open", three, "b/m"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, err := New(Config{Aliases: []Alias{{Name: "chat", Deployments: bc.deps, Breaker: BreakerConfig{Cooldown: time.Hour}}}, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			if bc.open != "" {
				r.health[bc.open].trip(time.Now())
			}
			req := ask("hi")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				var rep Report
				for _, err := range r.StreamReport(ctx, req, &rep) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
