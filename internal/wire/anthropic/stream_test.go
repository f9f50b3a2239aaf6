package anthropic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

// pull reads r as the router does: a StreamReader's Next, through
// chat.Pull when a chat.Stream is wanted.
func pull(r io.Reader, maxEventSize int) chat.Stream {
	return chat.Pull(NewStreamReader(r, maxEventSize).Next)
}

// Where each file in testdata/ comes from: testdata/SOURCES.md.

// result is the normalised outcome of a stream, compared whole.
type result struct {
	Model  string
	Text   string
	Tools  []chat.ToolCall
	Finish chat.FinishReason
	Usage  *chat.Usage
	// Thinking is the choice's thinking blocks, as chat.Collector
	// assembles them from Chunk.Thinking and Chunk.Thought.
	Thinking []chat.ThinkingBlock
	// Err is set when the stream ended in an error.
	Err *errWant
}

type errWant struct {
	Category  chat.Category
	Retryable bool
}

// run decodes a whole stream and checks the stream contract on the way:
// a zero chunk with each error and nothing after it, the finish reason on
// the last chunk only, the model on the first.
func run(t testing.TB, r io.Reader, maxEventSize int) result {
	t.Helper()
	var (
		col    chat.Collector
		res    result
		n      int
		failed bool
	)
	for c, err := range pull(r, maxEventSize) {
		if failed {
			t.Fatalf("chunk %+v after the error", c)
		}
		if err != nil {
			failed = true
			var ce *chat.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *chat.Error", err)
			}
			if !cmp.Equal(c, chat.Chunk{}) {
				t.Errorf("error came with a chunk: %+v", c)
			}
			res.Err = &errWant{ce.Category, ce.Retryable}
			continue
		}
		if res.Finish != "" {
			t.Fatalf("chunk %+v after the finish", c)
		}
		if c.Model != "" && n > 0 {
			t.Errorf("model %q on chunk %d, want it on the first only", c.Model, n)
		}
		if c.Usage != nil && c.FinishReason == "" {
			t.Errorf("usage on a chunk without a finish: %+v", c)
		}
		res.Finish = c.FinishReason
		col.Add(c)
		n++
	}
	resp := col.Response()
	res.Model = resp.Model
	res.Usage = resp.Usage
	if len(resp.Choices) > 1 {
		t.Fatalf("%d choices", len(resp.Choices))
	}
	if len(resp.Choices) == 1 {
		res.Text = resp.Choices[0].Text
		res.Tools = resp.Choices[0].ToolCalls
		res.Finish = resp.Choices[0].FinishReason
		res.Thinking = resp.Choices[0].Thinking
	}
	return res
}

// readers feeds b whole, one byte at a time and at random splits.
func readers(b []byte) map[string]func() io.Reader {
	m := map[string]func() io.Reader{
		"whole":   func() io.Reader { return bytes.NewReader(b) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
	}
	for seed := range uint64(4) {
		m[fmt.Sprintf("random%d", seed)] = func() io.Reader {
			return &splitReader{b: b, rng: rand.New(rand.NewPCG(seed, 99))}
		}
	}
	return m
}

// splitReader returns its bytes in reads of random sizes.
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

var cachingText = "Here are concise summaries of the three articles:\n\n1. OpenLLMetry: New open-source library extending OpenTelemetry with LLM functionality. Key features include LLM-specific metrics/traces, integration with existing setups, and support for popular LLM frameworks. Aims to provide deeper insights into AI model performance in applications.\n\n2. Major LLM providers introduce prompt caching to improve speed and reduce costs. Benefits include faster response times, lower computational costs, and improved scalability. Particularly useful for applications with repetitive prompts like chatbots and content moderation. Expected to impact AI industry by enabling wider adoption and new application types.\n\n3. Importance of unit testing in software development:\n- Catches bugs early\n- Saves time and money\n- Improves code quality\n- Facilitates refactoring\n- Serves as documentation\n- Enhances collaboration\nThe post emphasizes that unit testing is crucial for professional software development and pays off in the long run."

// fixtures are the testdata streams and what a correct reader makes of
// them. terminate appends the blank line that ends the last event: the
// SDK repository's copies of those files lack it (its decoder flushes at
// end of input), and both forms must read the same (see
// TestReadStreamUnterminated).
var fixtures = []struct {
	file      string
	terminate bool
	want      result
}{
	{
		file: "anthropic_messages_stream.sse",
		want: result{
			Model:  "claude-3-7-sonnet-20250219",
			Text:   "The current weather in San Francisco is 68 degrees Fahrenheit.",
			Finish: chat.FinishStop,
			Usage:  &chat.Usage{InputTokens: 509, OutputTokens: 19},
		},
	},
	{
		file: "anthropic_stream_error.sse",
		want: result{Err: &errWant{chat.CategoryOverloaded, true}},
	},
	{
		file: "anthropic_tool_use_stream.sse",
		want: result{
			Model:  "claude-3-7-sonnet-20250219",
			Text:   "I'll get the current weather in San Francisco for you in Fahrenheit.",
			Tools:  []chat.ToolCall{{ID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Name: "get_weather", Arguments: `{"city": "San Francisco", "units": "fahrenheit"}`}},
			Finish: chat.FinishToolCalls,
			Usage:  &chat.Usage{InputTokens: 397, OutputTokens: 89},
		},
	},
	{
		file:      "sdk_python_tool_use.sse",
		terminate: true,
		want: result{
			Model:  "claude-sonnet-4-20250514",
			Text:   "I'll check the current weather in Paris for you.",
			Tools:  []chat.ToolCall{{ID: "toolu_01NRLabsLyVHZPKxbKvkfSMn", Name: "get_weather", Arguments: `{"location": "Paris"}`}},
			Finish: chat.FinishToolCalls,
			Usage:  &chat.Usage{InputTokens: 377, OutputTokens: 65},
		},
	},
	{
		// max_tokens cut the tool call: its block never stops, and the
		// partial arguments are what was sent.
		file:      "sdk_python_incomplete_partial_json.sse",
		terminate: true,
		want: result{
			Model:  "claude-3-7-sonnet-20250219",
			Text:   "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file called taxes.txt. Let me do that for you now.",
			Tools:  []chat.ToolCall{{ID: "toolu_01EKqbqmZrGRXy18eN7m9kvY", Name: "make_file", Arguments: "{\"filename\": \"taxes.txt\", \"lines_of_text\": [\n\"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s\",\n\"\",\n\"## INTRODUCTION\",\n\"\",\n\"Filing taxes"}},
			Finish: chat.FinishLength,
			Usage:  &chat.Usage{InputTokens: 450, OutputTokens: 124},
		},
	},
	{
		file:      "sdk_python_refusal.sse",
		terminate: true,
		want: result{
			Model:  "claude-opus-4-7",
			Finish: chat.FinishContentFilter,
			// output_tokens_details.thinking_tokens, recorded.
			Usage: &chat.Usage{InputTokens: 20, OutputTokens: 120, ReasoningTokens: 67},
		},
	},
	{
		file: "openllmetry_prompt_caching_read.sse",
		want: result{
			Model:  "claude-3-5-sonnet-20240620",
			Text:   cachingText,
			Finish: chat.FinishStop,
			Usage:  &chat.Usage{InputTokens: 4 + 1165, OutputTokens: 221, CachedInputTokens: 1165},
		},
	},
	{
		// Thinking is read byte for byte, apart from the text, with its
		// signature; this stream reports no usage at all.
		file: "docs_thinking_stream.sse",
		want: result{
			Model:  "claude-opus-5-5",
			Text:   "The greatest common divisor of 1071 and 462 is **21**.",
			Finish: chat.FinishStop,
			Thinking: []chat.ThinkingBlock{{
				Text:      "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\nThe remainder is 0, so GCD(1071, 462) = 21.",
				Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...",
				Format:    chat.ThinkingAnthropic,
			}},
		},
	},
	{
		// The start's thinking text is the block's first.
		file: "sdk_go_thinking_block.sse",
		want: result{
			Finish: chat.FinishStop,
			Thinking: []chat.ThinkingBlock{{
				Text:      "Let me think...\nFirst, let's try this...\nTherefore, the answer is...",
				Signature: "ThinkingSignature",
				Format:    chat.ThinkingAnthropic,
			}},
		},
	},
	{
		file: "sdk_go_redacted_thinking_block.sse",
		want: result{
			Finish:   chat.FinishStop,
			Thinking: []chat.ThinkingBlock{{Redacted: "Redacted", Format: chat.ThinkingAnthropic}},
		},
	},
	{
		file: "sdk_go_interleaved_thinking.sse",
		want: result{
			Text:     "Hello world!",
			Tools:    []chat.ToolCall{{ID: "toolu_id", Name: "get_weather", Arguments: `{"city": "Los Angeles"}`}},
			Finish:   chat.FinishStop,
			Thinking: []chat.ThinkingBlock{{Text: "Let me think.", Signature: "sig123", Format: chat.ThinkingAnthropic}},
		},
	},
	{
		// An unsigned thinking block between text and a tool call: its
		// text is thinking, left open (unsigned) at the end.
		file: "sdk_go_multiple_blocks_unsigned_thinking.sse",
		want: result{
			Text:     "Let me look up the weather for you.The weather in Los Angeles is 85 degrees Fahrenheit!",
			Tools:    []chat.ToolCall{{ID: "toolu_id", Name: "get_weather", Arguments: `{"city": "Los Angeles"}`}},
			Finish:   chat.FinishStop,
			Thinking: []chat.ThinkingBlock{{Text: "I can look this up using a tool."}},
		},
	},
	{
		// A signed block with no text (display omitted) is kept, its
		// signature joined from two deltas; then a redacted block.
		file: "constructed_omitted_thinking_tool.sse",
		want: result{
			Model:  "claude-opus-4-7",
			Tools:  []chat.ToolCall{{ID: "toolu_constructed_T", Name: "get_weather", Arguments: `{"city": "Paris"}`}},
			Finish: chat.FinishToolCalls,
			Usage:  &chat.Usage{InputTokens: 412, OutputTokens: 187, ReasoningTokens: 141},
			Thinking: []chat.ThinkingBlock{
				{Signature: "EuYBCkQYAiJAk3s0bW9pdHRlZC10aGlua2luZy1jb25zdHJ1Y3RlZC1zaWduYXR1cmU=", Format: chat.ThinkingAnthropic},
				{Redacted: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pabVS5xuX4jSrmhIBGgw=", Format: chat.ThinkingAnthropic},
			},
		},
	},
	{
		file: "spliced_error_mid_stream.sse",
		want: result{
			Model: "claude-3-7-sonnet-20250219",
			Text:  "The current weather",
			Err:   &errWant{chat.CategoryOverloaded, true},
		},
	},
	{
		file: "constructed_multibyte_parallel_tools.sse",
		want: result{
			Model: "claude-sonnet-4-5",
			Text:  "東京とZürich — naïve café 🌤️ 😀é\n",
			Tools: []chat.ToolCall{
				{ID: "toolu_constructed_A", Name: "get_weather", Arguments: `{"city": "東京"}`},
				{ID: "toolu_constructed_B", Name: "get_weather", Arguments: `{"city": "Zürich"}`},
			},
			Finish: chat.FinishToolCalls,
			Usage:  &chat.Usage{InputTokens: 12 + 2048, OutputTokens: 57, CacheWriteTokens: 2048},
		},
	},
}

func readFixture(t testing.TB, file string, terminate bool) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if terminate {
		b = append(b, "\n\n"...)
	}
	return b
}

func TestReadStreamFixtures(t *testing.T) {
	for _, tt := range fixtures {
		t.Run(tt.file, func(t *testing.T) {
			raw := readFixture(t, tt.file, tt.terminate)
			for name, mk := range readers(raw) {
				got := run(t, mk(), 0)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// TestReadStreamUnterminated feeds the SDK's copies as they are: their
// last event, message_stop, lacks its blank line (and sometimes its line
// ending). A whole message_stop at the end of the body ends the answer,
// as Anthropic's SDKs read it (issue 16: the text used to be followed by
// "no message_stop"), so they read as the terminated copies do. A
// message_stop whose JSON is cut, or a body that ends before it, is
// still truncated, and what came before is delivered without a finish.
func TestReadStreamUnterminated(t *testing.T) {
	for _, tt := range fixtures {
		if !tt.terminate {
			continue
		}
		t.Run(tt.file, func(t *testing.T) {
			raw := readFixture(t, tt.file, false)
			for name, mk := range readers(raw) {
				if diff := cmp.Diff(tt.want, run(t, mk(), 0)); diff != "" {
					t.Errorf("%s: (-want +got):\n%s", name, diff)
				}
			}
			stop := bytes.LastIndex(raw, []byte("event: message_stop"))
			end := bytes.LastIndexByte(raw, '}')
			broken := map[string][]byte{
				"message_stop's JSON cut":   raw[:end],
				"no message_stop":           raw[:stop],
				"message_stop without data": raw[:stop+len("event: message_stop\n")],
			}
			want := tt.want
			want.Finish, want.Usage = "", nil
			want.Err = &errWant{chat.CategoryProtocol, true}
			for what, b := range broken {
				for name, mk := range readers(b) {
					if diff := cmp.Diff(want, run(t, mk(), 0)); diff != "" {
						t.Errorf("%s, %s: (-want +got):\n%s", what, name, diff)
					}
				}
				var err error
				for _, e := range pull(bytes.NewReader(b), 0) {
					err = e
				}
				if !errors.Is(err, chat.ErrTruncated) {
					t.Errorf("%s: error = %v, want one wrapping chat.ErrTruncated", what, err)
				}
			}
		})
	}
}

// TestReadStreamChunks checks the exact chunks of a recorded stream,
// including the More hint: set on every chunk whose successor was in the
// same read.
func TestReadStreamChunks(t *testing.T) {
	raw := readFixture(t, "anthropic_tool_use_stream.sse", false)
	var got []chat.Chunk
	for c, err := range pull(bytes.NewReader(raw), 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	tool := func(d chat.ToolCallDelta) []chat.ToolCallDelta { return []chat.ToolCallDelta{d} }
	want := []chat.Chunk{
		{Model: "claude-3-7-sonnet-20250219", UsageSoFar: &chat.Usage{InputTokens: 397, OutputTokens: 2}}, // message_start's
		{Text: "I'll"},
		{Text: " get"},
		{Text: " the current weather in"},
		{Text: " San Francisco for you in"},
		{Text: " Fahrenheit."},
		{ToolCalls: tool(chat.ToolCallDelta{ID: "toolu_01RaX2WYWRWCbaeFHssmGJXG", Name: "get_weather"})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `{"city`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `": "S`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `an F`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `ra`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `ncisco`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `"`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `, "units"`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `: "fahr`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `enhei`})},
		{ToolCalls: tool(chat.ToolCallDelta{Arguments: `t"}`})},
		{FinishReason: chat.FinishToolCalls, Usage: &chat.Usage{InputTokens: 397, OutputTokens: 89}},
	}
	// The last chunk comes with the stream's end: nothing is left to
	// wait for, so a writer may add the ending to the same write.
	if len(got) > 0 && !got[len(got)-1].More {
		t.Errorf("More not set on the last chunk")
	}
	more := 0
	for i := range got {
		if got[i].More {
			more++
		}
		got[i].More = false
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	// The reader's buffer holds most of the stream at once: most chunks
	// are followed by one already read. (Some events straddle a read.)
	if more < len(want)/2 {
		t.Errorf("More set on %d of %d chunks read from memory", more, len(want))
	}

	// One byte at a time nothing is ever buffered ahead; the last chunk
	// is made by the ending event itself.
	var slow []chat.Chunk
	for c, err := range pull(iotest.OneByteReader(bytes.NewReader(raw)), 0) {
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
	}
	for i, c := range slow {
		if last := i == len(slow)-1; c.More != last {
			t.Errorf("chunk %d of %d read one byte at a time: More = %v, want %v", i, len(slow), c.More, last)
		}
	}
}

// TestReadStreamThinkingChunks checks the exact chunks of the documented
// thinking stream: each thinking_delta is a thinking chunk as it comes,
// the signature a Thought when the block stops, and only then the text.
func TestReadStreamThinkingChunks(t *testing.T) {
	raw := readFixture(t, "docs_thinking_stream.sse", false)
	var got []chat.Chunk
	for c, err := range pull(bytes.NewReader(raw), 0) {
		if err != nil {
			t.Fatal(err)
		}
		c.More = false
		got = append(got, c)
	}
	want := []chat.Chunk{
		{Model: "claude-opus-5-5"},
		{Thinking: "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147"},
		{Thinking: "\n462 = 3 × 147 + 21"},
		{Thinking: "\n147 = 7 × 21 + 0"},
		{Thinking: "\nThe remainder is 0, so GCD(1071, 462) = 21."},
		{Thought: &chat.Thought{Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...", Format: chat.ThinkingAnthropic}},
		{Text: "The greatest common divisor of 1071 and 462 is **21**."},
		{FinishReason: chat.FinishStop},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
}

// TestReadStreamDoesNotHold checks that a chunk is yielded as soon as its
// event arrives, without waiting for the next one, even when it arrived
// together with events that produce nothing.
func TestReadStreamDoesNotHold(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	next, stop := iter.Pull2(pull(pr, 0))
	defer stop()
	go pw.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n"))
	want := []chat.Chunk{{Model: "m", More: true}, {Text: "Hi"}}
	for _, w := range want {
		got := make(chan chat.Chunk, 1)
		go func() {
			c, err, ok := next()
			if err != nil || !ok {
				t.Errorf("next() = %v, %v", err, ok)
			}
			got <- c
		}()
		select {
		case c := <-got:
			if diff := cmp.Diff(w, c); diff != "" {
				t.Errorf("chunk (-want +got):\n%s", diff)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("chunk %+v held back while the upstream was silent", w)
		}
	}
	pw.CloseWithError(io.ErrUnexpectedEOF)
}

func TestReadStreamBreak(t *testing.T) {
	raw := readFixture(t, "anthropic_tool_use_stream.sse", false)
	for stop := range 20 {
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
		if n != min(stop, 18) {
			t.Errorf("break after %d: iterated %d", stop, n)
		}
	}
}

const (
	start  = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
	text0  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
	stop0  = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	mdelta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n"
	mstop  = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	ok     = start + text0
)

var okUsage = &chat.Usage{InputTokens: 5, OutputTokens: 3}

func delta(index, typ, field, value string) string {
	return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":" + index + ",\"delta\":{\"type\":\"" + typ + "\",\"" + field + "\":\"" + value + "\"}}\n\n"
}

func errEvent(typ, msg string) string {
	return "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"" + typ + "\",\"message\":\"" + msg + "\"}}\n\n"
}

// garbage are streams that must end in an error after delivering "hi",
// and never look finished.
var garbage = []struct {
	name string
	in   string
	cat  chat.Category
}{
	{"no message_stop after message_delta", ok + stop0 + mdelta, chat.CategoryProtocol},
	{"no message_stop", ok, chat.CategoryProtocol},
	{"truncated json", ok + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"del\n\n", chat.CategoryProtocol},
	{"truncated mid event", ok + "event: content_block_delta\ndata: {\"type\":\"content_bl", chat.CategoryProtocol},
	{"invalid utf8", ok + delta("0", "text_delta", "text", "\xff\xfe"), chat.CategoryProtocol},
	{"huge line", ok + "event: content_block_delta\ndata: " + strings.Repeat("x", 10<<20) + "\n\n", chat.CategoryProtocol},
	{"huge text delta", ok + delta("0", "text_delta", "text", strings.Repeat("y", 2<<20)), chat.CategoryProtocol},
	{"delta for a block never started", ok + delta("5", "text_delta", "text", "x"), chat.CategoryProtocol},
	{"negative index", ok + delta("-1", "text_delta", "text", "x"), chat.CategoryProtocol},
	{"huge index", ok + delta("1000000000000", "text_delta", "text", "x"), chat.CategoryProtocol},
	{"overflowing index", ok + delta("99999999999999999999999", "text_delta", "text", "x"), chat.CategoryProtocol},
	{"fractional index", ok + delta("0.5", "text_delta", "text", "x"), chat.CategoryProtocol},
	{"missing index", ok + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n", chat.CategoryProtocol},
	{"start beyond the bound", ok + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":4096,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", chat.CategoryProtocol},
	{"stop twice", ok + stop0 + stop0, chat.CategoryProtocol},
	{"started twice", ok + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", chat.CategoryProtocol},
	{"start without block", ok + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1}\n\n", chat.CategoryProtocol},
	{"second message_start", ok + start, chat.CategoryProtocol},
	{"not an object", ok + "event: content_block_delta\ndata: [1,2]\n\n", chat.CategoryProtocol},
	{"wrong field type", ok + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":5}}\n\n", chat.CategoryProtocol},
	{"overloaded", ok + errEvent("overloaded_error", "Overloaded"), chat.CategoryOverloaded},
	{"rate limited", ok + errEvent("rate_limit_error", "slow down"), chat.CategoryRateLimited},
	{"api error", ok + errEvent("api_error", "Internal server error"), chat.CategoryUpstreamUnavailable},
	{"invalid request", ok + errEvent("invalid_request_error", "bad"), chat.CategoryInvalidRequest},
	{"prompt too long", ok + errEvent("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"), chat.CategoryContextLength},
	{"authentication", ok + errEvent("authentication_error", "invalid x-api-key"), chat.CategoryAuth},
	{"permission", ok + errEvent("permission_error", "no"), chat.CategoryAuth},
	{"not found", ok + errEvent("not_found_error", "model: claude-9"), chat.CategoryNotFound},
	{"request too large", ok + errEvent("request_too_large", "Request exceeds the maximum size"), chat.CategoryContextLength},
	{"timeout", ok + errEvent("timeout_error", "Request timed out"), chat.CategoryTimeout},
	{"unknown error type", ok + errEvent("brand_new_error", "?"), chat.CategoryUpstreamUnavailable},
	{"error event that is not JSON", ok + "event: error\ndata: upstream exploded\n\n", chat.CategoryUpstreamUnavailable},
	{"error type without the event name", ok + "data: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"x\"}}\n\n", chat.CategoryRateLimited},
	{"endless signature", ok + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
		strings.Repeat(delta("1", "signature_delta", "signature", strings.Repeat("s", 400<<10)), 3), chat.CategoryProtocol},
	{"a signature in tiny pieces", ok + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
		strings.Repeat(delta("1", "signature_delta", "signature", "s"), 1000), chat.CategoryProtocol},
	{"signatures over the stream's bound", ok + func() string {
		var b strings.Builder
		for i := 1; i <= 3; i++ {
			n := strconv.Itoa(i)
			b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":" + n + ",\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n")
			b.WriteString(delta(n, "signature_delta", "signature", strings.Repeat("s", 400<<10)))
			b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":" + n + "}\n\n")
		}
		return b.String()
	}(), chat.CategoryProtocol},
}

func TestReadStreamGarbage(t *testing.T) {
	for _, tt := range garbage {
		t.Run(tt.name, func(t *testing.T) {
			for name, mk := range readers([]byte(tt.in)) {
				got := run(t, mk(), 0)
				if got.Err == nil || got.Err.Category != tt.cat {
					t.Fatalf("%s: error = %+v, want category %s", name, got.Err, tt.cat)
				}
				if got.Text != "hi" {
					t.Errorf("%s: text before the error = %q, want hi", name, got.Text)
				}
				if got.Finish != "" || got.Usage != nil {
					t.Errorf("%s: a broken stream reported finish %q, usage %+v", name, got.Finish, got.Usage)
				}
			}
		})
	}
}

func TestReadStreamEdges(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want result
	}{
		{
			name: "empty body",
			in:   "",
			want: result{Err: &errWant{chat.CategoryProtocol, true}},
		},
		{
			name: "delta before message_start",
			in:   delta("0", "text_delta", "text", "x"),
			want: result{Err: &errWant{chat.CategoryProtocol, true}},
		},
		{
			name: "output tokens are the last reported, not a sum; input counts update",
			in: start + text0 + stop0 +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null},\"usage\":{\"output_tokens\":10}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"END\"},\"usage\":{\"input_tokens\":7,\"cache_read_input_tokens\":100,\"cache_creation_input_tokens\":20,\"output_tokens\":12}}\n\n" +
				mstop,
			want: result{Model: "m", Text: "hi", Finish: chat.FinishStop, Usage: &chat.Usage{InputTokens: 127, OutputTokens: 12, CachedInputTokens: 100, CacheWriteTokens: 20}},
		},
		{
			name: "message_stop without a stop reason is a stop",
			in:   ok + stop0 + mstop,
			want: result{Model: "m", Text: "hi", Finish: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}},
		},
		{
			name: "tool without input deltas gets its start input, or {}",
			in: start +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t0\",\"name\":\"now\",\"input\":{}}}\n\n" +
				delta("0", "input_json_delta", "partial_json", "") +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{\"a\": 1}}}\n\n" +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" + mstop,
			want: result{Model: "m", Tools: []chat.ToolCall{{ID: "t0", Name: "now", Arguments: "{}"}, {ID: "t1", Name: "f", Arguments: `{"a": 1}`}}, Finish: chat.FinishToolCalls, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 9}},
		},
		{
			name: "unknown events, blocks and deltas are skipped; a redacted block is thinking",
			in: ": comment\n\n" + start +
				"event: future_event\ndata: {\"type\":\"future_event\",\"index\":99}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n" +
				delta("0", "input_json_delta", "partial_json", "{}") +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"xyz\"}}\n\n" +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"pre\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"citations_delta\",\"citation\":{\"type\":\"char_location\"}}}\n\n" +
				delta("2", "text_delta", "text", "fix") +
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
				mdelta + mstop,
			want: result{Model: "m", Text: "prefix", Finish: chat.FinishStop, Usage: okUsage, Thinking: []chat.ThinkingBlock{{Redacted: "xyz", Format: chat.ThinkingAnthropic}}},
		},
		{
			name: "CRLF line endings and no space after the colon",
			in:   strings.ReplaceAll(strings.ReplaceAll(ok+stop0+mdelta+mstop, "data: ", "data:"), "\n", "\r\n"),
			want: result{Model: "m", Text: "hi", Finish: chat.FinishStop, Usage: okUsage},
		},
		{
			name: "a delta after the block's stop is taken, as the SDKs take it",
			in:   ok + stop0 + delta("0", "text_delta", "text", "!") + mdelta + mstop,
			want: result{Model: "m", Text: "hi!", Finish: chat.FinishStop, Usage: okUsage},
		},
		{
			name: "pause_turn is a stop",
			in:   ok + stop0 + strings.Replace(mdelta, "end_turn", "pause_turn", 1) + mstop,
			want: result{Model: "m", Text: "hi", Finish: chat.FinishStop, Usage: okUsage},
		},
		{
			name: "unknown stop reasons pass through",
			in:   ok + stop0 + strings.Replace(mdelta, "end_turn", "new_reason", 1) + mstop,
			want: result{Model: "m", Text: "hi", Finish: "new_reason", Usage: okUsage},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, mk := range readers([]byte(tt.in)) {
				if diff := cmp.Diff(tt.want, run(t, mk(), 0)); diff != "" {
					t.Errorf("%s: (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

func TestReadStreamToolCallLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(start)
	for i := range chat.MaxToolCalls + 1 {
		fmt.Fprintf(&b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t%d\",\"name\":\"f\",\"input\":{}}}\n\n", i, i)
		fmt.Fprintf(&b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":%d}\n\n", i)
	}
	got := run(t, strings.NewReader(b.String()), 0)
	if got.Err == nil || got.Err.Category != chat.CategoryProtocol || len(got.Tools) != chat.MaxToolCalls {
		t.Errorf("error = %+v with %d tool calls, want a protocol error after %d", got.Err, len(got.Tools), chat.MaxToolCalls)
	}
}

func TestNormalizeStopReason(t *testing.T) {
	for in, want := range map[string]chat.FinishReason{
		"end_turn": chat.FinishStop, "stop_sequence": chat.FinishStop, "pause_turn": chat.FinishStop,
		"max_tokens": chat.FinishLength, "model_context_window_exceeded": chat.FinishLength,
		"tool_use": chat.FinishToolCalls, "refusal": chat.FinishContentFilter, "other": "other",
	} {
		if got := NormalizeStopReason(in); got != want {
			t.Errorf("NormalizeStopReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDecodeError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   chat.Error
	}{
		{"rate limited", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_1"}`,
			chat.Error{Category: chat.CategoryRateLimited, Status: 429, Message: "Number of request tokens has exceeded your per-minute rate limit", Retryable: true}},
		{"overloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			chat.Error{Category: chat.CategoryOverloaded, Status: 529, Message: "Overloaded", Retryable: true}},
		{"overloaded without a body", 529, ``,
			chat.Error{Category: chat.CategoryOverloaded, Status: 529, Message: "upstream answered 529", Retryable: true}},
		{"prompt too long", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`,
			chat.Error{Category: chat.CategoryContextLength, Status: 400, Message: "prompt is too long: 208310 tokens > 200000 maximum"}},
		{"invalid request", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`,
			chat.Error{Category: chat.CategoryInvalidRequest, Status: 400, Message: "max_tokens: Field required"}},
		{"authentication", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			chat.Error{Category: chat.CategoryAuth, Status: 401, Message: "invalid x-api-key"}},
		{"billing", 402, `{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}`,
			chat.Error{Category: chat.CategoryRateLimited, Status: 402, Message: "credit balance too low", Code: chat.CodeInsufficientQuota}},
		{"permission", 403, `{"type":"error","error":{"type":"permission_error","message":"no access"}}`,
			chat.Error{Category: chat.CategoryAuth, Status: 403, Message: "no access"}},
		{"not found", 404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`,
			chat.Error{Category: chat.CategoryNotFound, Status: 404, Message: "model: claude-nope"}},
		{"request too large from the proxy", 413, `<html>413 Request Entity Too Large</html>`,
			chat.Error{Category: chat.CategoryContextLength, Status: 413, Message: "<html>413 Request Entity Too Large</html>"}},
		{"api error", 500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Message: "Internal server error", Retryable: true}},
		{"unknown type falls back on the status", 503, `{"type":"error","error":{"type":"new_error","message":"later"}}`,
			chat.Error{Category: chat.CategoryOverloaded, Status: 503, Message: "later", Retryable: true}},
		{"an OpenAI-style string error", 400, `{"error":"bad"}`,
			chat.Error{Category: chat.CategoryInvalidRequest, Status: 400, Message: "bad"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(&tt.want, DecodeError(tt.status, []byte(tt.body))); diff != "" {
				t.Errorf("DecodeError(%d, %s) (-want +got):\n%s", tt.status, tt.body, diff)
			}
		})
	}
}

func FuzzReadStream(f *testing.F) {
	for _, fx := range fixtures {
		b, _ := os.ReadFile("testdata/" + fx.file)
		f.Add(b)
	}
	for _, g := range garbage {
		if len(g.in) < 1<<16 {
			f.Add([]byte(g.in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		res := run(t, bytes.NewReader(in), 1<<16)
		if res.Err == nil && res.Finish == "" {
			t.Fatalf("stream ended with neither a finish nor an error")
		}
	})
}
