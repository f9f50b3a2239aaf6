package gemini

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/wiretest"
)

// A text event as Gemini sends it (from testdata/gemini_stream.sse).
var benchEvent = []byte(`{"candidates": [{"content": {"parts": [{"text": " capital of Wyoming"}],"role": "model"}}],"usageMetadata": {"promptTokenCount": 7,"totalTokenCount": 7,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 7}]},"modelVersion": "gemini-2.0-flash"}`)

// BenchmarkDecodeChunk measures decoding one event into its chunk: ns and
// allocations per decoded chunk.
func BenchmarkDecodeChunk(b *testing.B) {
	b.ReportAllocs()
	var resp Response
	for b.Loop() {
		resp = Response{}
		if err := json.Unmarshal(benchEvent, &resp); err != nil {
			b.Fatal(err)
		}
		_ = chat.Chunk{Text: resp.Candidates[0].Content.Parts[0].Text}
	}
}

// BenchmarkReadStream measures the whole reader, SSE framing included, over
// a stream of many text events.
func BenchmarkReadStream(b *testing.B) {
	var buf bytes.Buffer
	for range 200 {
		buf.WriteString("data: ")
		buf.Write(benchEvent)
		buf.WriteString("\r\n\r\n")
	}
	buf.WriteString(`data: {"candidates": [{"finishReason": "STOP"}]}` + "\r\n\r\n")
	wiretest.BenchmarkStream(b, buf.Bytes(), func(r io.Reader) chat.Stream { return pull(r, 0) })
}

func BenchmarkEncodeRequest(b *testing.B) {
	raw, _ := os.ReadFile("testdata/gemini_stream.sse")
	req := &chat.Request{Model: "gemini-2.5-flash", Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: "Be brief."},
		{Role: chat.RoleUser, Content: string(raw)},
	}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeRequest(req); err != nil {
			b.Fatal(err)
		}
	}
}
