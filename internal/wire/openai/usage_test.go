package openai

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// TestReadStreamUsageSoFar: usage is passed on as it arrives, as
// UsageSoFar, so that a stream that breaks before [DONE] is billed what
// the upstream reported: on the chunk its event yields, or on one of its
// own. The final usage still comes with the finish, at [DONE].
func TestReadStreamUsageSoFar(t *testing.T) {
	text := func(s string) string {
		return `data: {"model":"m","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
	}
	withUsage := func(s string, in, out int) string {
		return `data: {"model":"m","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}],"usage":{"prompt_tokens":` +
			strconv.Itoa(in) + `,"completion_tokens":` + strconv.Itoa(out) + `}}` + "\n\n"
	}
	const finish = `data: {"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	const usage = `data: {"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":7}}` + "\n\n"
	u := func(in, out int) *chat.Usage { return &chat.Usage{InputTokens: in, OutputTokens: out} }
	for _, tc := range []struct {
		name    string
		stream  string
		want    []chat.Chunk
		wantErr bool
	}{
		{"usage chunk, then [DONE]", text("Hi") + finish + usage + "data: [DONE]\n\n",
			[]chat.Chunk{{Model: "m", Text: "Hi"}, {UsageSoFar: u(31, 7)}, {FinishReason: chat.FinishStop, Usage: u(31, 7)}}, false},
		{"usage chunk, then the body ends", text("Hi") + usage,
			[]chat.Chunk{{Model: "m", Text: "Hi"}, {UsageSoFar: u(31, 7)}}, true},
		{"usage on every chunk, cut", withUsage("Hi", 31, 1) + withUsage(" you", 31, 2) + text(" there"),
			[]chat.Chunk{{Model: "m", Text: "Hi", UsageSoFar: u(31, 1)}, {Text: " you", UsageSoFar: u(31, 2)}, {Text: " there"}}, true},
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
				if tc.wantErr != (err != nil) || err != nil && !errors.Is(err, chat.ErrTruncated) {
					t.Errorf("%s: error %v, want a truncation: %v", how, err, tc.wantErr)
				}
			}
		})
	}
}
