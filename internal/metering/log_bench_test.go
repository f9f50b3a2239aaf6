package metering

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
)

// BenchmarkLog measures the request log line of a streamed request with
// the stages an OpenAI-compatible request records.
func BenchmarkLog(b *testing.B) {
	start := time.Now()
	rec := budget.New(start)
	for i, name := range []string{"auth", "parse", "route"} {
		rec.Add(name, start.Add(time.Duration(i)*time.Millisecond), start.Add(time.Duration(i+1)*time.Millisecond), "")
	}
	rec.FirstWord(start.Add(50 * time.Millisecond))
	rec.Complete(start.Add(500 * time.Millisecond))
	r := &Record{RequestID: "chatcmpl-x", Surface: "openai", Tenant: "local", Alias: "chat", Deployment: "up/m", Model: "m",
		Stream: true, Status: StatusComplete, FinishReason: "stop", Usage: chat.Usage{InputTokens: 10, OutputTokens: 20},
		Attempts: 1, TTFT: 50 * time.Millisecond, TTFW: 51 * time.Millisecond, Total: 500 * time.Millisecond,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Timings: rec, Cost: 0.0001}
	l := Log{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	b.ReportAllocs()
	for b.Loop() {
		l.Record(context.Background(), r)
	}
}
