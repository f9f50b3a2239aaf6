// Package wiretest holds what the wire packages' tests share.
package wiretest

import (
	"bytes"
	"io"
	"runtime"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// BenchmarkStream measures a whole stream reader, framing included, over
// raw and reports its cost per chunk it yields: ns/chunk and allocs/chunk.
func BenchmarkStream(b *testing.B, raw []byte, read func(io.Reader) chat.Stream) {
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	chunks := 0
	for b.Loop() {
		for _, err := range read(bytes.NewReader(raw)) {
			if err != nil {
				b.Fatal(err)
			}
			chunks++
		}
	}
	runtime.ReadMemStats(&after)
	if chunks == 0 {
		b.Fatal("the stream yielded no chunks")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks), "ns/chunk")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(chunks), "allocs/chunk")
}
