package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// ending is what a stream came to, as a golden file records it: the
// collected answer, the chunks that carried a finish reason (one per
// candidate, never more), and the error that ended it, if any.
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

// endingFiles are the streams of issue 16 (testdata/SOURCES.md says where
// each comes from; the golden files say what each must come to).
var endingFiles = []string{
	// Gemini's error object, raw after some events (it was ignored: the
	// stream ended "successfully"), in a data field, and alone.
	"spliced_raw_error_cancelled.sse",
	"spliced_data_error_cancelled.sse",
	"constructed_raw_error_only.sse",
	// The finish reason in two events: one finish chunk. Followed by the
	// raw error: the error (it was two finish chunks, estimated usage and
	// [DONE]).
	"constructed_finish_twice.sse",
	"constructed_finish_twice_raw_error.sse",
	// The last event without its blank line: complete.
	"framing_last_event_unterminated.sse",
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
			whole := readEnding(t, bytes.NewReader(raw))
			got, err := json.MarshalIndent(whole, "", "  ")
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
			for name, mk := range readers(raw) {
				if diff := cmp.Diff(whole, readEnding(t, mk())); diff != "" {
					t.Errorf("%s differs from whole: (-whole +got):\n%s", name, diff)
				}
			}
		})
	}
}

// TestReadStreamStrayLines: lines outside any data field that are not a
// JSON error are ignored, as the standard says, or, when they are JSON of
// another kind, or cut, or too long, an error; never a success.
func TestReadStreamStrayLines(t *testing.T) {
	ok := "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"hi\"}],\"role\": \"model\"},\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"promptTokenCount\": 2,\"candidatesTokenCount\": 1,\"totalTokenCount\": 3}}\r\n\r\n"
	tests := []struct {
		name string
		in   string
		cat  chat.Category // "": the stream succeeds
	}{
		{"unknown field", "retry-after: 3\r\n" + ok, ""},
		{"words", "hello there\r\n" + ok, ""},
		{"raw error before the events", "{\"error\": {\"code\": 429,\"message\": \"Resource has been exhausted (e.g. check quota).\",\"status\": \"RESOURCE_EXHAUSTED\"}}\r\n" + ok, chat.CategoryRateLimited},
		{"array form", "[{\n  \"error\": {\n    \"code\": 500,\n    \"message\": \"An internal error has occurred.\",\n    \"status\": \"INTERNAL\"\n  }\n}\n]\n", chat.CategoryUpstreamUnavailable},
		{"braces inside strings", "{\n  \"error\": {\n    \"code\": 400,\n    \"message\": \"bad value \\\"}}{{\\\" in field\",\n    \"status\": \"INVALID_ARGUMENT\"\n  }\n}\n", chat.CategoryInvalidRequest},
		{"not an error", "{\"candidates\": []}\n" + ok, chat.CategoryProtocol},
		{"cut error object", "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"hi\"}]}}]}\r\n\r\n{\n  \"error\": {\n    \"code\": 499,\n", chat.CategoryProtocol},
		{"endless object", "{\n" + strings.Repeat("  \"a\": 1,\n", 10000), chat.CategoryProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, mk := range readers([]byte(tt.in)) {
				got := readEnding(t, mk())
				switch {
				case tt.cat == "" && got.Error != nil:
					t.Errorf("%s: error %+v, want success", name, got.Error)
				case tt.cat != "" && (got.Error == nil || got.Error.Category != tt.cat):
					t.Errorf("%s: %+v, want a %s error", name, got, tt.cat)
				case tt.cat != "" && got.FinishChunks != 0:
					t.Errorf("%s: a failed stream sent %d finish chunks", name, got.FinishChunks)
				}
			}
		})
	}
}
