package cli

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogBuffer: lines from many goroutines arrive whole, in fewer writes
// than lines, within the flush interval, and Close writes the rest.
func TestLogBuffer(t *testing.T) {
	var out lockedBuffer
	l := newLogBuffer(&out)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(l, "{\"g\":%d,\"i\":%d}\n", g, i)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for strings.Count(out.String(), "\n") < 800 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines written within 2 s, want 800", len(lines))
	}
	last := map[string]int{}
	for _, ln := range lines {
		var g, i int
		if _, err := fmt.Sscanf(ln, "{\"g\":%d,\"i\":%d}", &g, &i); err != nil {
			t.Fatalf("torn line %q", ln)
		}
		if prev, ok := last[fmt.Sprint(g)]; ok && i != prev+1 {
			t.Fatalf("goroutine %d: line %d after %d", g, i, prev)
		}
		last[fmt.Sprint(g)] = i
	}
	out.mu.Lock()
	writes := out.writes
	out.mu.Unlock()
	if writes >= 800 {
		t.Errorf("%d writes for 800 lines: nothing was batched", writes)
	}

	fmt.Fprintln(l, "before close")
	l.Close()
	if !strings.HasSuffix(out.String(), "before close\n") {
		t.Error("Close did not write the buffered line")
	}
	fmt.Fprintln(l, "after close")
	if !strings.HasSuffix(out.String(), "after close\n") {
		t.Error("a line after Close was not written at once")
	}
}
