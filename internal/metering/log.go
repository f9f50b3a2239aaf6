package metering

import (
	"context"
	"log/slog"
	"time"
)

// Log writes one structured line per request.
type Log struct {
	Logger *slog.Logger
}

// Record implements Meter.
func (l Log) Record(ctx context.Context, rec *Record) {
	attrs := []slog.Attr{
		slog.String("request_id", rec.RequestID), slog.String("surface", rec.Surface), slog.String("tenant", rec.Tenant),
		slog.String("alias", rec.Alias), slog.String("deployment", rec.Deployment), slog.String("model", rec.Model),
		slog.Bool("stream", rec.Stream), slog.String("status", string(rec.Status)), slog.String("finish_reason", rec.FinishReason),
		slog.Int("input_tokens", rec.Usage.InputTokens), slog.Int("output_tokens", rec.Usage.OutputTokens),
		slog.Int("cached_tokens", rec.Usage.CachedInputTokens), slog.Bool("usage_estimated", rec.Usage.Estimated),
		slog.Bool("usage_missing", rec.UsageMissing), slog.Int("attempts", rec.Attempts),
		slog.Float64("ttft_ms", msf(rec.TTFT)), slog.Float64("ttfw_ms", msf(rec.TTFW)), slog.Float64("total_ms", msf(rec.Total)),
	}
	if rec.Route != "" {
		attrs = append(attrs, slog.String("route", rec.Route))
	}
	if rec.Error != "" {
		attrs = append(attrs, slog.String("error_code", rec.ErrorCode), slog.String("error", rec.Error))
	}
	if rec.Cost > 0 {
		attrs = append(attrs, slog.Float64("cost", rec.Cost))
	}
	if rec.Cached {
		attrs = append(attrs, slog.Bool("cached", true))
	}
	if rec.Coalesced {
		attrs = append(attrs, slog.Bool("coalesced", true))
	}
	if rec.Rule != "" {
		attrs = append(attrs, slog.String("rule", rec.Rule), slog.String("routed_to", rec.RoutedTo))
	}
	if rec.TraceID != "" {
		attrs = append(attrs, slog.String("trace_id", rec.TraceID))
	}
	if rec.Timings != nil {
		attrs = append(attrs, slog.Any("timings", rec.Timings.Timings()))
	}
	l.Logger.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
