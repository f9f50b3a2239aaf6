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
	// Thinking: DeepSeek's reasoning_content, OpenRouter's reasoning with
	// its reasoning_details (not read), both at once, nulls, a key that
	// differs in case only, a value that is not a string.
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" need \"x\""},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Okay","reasoning_details":[{"type":"reasoning.text","text":"Okay","format":"unknown","index":0}]},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"a","reasoning":"b","content":null}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":null,"reasoning":null}}]}`,
	`{"choices":[{"index":0,"delta":{"Reasoning_Content":"x"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":{"text":"x"}}}]}`,
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

// TestDecodeChunkThinkingRecorded decodes recorded streams of reasoning
// models chunk after chunk into one reused chunk, as the reader does: the
// fast path takes every chunk and agrees with encoding/json. (Not added
// to chunkSeeds: compareDecoders tries every pair of seeds.)
func TestDecodeChunkThinkingRecorded(t *testing.T) {
	for _, name := range []string{"deepseek_reasoning.sse", "groq_reasoning.sse"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var fast chunk
		for _, line := range strings.Split(string(b), "\n") {
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok || d == "[DONE]" {
				continue
			}
			var std chunk
			if err := json.Unmarshal([]byte(d), &std); err != nil {
				t.Fatal(err)
			}
			if err := decodeChunk([]byte(d), &fast); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(std, fast, cmpopts.IgnoreUnexported(chunkChoice{}, delta{})); diff != "" {
				t.Fatalf("%s: decoders differ (-encoding/json +fast):\n%s", d, diff)
			}
			var c chunk
			if sc := (chunkScanner{Scanner: jsonscan.New([]byte(d))}); sc.chunk(&c) != nil {
				t.Fatalf("%s: a recorded chunk took the slow path", d)
			}
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
	text := []byte(`{"id":"chatcmpl-ABfw031mOJeYCSHe4yI2ZjOA6kMJL","object":"chat.completion.chunk","created":1727346168,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5050236cbd","choices":[{"index":0,"delta":{"content":" weather"},"logprobs":null,"finish_reason":null}]}`)
	// A thinking delta as DeepSeek sends it (content null beside it):
	// the same cost as a text delta.
	thinking := []byte(`{"id":"cac7192e-e619-40c6-96b0-ed4276bc03ac","object":"chat.completion.chunk","created":1764661832,"model":"deepseek-reasoner","system_fingerprint":"fp_eaab8d114b_prod0820_fp8_kvcache","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" weather"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	for _, in := range []struct {
		name string
		data []byte
	}{{"", text}, {"-thinking", thinking}} {
		b.Run("fast"+in.name, func(b *testing.B) {
			b.ReportAllocs()
			var c chunk
			for b.Loop() {
				decodeChunk(in.data, &c)
			}
		})
		b.Run("ReadStream"+in.name, func(b *testing.B) {
			var buf bytes.Buffer
			for range 1000 {
				buf.WriteString("data: ")
				buf.Write(in.data)
				buf.WriteString("\n\n")
			}
			buf.WriteString(`data: {"id":"chatcmpl-A","object":"chat.completion.chunk","created":1727346168,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
			wiretest.BenchmarkStream(b, buf.Bytes(), func(r io.Reader) chat.Stream { return pull(r, 0) })
		})
	}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		var c chunk
		for b.Loop() {
			c = chunk{}
			json.Unmarshal(text, &c)
		}
	})
}
