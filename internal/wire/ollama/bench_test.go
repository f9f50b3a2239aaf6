package ollama

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// A content line as Ollama sends it (from testdata/ollama_chat.ndjson).
var benchLine = []byte(`{"model":"qwen2.5","created_at":"2025-06-20T14:35:16.876307613Z","message":{"role":"assistant","content":" assist"},"done":false}`)

// BenchmarkDecodeChunk measures decoding one line into its chunk: ns and
// allocations per decoded chunk.
func BenchmarkDecodeChunk(b *testing.B) {
	b.ReportAllocs()
	var resp Response
	for b.Loop() {
		resp = Response{}
		if err := json.Unmarshal(benchLine, &resp); err != nil {
			b.Fatal(err)
		}
		_ = chat.Chunk{Text: resp.Message.Content}
	}
}

// BenchmarkReadStream measures the whole reader, line splitting included,
// over a stream of many content lines; it reports ns per chunk.
func BenchmarkReadStream(b *testing.B) {
	var buf bytes.Buffer
	for range 200 {
		buf.Write(benchLine)
		buf.WriteByte('\n')
	}
	buf.WriteString(`{"model":"qwen2.5","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"prompt_eval_count":30,"eval_count":200}` + "\n")
	raw := buf.Bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	n := 0
	for b.Loop() {
		for _, err := range ReadStream(bytes.NewReader(raw), 0) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/chunk")
}
