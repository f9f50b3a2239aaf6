package anthropic

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// TestReadStreamUsageSoFar: message_start's usage comes at once, on the
// first chunk, as UsageSoFar (input tokens including the cache's), so that
// a stream that breaks or is cancelled after it is billed them.
func TestReadStreamUsageSoFar(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	start := ev("message_start", `{"type":"message_start","message":{"model":"claude","usage":{"input_tokens":234,"cache_read_input_tokens":1000,"cache_creation_input_tokens":0,"output_tokens":1}}}`)
	text := ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`)
	soFar := &chat.Usage{InputTokens: 1234, OutputTokens: 1, CachedInputTokens: 1000}
	for _, tc := range []struct {
		name   string
		stream string
		want   []chat.Chunk
	}{
		{"with the model", start + text, []chat.Chunk{{Model: "claude", UsageSoFar: soFar}, {Text: "Hello"}}},
		{"without a model", strings.Replace(start, `"model":"claude",`, "", 1) + text, []chat.Chunk{{UsageSoFar: soFar}, {Text: "Hello"}}},
		{"without usage", strings.Replace(start, `,"usage":{"input_tokens":234,"cache_read_input_tokens":1000,"cache_creation_input_tokens":0,"output_tokens":1}`, "", 1) + text,
			[]chat.Chunk{{Model: "claude"}, {Text: "Hello"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for how, r := range map[string]func() io.Reader{
				"whole":        func() io.Reader { return strings.NewReader(tc.stream) },
				"byte by byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tc.stream)) },
			} {
				var got []chat.Chunk
				var err error
				for c, e := range pull(r(), 0) {
					if e != nil {
						err = e
						break
					}
					c.More = false
					got = append(got, c)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s: chunks (-want +got):\n%s", how, diff)
				}
				if err == nil {
					t.Errorf("%s: a stream without message_stop ended without an error", how)
				}
			}
		})
	}
}
