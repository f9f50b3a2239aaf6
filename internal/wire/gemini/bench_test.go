package gemini

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/firstword/firstword/internal/chat"
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
// a stream of many text events; it reports ns per chunk.
func BenchmarkReadStream(b *testing.B) {
	var buf bytes.Buffer
	const events = 200
	for range events {
		buf.WriteString("data: ")
		buf.Write(benchEvent)
		buf.WriteString("\r\n\r\n")
	}
	buf.WriteString(`data: {"candidates": [{"finishReason": "STOP"}]}` + "\r\n\r\n")
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
