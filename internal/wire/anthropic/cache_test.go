package anthropic

import (
	"bytes"
	"os"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

// TestReadStreamPromptCacheUsage reads the usage of a prompt cache write
// and of the read that follows it, with the counts of Anthropic's own
// example (see testdata/SOURCES.md), one byte at a time: the cache's
// tokens are part of the input, read ones are CachedInputTokens (billed at
// the cached price), written ones CacheWriteTokens.
func TestReadStreamPromptCacheUsage(t *testing.T) {
	for _, tt := range []struct {
		file string
		want chat.Usage
	}{
		{"constructed_docs_prompt_caching_write.sse", chat.Usage{InputTokens: 21 + 188086, OutputTokens: 393, CacheWriteTokens: 188086}},
		{"constructed_docs_prompt_caching_read.sse", chat.Usage{InputTokens: 21 + 188086, OutputTokens: 393, CachedInputTokens: 188086}},
		{"openllmetry_prompt_caching_read.sse", chat.Usage{InputTokens: 4 + 1165, OutputTokens: 221, CachedInputTokens: 1165}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := chat.Collect(pull(&oneByte{bytes.NewReader(body)}, 0))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.want, resp.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

// oneByte reads one byte at a time.
type oneByte struct{ r *bytes.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}
