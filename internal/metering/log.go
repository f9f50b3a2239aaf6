package metering

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"
)

// Log writes one structured line per request.
type Log struct {
	Logger *slog.Logger
}

// Record implements Meter.
func (l Log) Record(ctx context.Context, rec *Record) {
	if !l.Logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	p := linePool.Get().(*line)
	p.attrs = p.appendAttrs(p.attrs[:0], rec)
	l.Logger.LogAttrs(ctx, slog.LevelInfo, "request", p.attrs...)
	clear(p.attrs)
	if cap(p.timings) > 16<<10 {
		p.timings = nil // a rare request's hundreds of stages
	}
	linePool.Put(p)
}

// line is what one request's log line is built from, kept in linePool
// between lines: the attributes (built in appendAttrs, whose 2 KiB frame
// is gone by the time slog runs) and the timings' JSON, which slog copies
// into the line (the standard handlers keep nothing of a record).
type line struct {
	attrs   []slog.Attr
	timings []byte
}

var linePool = sync.Pool{New: func() any { return &line{attrs: make([]slog.Attr, 0, 32), timings: make([]byte, 0, 1024)} }}

func (p *line) appendAttrs(attrs []slog.Attr, rec *Record) []slog.Attr {
	attrs = append(attrs,
		slog.String("request_id", rec.RequestID), slog.String("surface", rec.Surface), slog.String("tenant", rec.Tenant),
		slog.String("alias", rec.Alias), slog.String("deployment", rec.Deployment), slog.String("model", rec.Model),
		slog.Bool("stream", rec.Stream), slog.String("status", string(rec.Status)), slog.String("finish_reason", rec.FinishReason),
		slog.Int("input_tokens", rec.Usage.InputTokens), slog.Int("output_tokens", rec.Usage.OutputTokens),
		slog.Int("cached_tokens", rec.Usage.CachedInputTokens), slog.Bool("usage_estimated", rec.Usage.Estimated),
		slog.Bool("usage_missing", rec.UsageMissing), slog.Int("attempts", rec.Attempts),
		slog.Float64("ttft_ms", msf(rec.TTFT)), slog.Float64("ttfw_ms", msf(rec.TTFW)), slog.Float64("total_ms", msf(rec.Total)),
	)
	if rec.TTFThought > 0 || rec.Usage.ReasoningTokens > 0 {
		// The model thought.
		attrs = append(attrs, slog.Float64("ttfthought_ms", msf(rec.TTFThought)), slog.Float64("thinking_ms", msf(rec.Thinking)),
			slog.Int("reasoning_tokens", rec.Usage.ReasoningTokens))
	}
	if rec.Route != "" {
		attrs = append(attrs, slog.String("route", rec.Route))
	}
	if rec.Continuations > 0 {
		attrs = append(attrs, slog.Int("continuations", rec.Continuations))
	}
	if rec.Error != "" {
		attrs = append(attrs, slog.String("error_code", rec.ErrorCode), slog.String("error", rec.Error))
	}
	if rec.Cost > 0 {
		attrs = append(attrs, slog.Float64("cost", rec.Cost))
	}
	if len(rec.Spent) > 0 {
		// Attempts that did not give the answer, apart from it.
		u, cost := rec.AttemptsTotal()
		attrs = append(attrs, slog.Int("attempts_input_tokens", u.InputTokens), slog.Int("attempts_output_tokens", u.OutputTokens),
			slog.Bool("attempts_estimated", u.Estimated), slog.Float64("attempts_cost", cost))
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
		// Encoded here rather than by the handler: reflection at the
		// bottom of slog is the deepest stack a request reaches.
		p.timings = rec.Timings.AppendJSON(p.timings[:0])
		attrs = append(attrs, slog.Any("timings", json.RawMessage(p.timings)))
	}
	return attrs
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
