package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// ending is what a stream came to, as a golden file records it: the
// collected answer, how many chunks carried a finish reason (one per
// choice, never more), and the error that ended it, if any.
type ending struct {
	Response     *chat.Response
	FinishChunks int
	Error        *endingError `json:",omitempty"`
}

type endingError struct {
	Category  chat.Category
	Retryable bool
	Message   string
}

func readEnding(t testing.TB, r io.Reader) ending {
	t.Helper()
	var (
		col chat.Collector
		end ending
	)
	for c, err := range pull(r, 0) {
		if err != nil {
			var ce *chat.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *chat.Error", err)
			}
			end.Error = &endingError{ce.Category, ce.Retryable, ce.Message}
			break
		}
		if c.FinishReason != "" {
			end.FinishChunks++
		}
		col.Add(c)
	}
	end.Response = col.Response()
	return end
}

// endingFiles are the streams of issue 16, each ending in a way the
// reader once got wrong (testdata/SOURCES.md says where each comes from;
// the golden files say what each must come to).
var endingFiles = []string{
	// [DONE] without its blank line, after a tool call's finish: the
	// answer is complete (it was "no [DONE]", and the tool_calls finish
	// was never sent).
	"framing_done_one_newline.sse",
	"framing_done_no_newline.sse",
	// llama.cpp's and vLLM's errors, before and after the first chunk:
	// the upstream's own classification and message (the "error:" line
	// was ignored and [DONE] before any chunk read as a 502).
	"llamacpp_error_field_context_size.sse",
	"llamacpp_data_error_context_size.sse",
	"llamacpp_error_field_after_chunks.sse",
	"llamacpp_data_error_after_chunks.sse",
	"vllm_error_before_chunks.sse",
	"vllm_error_after_chunks.sse",
	// OpenRouter's CRLF keep-alive comments.
	"framing_openrouter_crlf.sse",
}

// TestReadStreamEndings compares each stream, fed whole, one byte at a
// time and at random splits, with its golden file
// (go test -run Endings -update rewrites them).
func TestReadStreamEndings(t *testing.T) {
	for _, file := range endingFiles {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", strings.TrimSuffix(file, ".sse")+".json")
			got, err := json.MarshalIndent(readEnding(t, bytes.NewReader(raw)), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("whole: (-golden +got):\n%s", diff)
			}
			first := readEnding(t, bytes.NewReader(raw))
			for name, mk := range quirkReaders(raw) {
				if diff := cmp.Diff(first, readEnding(t, mk())); diff != "" {
					t.Errorf("%s differs from whole: (-whole +got):\n%s", name, diff)
				}
			}
		})
	}
}

// TestReadStreamEndsAtEndMarker: an end marker the body ends inside is
// taken only when it is whole; a body that ends before it, inside it or
// after a finish chunk that lacks its blank line is still broken.
func TestReadStreamEndsAtEndMarker(t *testing.T) {
	raw, err := os.ReadFile("testdata/openai_chat_stream_toolcall.sse")
	if err != nil {
		t.Fatal(err)
	}
	done := bytes.LastIndex(raw, []byte("data: [DONE]"))
	usage := bytes.LastIndex(raw[:done], []byte("data: "))
	for name, b := range map[string][]byte{
		"[DONE] cut":                         raw[:done+len("data: [DO")],
		"no [DONE]":                          raw[:done],
		"last chunk without its blank line":  raw[:done-1],
		"last chunk without its line ending": raw[:done-2],
		"last chunk cut":                     raw[:usage+20],
	} {
		for split, mk := range quirkReaders(b) {
			got := readEnding(t, mk())
			if got.Error == nil || got.Error.Category != chat.CategoryProtocol || got.FinishChunks != 0 {
				t.Errorf("%s, %s: %+v, want a protocol error and no finish", name, split, got)
			}
		}
	}
}

// TestReadStreamFinishOnce: a server that repeats a choice's finish
// reason on a later chunk has it sent once, the last one it gave.
func TestReadStreamFinishOnce(t *testing.T) {
	in := `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n\n" +
		"data: [DONE]\n\n"
	for split, mk := range quirkReaders([]byte(in)) {
		got := readEnding(t, mk())
		if got.Error != nil || got.FinishChunks != 1 || got.Response.Choices[0].FinishReason != chat.FinishStop {
			t.Errorf("%s: %+v, want one stop", split, got)
		}
	}
}

// TestReadStreamMoreIgnoresComments: a chunk followed in the same read
// by a keep-alive comment only (OpenRouter's, CRLF) is not marked More:
// nothing else is there, and a caller that waits for the next chunk
// before writing this one (as the gateway does when More is set) held
// the text until the upstream's next event.
func TestReadStreamMoreIgnoresComments(t *testing.T) {
	raw, err := os.ReadFile("testdata/framing_openrouter_crlf.sse")
	if err != nil {
		t.Fatal(err)
	}
	// One read per event, each with the keep-alives that follow it, as
	// the upstream flushes them.
	var reads [][]byte
	for _, ev := range blocks.FindAll(raw, -1) {
		if len(reads) > 0 && bytes.HasPrefix(ev, []byte(":")) {
			reads[len(reads)-1] = append(reads[len(reads)-1], ev...)
			continue
		}
		reads = append(reads, ev)
	}
	sr := NewStreamReader(&readsReader{reads: reads}, 0)
	for {
		c, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.More && c.FinishReason == "" {
			t.Errorf("chunk %+v marked More, with only a comment after it", c)
		}
	}
}

// blocks matches an event or a comment with its blank line.
var blocks = regexp.MustCompile(`(?s).*?(\r\n\r\n|\n\n)`)

// readsReader returns one of its reads per call.
type readsReader struct{ reads [][]byte }

func (r *readsReader) Read(p []byte) (int, error) {
	if len(r.reads) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.reads[0])
	if r.reads[0] = r.reads[0][n:]; len(r.reads[0]) == 0 {
		r.reads = r.reads[1:]
	}
	return n, nil
}

// TestReadStreamLastChunkMore: finish reasons are held until [DONE], so
// the chunk that carries them comes out once the end is already read:
// it is marked More, and the writer sends it with the stream's ending in
// one write. The end then comes without another read.
func TestReadStreamLastChunkMore(t *testing.T) {
	raw, err := os.ReadFile("testdata/framing_openrouter_crlf.sse")
	if err != nil {
		t.Fatal(err)
	}
	src := &readsReader{reads: blocks.FindAll(raw, -1)}
	sr := NewStreamReader(src, 0)
	var last chat.Chunk
	for {
		c, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = *c
	}
	if last.FinishReason == "" || !last.More {
		t.Errorf("last chunk = %+v, want a finish reason and More", last)
	}
	if len(src.reads) != 0 {
		t.Errorf("%d reads left unread", len(src.reads))
	}
}
