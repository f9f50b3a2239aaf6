package metering

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
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

// TestLogThinking: a request whose model thought logs its time to first
// thought, thinking time and reasoning tokens; one that did not, none.
func TestLogThinking(t *testing.T) {
	for _, tt := range []struct {
		name string
		rec  Record
		want map[string]float64 // nil: none of the fields
	}{
		{name: "no thinking", rec: Record{RequestID: "a"}},
		{name: "thinking", rec: Record{RequestID: "b", TTFThought: 180250 * time.Microsecond, Thinking: 2030 * time.Millisecond, Usage: chat.Usage{OutputTokens: 900, ReasoningTokens: 700}},
			want: map[string]float64{"ttfthought_ms": 180.25, "thinking_ms": 2030, "reasoning_tokens": 700}},
		{name: "reasoning tokens only (a complete answer's hidden thinking)", rec: Record{RequestID: "c", Usage: chat.Usage{OutputTokens: 900, ReasoningTokens: 700}},
			want: map[string]float64{"ttfthought_ms": 0, "thinking_ms": 0, "reasoning_tokens": 700}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			Log{Logger: slog.New(slog.NewJSONHandler(&out, nil))}.Record(context.Background(), &tt.rec)
			var line map[string]any
			if err := json.Unmarshal(out.Bytes(), &line); err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, k := range []string{"ttfthought_ms", "thinking_ms", "reasoning_tokens"} {
				if v, ok := line[k].(float64); ok {
					got[k] = v
				}
			}
			if tt.want == nil {
				tt.want = map[string]float64{}
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("fields %v, want %v", got, tt.want)
			}
		})
	}
}
