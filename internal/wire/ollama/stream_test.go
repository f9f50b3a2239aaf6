package ollama

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
	"github.com/google/go-cmp/cmp/cmpopts"
)

// pull reads r as the router does: a StreamReader's Next, through
// chat.Pull when a chat.Stream is wanted.
func pull(r io.Reader, maxLineSize int) chat.Stream {
	return chat.Pull(NewStreamReader(r, maxLineSize).Next)
}

// Sources of the files in testdata: testdata/SOURCES.md.

func readers(raw []byte) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":   func() io.Reader { return bytes.NewReader(raw) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(raw)) },
		"random":  func() io.Reader { return &splitReader{b: raw, rng: rand.New(rand.NewPCG(5, 6))} },
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

// chunks drains a stream; More depends on the split and is checked apart.
func chunks(s chat.Stream) ([]chat.Chunk, error) {
	var out []chat.Chunk
	for ch, err := range s {
		if err != nil {
			return out, err
		}
		ch.More = false
		out = append(out, ch)
	}
	return out, nil
}

func words(model string, ws ...string) []chat.Chunk {
	out := make([]chat.Chunk, len(ws))
	for i, w := range ws {
		out[i].Text = w
	}
	out[0].Model = model
	return out
}

var streamRows = []struct {
	name string
	file string
	in   string
	want []chat.Chunk
}{
	{
		name: "shared fixture",
		file: "ollama_chat.ndjson",
		want: append(words("qwen2.5", "Hello", "!", " How", " can", " I", " assist", " you", " today", "?"),
			chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 30, OutputTokens: 10}}),
	},
	{
		name: "length",
		file: "ollama_length.ndjson",
		want: append(words("gemma4:e2b", "##", " The", " Theory", " of", " Relativity", ":", " A", " Deep", " Dive", "\n\n", "The", " theory", " of", " relativity", ",", " developed"),
			chat.Chunk{FinishReason: chat.FinishLength, Usage: &chat.Usage{InputTokens: 18, OutputTokens: 16}}),
	},
	{
		name: "thinking and multi-byte text",
		file: "ollama_thinking_cyrillic.ndjson",
		want: []chat.Chunk{
			{Model: "qwen3.6:latest", Thinking: "Раз"},
			{Thinking: "мышляю"},
			{Text: "Ответ"},
			{Text: ": 4"},
			{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 16, OutputTokens: 9}},
		},
	},
	{
		name: "tool call",
		file: "ollama_tool_call.ndjson",
		want: []chat.Chunk{
			{Model: "qwen3.6:latest", ToolCalls: []chat.ToolCallDelta{{ID: "call_lj18tar0", Name: "read_file", Arguments: `{"path":"/etc/hostname"}`}}},
			{FinishReason: chat.FinishToolCalls, Usage: &chat.Usage{InputTokens: 299, OutputTokens: 27}},
		},
	},
	{
		name: "documented tool call on the done line, no id",
		file: "ollama_docs_tool_call.json",
		want: []chat.Chunk{
			{Model: "llama3.2", ToolCalls: []chat.ToolCallDelta{{ID: "call_0", Name: "get_current_weather", Arguments: `{"format":"celsius","location":"Paris, FR"}`}}},
			{FinishReason: chat.FinishToolCalls, Usage: &chat.Usage{InputTokens: 122, OutputTokens: 33}},
		},
	},
	{
		name: "two tool calls in two lines, CRLF, blank lines, no final newline",
		in: "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"index\":0,\"name\":\"a\",\"arguments\":{}}}]},\"done\":false}\r\n\r\n" +
			"{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"index\":1,\"name\":\"b\",\"arguments\":{\"x\": [1, 2]}}}]},\"done\":false}\r\n" +
			"\n{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"eval_count\":12}",
		want: []chat.Chunk{
			{Model: "m", ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "call_0", Name: "a", Arguments: "{}"}}},
			{ToolCalls: []chat.ToolCallDelta{{Index: 1, ID: "call_1", Name: "b", Arguments: `{"x":[1,2]}`}}},
			{FinishReason: chat.FinishToolCalls, Usage: &chat.Usage{OutputTokens: 12}},
		},
	},
	{
		name: "old server: no done_reason, no counts",
		in:   "{\"model\":\"llama3.2\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi 👋\"},\"done\":false}\n{\"model\":\"llama3.2\",\"done\":true}\n",
		want: []chat.Chunk{{Model: "llama3.2", Text: "Hi 👋"}, {FinishReason: chat.FinishStop}},
	},
	{
		// Written from Ollama's docs (api.md, "thinking"): a line may
		// carry thinking and content both; thinking alone makes a chunk.
		name: "synthetic: thinking beside content",
		in: `{"model":"gpt-oss:20b","message":{"role":"assistant","content":"","thinking":"Let me \"see\"\n"},"done":false}` + "\n" +
			`{"model":"gpt-oss:20b","message":{"role":"assistant","content":"4","thinking":"."},"done":false}` + "\n" +
			`{"model":"gpt-oss:20b","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}` + "\n",
		want: []chat.Chunk{{Model: "gpt-oss:20b", Thinking: "Let me \"see\"\n"}, {Text: "4", Thinking: "."}, {FinishReason: chat.FinishStop}},
	},
	{
		name: "load passes through",
		in:   `{"model":"llama3.2","created_at":"2024-09-12T21:17:29.110811Z","message":{"role":"assistant","content":""},"done_reason":"load","done":true}` + "\n",
		want: []chat.Chunk{{Model: "llama3.2"}, {FinishReason: "load"}},
	},
}

func TestReadStream(t *testing.T) {
	for _, tt := range streamRows {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(tt.in)
			if tt.file != "" {
				var err error
				if raw, err = os.ReadFile("testdata/" + tt.file); err != nil {
					t.Fatal(err)
				}
			}
			for name, mk := range readers(raw) {
				got, err := chunks(pull(mk(), 0))
				if err != nil {
					t.Fatalf("%s: error = %v", name, err)
				}
				if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: chunks (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// Every proper prefix of a capture is a broken stream: a protocol error
// (a truncation), with no finish reason reported. Only the last prefix, the
// whole done line without its newline, is complete.
func TestReadStreamEveryPrefix(t *testing.T) {
	raw, _ := os.ReadFile("testdata/ollama_chat.ndjson")
	for n := range len(raw) - 1 {
		got, err := chunks(pull(bytes.NewReader(raw[:n]), 0))
		var ce *chat.Error
		if !errors.As(err, &ce) || ce.Category != chat.CategoryProtocol || !errors.Is(err, chat.ErrTruncated) {
			t.Fatalf("[:%d]: error = %v, want a truncation", n, err)
		}
		for _, ch := range got {
			if ch.FinishReason != "" || ch.Usage != nil {
				t.Fatalf("[:%d]: a broken stream reported %+v", n, ch)
			}
		}
	}
}

func TestReadStreamMore(t *testing.T) {
	raw, _ := os.ReadFile("testdata/ollama_tool_call.ndjson")
	var more []bool
	for ch, err := range pull(bytes.NewReader(raw), 0) {
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, ch.More)
	}
	if diff := cmp.Diff([]bool{true, false}, more); diff != "" {
		t.Errorf("More (-want +got):\n%s", diff)
	}
}

// The done line ends the stream: a response kept open after it (or
// carrying more) is not read further.
func TestDoneLineEndsStream(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go io.WriteString(pw, `{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}`+"\n"+
		`{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":3,"eval_count":1}`+"\n")
	resp, err := chat.Collect(pull(pr, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; c.Text != "hi" || c.FinishReason != chat.FinishStop || resp.Usage.InputTokens != 3 || resp.Usage.OutputTokens != 1 {
		t.Errorf("got %+v, usage %+v", c, resp.Usage)
	}
}

func TestReadStreamErrors(t *testing.T) {
	ok := `{"model":"m","message":{"role":"assistant","content":"hi"},"done":false}` + "\n"
	done := `{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":3,"eval_count":1}` + "\n"
	tests := []struct {
		name      string
		in        string
		cat       chat.Category
		retryable bool
		text      string
	}{
		{"missing done", ok, chat.CategoryProtocol, true, "hi"},
		{"truncated json", ok + `{"model":"m","message":{"ro` + "\n", chat.CategoryProtocol, true, "hi"},
		{"truncated done line", ok + done[:40], chat.CategoryProtocol, true, "hi"},
		{"invalid utf8", ok + "{\"message\":{\"content\":\"\xff\xfe\"},\"done\":false}\n", chat.CategoryProtocol, true, "hi"},
		{"huge line", ok + strings.Repeat("x", 10<<20) + "\n" + done, chat.CategoryProtocol, true, "hi"},
		{"huge unterminated line", ok + strings.Repeat("x", 10<<20), chat.CategoryProtocol, true, "hi"},
		{"not json", "data: {}\n", chat.CategoryProtocol, true, ""},
		{"empty body", "", chat.CategoryProtocol, true, ""},
		{"error line", ok + `{"error":"an error was encountered while running the model: unexpected EOF"}` + "\n", chat.CategoryUpstreamUnavailable, true, "hi"},
		{"model not found", `{"error":"model \"llama9\" not found, try pulling it first"}` + "\n", chat.CategoryNotFound, false, ""},
		{"error object", `{"error":{"message":"upstream busy"}}` + "\n", chat.CategoryUpstreamUnavailable, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, mk := range readers([]byte(tt.in)) {
				resp, err := chat.Collect(pull(mk(), 1<<20))
				var ce *chat.Error
				if !errors.As(err, &ce) {
					t.Fatalf("%s: error = %v, want *chat.Error", name, err)
				}
				if ce.Category != tt.cat || ce.Retryable != tt.retryable {
					t.Errorf("%s: error = %s retryable=%v, want %s retryable=%v (%v)", name, ce.Category, ce.Retryable, tt.cat, tt.retryable, err)
				}
				text := ""
				for _, ch := range resp.Choices {
					text += ch.Text
					if ch.FinishReason != "" {
						t.Errorf("%s: a failed stream reported finish %q", name, ch.FinishReason)
					}
				}
				if text != tt.text {
					t.Errorf("%s: text before the error = %q, want %q", name, text, tt.text)
				}
				if resp.Usage != nil {
					t.Errorf("%s: a failed stream reported usage %+v", name, resp.Usage)
				}
			}
		})
	}
}

func TestReadStreamBreak(t *testing.T) {
	raw, _ := os.ReadFile("testdata/ollama_chat.ndjson")
	for stop := range 10 {
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

func TestDecodeError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		file   string
		body   string
		want   *chat.Error
	}{
		{"model not found", 404, "ollama_error_404.json", "",
			&chat.Error{Category: chat.CategoryNotFound, Status: 404, Message: `model "bad_model" not found, try pulling it first`}},
		{"no tools", 400, "ollama_error_400_tools.json", "",
			&chat.Error{Category: chat.CategoryInvalidRequest, Status: 400, Message: "registry.ollama.ai/library/gemma3:4b does not support tools"}},
		{"out of memory", 500, "", `{"error":"model requires more system memory (9.4 GiB) than is available (5.1 GiB)"}`,
			&chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Retryable: true, Message: "model requires more system memory (9.4 GiB) than is available (5.1 GiB)"}},
		{"busy", 503, "", `{"error":"server busy, please try again.  maximum pending requests exceeded"}`,
			&chat.Error{Category: chat.CategoryOverloaded, Status: 503, Retryable: true, Message: "server busy, please try again.  maximum pending requests exceeded"}},
		{"plain text", 502, "", "Bad Gateway\n",
			&chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 502, Retryable: true, Message: "Bad Gateway"}},
		{"empty", 500, "", "",
			&chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Retryable: true, Message: "upstream answered 500"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			if tt.file != "" {
				body, _ = os.ReadFile("testdata/" + tt.file)
			}
			if diff := cmp.Diff(tt.want, DecodeError(tt.status, body)); diff != "" {
				t.Errorf("DecodeError(%d) (-want +got):\n%s", tt.status, diff)
			}
		})
	}
}

func FuzzReadStream(f *testing.F) {
	for _, tt := range streamRows {
		if tt.file != "" {
			b, _ := os.ReadFile("testdata/" + tt.file)
			f.Add(b)
			continue
		}
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`{"error":"boom"}` + "\n"))
	f.Add([]byte(`{"message":{"tool_calls":[{"function":{"name":"f","arguments":null}}]},"done":true}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var c chat.Collector
		for ch, err := range pull(bytes.NewReader(in), 1<<12) {
			if err != nil {
				var ce *chat.Error
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a *chat.Error", err)
				}
				return
			}
			if ch.Choice != 0 {
				t.Fatalf("choice %d", ch.Choice)
			}
			c.Add(ch)
		}
		resp := c.Response()
		if len(resp.Choices) != 1 || resp.Choices[0].FinishReason == "" {
			t.Fatalf("a stream that ended cleanly did not finish: %+v", resp.Choices)
		}
	})
}
