package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonscan"
	"github.com/firstword/firstword/internal/wire/wiretest"
)

var chunkSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":"Hé \"quoted\" \\ \n\t \u00e9 \ud83d\ude00 \ud800 x"},"finish_reason":null}]}`,
	`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":null}`,
	`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1}}}`,
	`{"error":{"message":"boom","type":"server_error","code":null}}`,
	`{"Choices":[{"Index":2}]}`,
	`{"choices":[{"index":1.5}]}`,
	`{"choices":[{"index":0,"delta":{"content":5}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`,
	`{"model":"x"} trailing`,
	`{"a":[1,2.5e-3,true,false,null,{"b":"c"}],"choices":null}`,
	`{"choices":[{"index":0,"delta":{"content":"x"},"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`,
	// A model that is not plain is not matched by its bytes: after the
	// first, the second is a"x, not a\, and the third is not JSON.
	`{"model":"a\\","choices":[]}`,
	`{"model":"a\"x","choices":[]}`,
	`{"model":"a\"}`,
	`null`,
	`{"choices":[null,{"delta":null,"index":null},{"delta":{"tool_calls":[null,{"function":null}]}}]}`,
}

func TestDecodeChunkMatchesEncodingJSON(t *testing.T) {
	for _, name := range []string{"openai_chat_stream_usage.sse", "openai_chat_stream_toolcall.sse"} {
		b, _ := os.ReadFile("testdata/" + name)
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
				chunkSeeds = append(chunkSeeds, d)
			}
		}
	}
	for _, s := range chunkSeeds {
		compareDecoders(t, []byte(s))
		// The fast path, not the fallback, must handle real chunks.
		var c chunk
		sc := chunkScanner{Scanner: jsonscan.New([]byte(s))}
		if strings.Contains(s, `"chat.completion.chunk"`) && sc.chunk(&c) != nil {
			t.Errorf("%s: a real chunk took the slow path", s)
		}
	}
}

// compareDecoders checks that decodeChunk decodes b as encoding/json does
// into a fresh chunk, both into a fresh chunk and into one that held each
// seed before (decodeChunk reuses a chunk's storage and model).
func compareDecoders(t *testing.T, b []byte) {
	t.Helper()
	var std chunk
	serr := json.Unmarshal(b, &std)
	for _, prev := range append([]string{""}, chunkSeeds...) {
		var fast chunk
		if prev != "" {
			decodeChunk([]byte(prev), &fast)
		}
		ferr := decodeChunk(b, &fast)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%s (after %s): fast error %v, encoding/json error %v", b, prev, ferr, serr)
		}
		if serr != nil {
			continue
		}
		if diff := cmp.Diff(std, fast, cmpopts.IgnoreUnexported(chunkChoice{}, delta{})); diff != "" {
			t.Fatalf("%s (after %s): decoders differ (-encoding/json +fast):\n%s", b, prev, diff)
		}
	}
}

func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		compareDecoders(t, b)
	})
}

func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(chunkSeeds[0])
	data2 := []byte(`{"id":"chatcmpl-ABfw031mOJeYCSHe4yI2ZjOA6kMJL","object":"chat.completion.chunk","created":1727346168,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5050236cbd","choices":[{"index":0,"delta":{"content":" weather"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		var c chunk
		for b.Loop() {
			decodeChunk(data2, &c)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		var c chunk
		for b.Loop() {
			c = chunk{}
			json.Unmarshal(data2, &c)
		}
	})
	_ = data
	b.Run("ReadStream", func(b *testing.B) {
		var buf bytes.Buffer
		for range 1000 {
			buf.WriteString("data: ")
			buf.Write(data2)
			buf.WriteString("\n\n")
		}
		buf.WriteString(`data: {"id":"chatcmpl-A","object":"chat.completion.chunk","created":1727346168,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
		wiretest.BenchmarkStream(b, buf.Bytes(), func(r io.Reader) chat.Stream { return pull(r, 0) })
	})
}
