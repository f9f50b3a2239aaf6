package metering

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/budget"
)

// TestLogLines checks the request line's fields and timings, line after
// line: each line's attributes and timings' buffer come back to a pool,
// and a line must hold its own request's, not the previous one's.
func TestLogLines(t *testing.T) {
	var out bytes.Buffer
	l := Log{Logger: slog.New(slog.NewJSONHandler(&out, nil))}
	start := time.Now()
	var recs []*Record
	for i, stages := range [][]string{{"auth", "parse", "route", "upstream"}, {"auth"}, nil} {
		rec := budget.New(start)
		for k, name := range stages {
			rec.Add(name, start.Add(time.Duration(k)*time.Millisecond), start.Add(time.Duration(k+1)*time.Millisecond), "")
		}
		rec.Complete(start.Add(time.Duration(i+1) * 100 * time.Millisecond))
		r := &Record{RequestID: "req-" + string(rune('a'+i)), Surface: "openai", Status: StatusComplete, Timings: rec}
		if stages == nil {
			r.Timings = nil // a line without timings
		}
		recs = append(recs, r)
		l.Record(context.Background(), r)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(recs), out.String())
	}
	for i, ln := range lines {
		var got struct {
			Msg       string          `json:"msg"`
			RequestID string          `json:"request_id"`
			Timings   json.RawMessage `json:"timings"`
		}
		if err := json.Unmarshal([]byte(ln), &got); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, ln)
		}
		if got.Msg != "request" || got.RequestID != recs[i].RequestID {
			t.Errorf("line %d: msg %q request_id %q, want request %q", i, got.Msg, got.RequestID, recs[i].RequestID)
		}
		if recs[i].Timings == nil {
			if got.Timings != nil {
				t.Errorf("line %d: timings %s for a request without a recorder", i, got.Timings)
			}
			continue
		}
		want, _ := json.Marshal(recs[i].Timings.Timings())
		if string(got.Timings) != string(want) {
			t.Errorf("line %d: timings\n got %s\nwant %s", i, got.Timings, want)
		}
	}
}

// TestLogDisabled: a logger above info writes no request line.
func TestLogDisabled(t *testing.T) {
	var out bytes.Buffer
	l := Log{Logger: slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	l.Record(context.Background(), &Record{RequestID: "r", Timings: budget.New(time.Now())})
	if out.Len() != 0 {
		t.Errorf("wrote %q at level warn", out.String())
	}
}
