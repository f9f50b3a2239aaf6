package cli

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/store/sqlite"
)

// TestUsageWriter: every recorded request becomes one usage row, whether
// it was queued (and batched) or written inline because the queue was
// full, and Close writes whatever is still queued.
func TestUsageWriter(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "fw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := newUsageWriter(st, slog.New(slog.DiscardHandler))
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const n = 3000 // more than the queue holds, from 30 requests at once
	var wg sync.WaitGroup
	for g := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 30 {
				w.Record(context.Background(), &metering.Record{RequestID: fmt.Sprintf("r%d-%d", g, i), Time: day, Surface: "openai",
					Alias: "chat", Status: metering.StatusComplete, Usage: chat.Usage{InputTokens: 1, OutputTokens: 2}})
			}
		}()
	}
	wg.Wait()
	w.Close()
	w.Close() // idempotent
	// After Close, a record is still written, inline.
	w.Record(context.Background(), &metering.Record{RequestID: "late", Time: day, Alias: "chat", Usage: chat.Usage{OutputTokens: 2}})
	sums, err := st.UsageSummary(context.Background(), "", day.Add(-time.Hour), day.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].Requests != n+1 || sums[0].OutputTokens != 2*(n+1) || sums[0].TenantID != "local" {
		t.Fatalf("usage summary %+v, want %d requests of tenant local", sums, n+1)
	}
}
