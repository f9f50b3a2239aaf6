package ollama

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/wiretest"
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
// over a stream of many content lines.
func BenchmarkReadStream(b *testing.B) {
	var buf bytes.Buffer
	for range 200 {
		buf.Write(benchLine)
		buf.WriteByte('\n')
	}
	buf.WriteString(`{"model":"qwen2.5","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"prompt_eval_count":30,"eval_count":200}` + "\n")
	wiretest.BenchmarkStream(b, buf.Bytes(), func(r io.Reader) chat.Stream { return pull(r, 0) })
}
