package openai

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

// pull reads r as the router does: a StreamReader's Next, through
// chat.Pull when a chat.Stream is wanted.
func pull(r io.Reader, maxEventSize int) chat.Stream {
	return chat.Pull(NewStreamReader(r, maxEventSize).Next)
}

// Source of the fixtures: ../../../../shared/fixtures (recorded from the
// live API by the official OpenAI Python SDK's test snapshots).

func collect(t testing.TB, r io.Reader) (*chat.Response, error) {
	t.Helper()
	return chat.Collect(pull(r, 0))
}

func TestReadStreamFixtures(t *testing.T) {
	tests := []struct {
		file      string
		text      string
		finish    chat.FinishReason
		usage     *chat.Usage
		toolName  string
		toolArgs  string
		wantError bool
	}{
		{
			file:   "openai_chat_stream_usage.sse",
			text:   "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app.",
			finish: chat.FinishStop,
			usage:  &chat.Usage{InputTokens: 14, OutputTokens: 30},
		},
		{
			file:   "openai_chat_stream.sse",
			text:   "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app.",
			finish: chat.FinishStop,
		},
		{
			file:     "openai_chat_stream_toolcall.sse",
			finish:   chat.FinishToolCalls,
			usage:    &chat.Usage{InputTokens: 44, OutputTokens: 16},
			toolName: "get_weather",
			toolArgs: `{"city":"New York City"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			readers := map[string]func() io.Reader{
				"whole":   func() io.Reader { return bytes.NewReader(raw) },
				"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(raw)) },
				"random":  func() io.Reader { return &splitReader{b: raw, rng: rand.New(rand.NewPCG(3, 4))} },
			}
			for name, mk := range readers {
				resp, err := collect(t, mk())
				if err != nil {
					t.Fatalf("%s: Collect() error = %v", name, err)
				}
				if len(resp.Choices) != 1 {
					t.Fatalf("%s: %d choices, want 1", name, len(resp.Choices))
				}
				ch := resp.Choices[0]
				if ch.Text != tt.text {
					t.Errorf("%s: text = %q, want %q", name, ch.Text, tt.text)
				}
				if ch.FinishReason != tt.finish {
					t.Errorf("%s: finish = %q, want %q", name, ch.FinishReason, tt.finish)
				}
				if diff := cmp.Diff(tt.usage, resp.Usage); diff != "" {
					t.Errorf("%s: usage (-want +got):\n%s", name, diff)
				}
				if tt.toolName != "" {
					if len(ch.ToolCalls) != 1 || ch.ToolCalls[0].Name != tt.toolName || ch.ToolCalls[0].Arguments != tt.toolArgs {
						t.Errorf("%s: tool calls = %+v, want %s(%s)", name, ch.ToolCalls, tt.toolName, tt.toolArgs)
					}
					if ch.ToolCalls[0].ID != "call_4XzlGBLtUe9dy3GVNV4jhq7h" {
						t.Errorf("%s: tool call id = %q", name, ch.ToolCalls[0].ID)
					}
				}
			}
		})
	}
}

func TestReadStreamUsageValues(t *testing.T) {
	raw, _ := os.ReadFile("testdata/openai_chat_stream_toolcall.sse")
	resp, err := collect(t, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := &chat.Usage{InputTokens: 44, OutputTokens: 16}
	if diff := cmp.Diff(want, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestReadStreamGarbage(t *testing.T) {
	ok := `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n"
	tests := []struct {
		name string
		in   string
		cat  chat.Category
	}{
		{"missing done", ok + `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n", chat.CategoryProtocol},
		{"truncated json", ok + `data: {"choices":[{"index":0,"del` + "\n\n", chat.CategoryProtocol},
		{"truncated mid event", ok + `data: {"choices":[`, chat.CategoryProtocol},
		{"invalid utf8", ok + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n", chat.CategoryProtocol},
		{"huge line", ok + "data: " + strings.Repeat("x", 10<<20) + "\n\n", chat.CategoryProtocol},
		{"error object", ok + `data: {"error":{"message":"boom","type":"server_error","code":null}}` + "\n\n", chat.CategoryUpstreamUnavailable},
		{"rate limit object", ok + `data: {"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}` + "\n\n", chat.CategoryRateLimited},
		{"empty body", "", chat.CategoryProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := collect(t, strings.NewReader(tt.in))
			var ce *chat.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want *chat.Error", err)
			}
			if ce.Category != tt.cat {
				t.Errorf("category = %s, want %s (%v)", ce.Category, tt.cat, err)
			}
			if tt.in != "" && (len(resp.Choices) == 0 || resp.Choices[0].Text != "hi") {
				t.Errorf("text before the error was lost: %+v", resp.Choices)
			}
			if len(resp.Choices) > 0 && resp.Choices[0].FinishReason != "" {
				t.Errorf("a broken stream reported finish %q", resp.Choices[0].FinishReason)
			}
		})
	}
}

func TestReadStreamQuirks(t *testing.T) {
	in := ": ping\r\n\r\n" +
		`data:{"id":"x","choices":[],"prompt_filter_results":[{"prompt_index":0}]}` + "\r\n\r\n" +
		`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":0,"total_tokens":5}}` + "\r\n\r\n" +
		`data: {"choices":[{"index":0,"delta":{"content":"Hé"},"finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}` + "\r\n\r\n" +
		`data: {"choices":[{"index":1,"delta":{"content":"B"},"finish_reason":null}]}` + "\r\n\r\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}` + "\r\n\r\n" +
		"data: [DONE]\r\n\r\n"
	resp, err := collect(t, iotest.OneByteReader(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 2 || resp.Choices[0].Text != "Hé" || resp.Choices[1].Text != "B" {
		t.Fatalf("choices = %+v", resp.Choices)
	}
	if resp.Choices[0].FinishReason != chat.FinishStop || resp.Choices[1].FinishReason != chat.FinishLength {
		t.Errorf("finish = %q, %q", resp.Choices[0].FinishReason, resp.Choices[1].FinishReason)
	}
	if resp.Usage == nil || resp.Usage.OutputTokens != 2 {
		t.Errorf("usage = %+v, want the last one (2 output tokens)", resp.Usage)
	}
}

func TestReadStreamBreak(t *testing.T) {
	raw, _ := os.ReadFile("testdata/openai_chat_stream_usage.sse")
	for stop := range 5 {
		n := 0
		for _, err := range pull(bytes.NewReader(raw), 0) {
			if err != nil {
				t.Fatal(err)
			}
			if n == stop {
				break
			}
			n++
		}
		if n != stop {
			t.Errorf("break after %d: iterated %d", stop, n)
		}
	}
}

type splitReader struct {
	b   []byte
	rng *rand.Rand
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b[:1+r.rng.IntN(min(len(r.b), len(p), 40))])
	r.b = r.b[n:]
	return n, nil
}

func FuzzReadStream(f *testing.F) {
	for _, name := range []string{"openai_chat_stream_usage.sse", "openai_chat_stream_toolcall.sse"} {
		b, _ := os.ReadFile("testdata/" + name)
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":-1,\"delta\":{\"tool_calls\":[{\"index\":-5}]}}]}\n\ndata: [DONE]\n\n"))
	// Thinking: reasoning_content, reasoning, both, and one that is not
	// a string.
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"a\",\"content\":null}}]}\n\n" +
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"reasoning\":\"b\",\"reasoning_details\":[]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"c\",\"reasoning\":\"c\",\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":7}}]}\n\ndata: [DONE]\n\n"))
	for _, name := range endingFiles {
		b, _ := os.ReadFile("testdata/" + name)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var c chat.Collector
		finished := map[int]bool{}
		for ch, err := range pull(bytes.NewReader(in), 1<<16) {
			if err != nil {
				var ce *chat.Error
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a *chat.Error", err)
				}
				return
			}
			if ch.FinishReason != "" {
				if finished[ch.Choice] {
					t.Fatalf("choice %d finished twice", ch.Choice)
				}
				finished[ch.Choice] = true
			}
			c.Add(ch)
		}
		c.Response()
	})
}
