package metering

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store/sqlite"
)

// TestUsageWriterSQLite: against a real store, every request recorded
// from many goroutines at once becomes one usage row of the local tenant,
// and a request recorded after Close is written by the next writer.
func TestUsageWriterSQLite(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "fw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	opt := UsageOptions{SpillPath: filepath.Join(dir, "fw.db.usage-spill")}
	w := newWriter(t, st, opt)
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const n = 3000 // from 30 requests at once
	var wg sync.WaitGroup
	for g := range 30 {
		wg.Go(func() {
			for i := range n / 30 {
				w.Record(context.Background(), &Record{RequestID: fmt.Sprintf("r%d-%d", g, i), Time: day, Surface: "openai",
					Alias: "chat", Status: StatusComplete, Usage: chat.Usage{InputTokens: 1, OutputTokens: 2}})
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	w.Record(context.Background(), &Record{RequestID: "late", Time: day, Alias: "chat", Usage: chat.Usage{OutputTokens: 2}})
	if got := w.Stats(); got.Written != n || got.InSpill != 1 {
		t.Errorf("stats %+v, want %d written and the late row in the spill file", got, n)
	}
	w2 := newWriter(t, st, opt)
	if err := w2.Close(); err != nil {
		t.Errorf("second writer: Close() = %v", err)
	}
	sums, err := st.UsageSummary(context.Background(), "", day.Add(-time.Hour), day.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].Requests != n+1 || sums[0].OutputTokens != 2*(n+1) || sums[0].TenantID != "local" {
		t.Fatalf("usage summary %+v, want %d requests of tenant local", sums, n+1)
	}
}
