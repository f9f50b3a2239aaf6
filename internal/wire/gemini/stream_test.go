package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// pull reads r as the router does: a StreamReader's Next, through
// chat.Pull when a chat.Stream is wanted.
func pull(r io.Reader, maxEventSize int) chat.Stream {
	return chat.Pull(NewStreamReader(r, maxEventSize).Next)
}

// Sources of the files in testdata: testdata/SOURCES.md.

// readers feeds raw whole, one byte at a time and at random splits.
func readers(raw []byte) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":   func() io.Reader { return bytes.NewReader(raw) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(raw)) },
		"random":  func() io.Reader { return &splitReader{b: raw, rng: rand.New(rand.NewPCG(1, 2))} },
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

// chunks drains a stream; More depends on how the bytes were split, so it
// is checked apart.
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

// The thoughtSignatures of the recorded streams, copied from their bytes.
const (
	sigSquareRoot  = "Ci8BDDnWx3Ks3sk6UrIpsLS78V1SY5Qpg/t/K/dxXlmkPkWFIVKbXPI9nbG5GO3DCApbAQw51sf7vD57cjm0ihpJamf+HACa/aOkWpwK/9i4xSbfeChM2asAYO6WY6kkMlLa3+50ls14nX4wgc5fOpDVn4emE3CHZTTf9b5BYvU8GIqomm6B/eWHp0q/oAq9AQEMOdbH7zpeLT/xqUuq4lzyDiCT9Uh9QNhTUMINSC+okVXuUN60b8qpnv5pQHSel84dK4qiMEhREVbcvgW6njx8QflBNQwtQGX9f+Iz06+5yer9IUQFDrRUiKgKCO2x3IH0fHkTeYffmt2Ml6o4XfNk3Cq1NW3R5U3jgLVwHdL7hTvefrMqXP3uaFSm94z6FFmpnjDbk78TwE9U5ACu4PhH/wM7M66LSZYTIZpCxBdaOXRHzRywc6lrq5r/+QrFAQEMOdbHy0VC10Q7ScsGAnudGXbqSIxNGtMb6ocixxtGdS80nU4jZhurfTaG9R2QCkoJc44hfGsQU93TQVmCDyrlCuWwxei22hJzRN+Q17uCSu09GH4wz/tIWD4MAolDTHQjHuH46JKzREX1XyK6ztgExRouf4Sy7e+qF1YFG6A15fFhDb9tHkERuRpzl/dyBh2aY73FIg0sJBrwQaoiFl1L5+sUitIxK5ASaGloi3XeQSkzwXY/+LmYc52qeC6qeQjtYESE"
	sigBestCountry = "CiYBDDnWx+WsNzMAjdK2V8+R4pVWFPc9sPq5R+MFwnkF1Arsw843NAp3AQw51sdZDRzKN7Z2/rZrq2vSOdQQrDwWyFsnY4xbAPAAbRVNM29dhWyFuJPRt6dGc6NABD6G6PpHP2OPntseg6uf2vpK2ThbhGxKV455TSd5C+oAax6xA3amKVhRYTz4qu/9RYv6qAXVZupDUqHFv7AWnpFqFDUK8QEBDDnWx8OXTWygkDuqb6Y0OcZmNdpYEoFZh2SFbReFModbNQf4gFGGvL5z4j504FtnBwfexlB5B533pXxwphQ0P5Uwg5uAP5pLqktS9PctpNvQmN+Wyrokqq8L6CIYO/daeXq1Gf9+HJXf0hsAUcpUDmAwqQri4Xeg31EfKbEowux0RlPk+06qIIFSFpQHqzq1EnfCPUi1DeG7ifH9OwnG8ycxWjcTLd1u+VUi9b2fHxZQxjh56tPY0nVzTxZzWifmrCjZJwc3k/Jdx3N7Afrt/HnkPOmxcswn8ALoIEvT56dsy+/P2HnNpAw1TyPefo5eCuEBAQw51se1zUPJd+G3d9KHPois4F8PAKUO2gEhnjJ6oP+i8+W2wAWtJgeqlE8OKaLlDDAkdSmmQWVZRBlE4QCZO/JlQG1F0oOrov+eY1lx6KG3fXH8zG5YXWJMwmNUqMlzbWEcUz7a33dBu3fSxCXYzGQKnmjxD4yoDCV9fAnU9hZy68H76e3Z9J0xPVfL53uyr+sUvPqHOpellPOK/c8nmiE9Lhr52x4e7rHGj8BXBekneZNP/K+PCJwx0I1ratGLkNuwYYQzU2RPuL9pZJWFF1Mxnw2lv6ET9poURza8UEYECv8BAQw51sc+E44R/+D+ujcdmfE18DrOT/An50zcEby4rs1VCK5BiTwnBWvb98P8ntToNOTlH75cV/PjXBUJ4jVdrv49V7bNWfzG119HHjjmiQ8xcEPi67jkDRpS/FjcjtzgBdSWr/kkPYQ8BSOJ6uJA52AWlFRZ/1NqzPyYqScif5TuOVdX/R9lbkvJ5jk3B9yzkgo7auqYTeoYTEXiuS3ZYe4eXbM5Hp0DiVe7BBNEYBpG2Y/b5atj9vaXWpu+uSyVw1MOjEOFRl2/0d/JzEckqPbxWSixtLTjiT8X7VVcaXP7bJR9W1I6/SyKt7IKZaAqjsDL+sqhgOUmt69nvC5NCtwBAQw51seh6CARvaAYeTKSeFKKJiGk+OjDFFOH8iCTSKrSnoyMwNZycT8Ct6blCKgx+KdkZL0lYnFBJvyuseT/5MBsh9aG1DkFJOFfCBWiVHNWbv6FE8cF/uy/lca2vdRZsWysBTLH+90LPwvFJ+EOzHyUlEneg+qIJZExN9RurBQAnEg9aTSqJGHcvf593xJLJaaRsB4SVhO4frrTEuRhdap+4FT/qAgKLjD/4hEzKJFfnHGlV1zvsNDMWgpHBeDRAeCtKcsq6hn6VgkfKuNAikBaggE7GtcAV7G97QruAQEMOdbHPP5fIU43PIixsIIZB1u9j/7HDZokn0t6JHGlynsstrkgWWB1zNJVRhrBTykGZ5+BTUWqq8qXQPS83TH+pp+F/bUErJoPoVWac2luxzOkJE3nzk9RrgfVvJCY9/r4Cgn+0ie8q2HdM9XBUH72TqSuNUhXAcoX6P3PCxFulGcBRCpsxJXguqAVnJA5uQsMAWDOX3CToeRhVKtbR+RhzMr0fjj2Rgqco+4iC2+EmmmppSScpwIpbdTzcowoS/oC8P17v0CfmYXKXjhZyYWB12pcSgkGdZwBpgBs2UN74jaOGz0g06CAQuwLeFcKswEBDDnWx21axXbhcnyGm8ZKpBjDOP/w8oo4SCmpIH1ZlSOKAHOSzgMHX2HdKVhaB3LEvORPhNW+kl3MDIKbTfmBcybdGBSCmxgJbkB4VouAD/vFPLbkpsjeG0CW/X2KhLyH9I4gQu6FrV0+rEWtE73fVdzbpQiBC+J5JRUsEiVF7DH2gkaM6Q6ACOKVNHiVoi1wSk8u7PisDzpL3XF6XaXSIKWM2aSVVXQbXxcVeQO7V5py2A=="
)

var streamRows = []struct {
	name string
	file string // or in
	in   string
	want []chat.Chunk
}{
	{
		name: "shared fixture",
		file: "gemini_stream.sse",
		want: []chat.Chunk{
			{Text: "The", Model: "gemini-2.0-flash"},
			{Text: " capital of Wyoming"},
			{Text: " is **Cheyenne**.\n"},
			{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 7, OutputTokens: 10}},
		},
	},
	{
		name: "thinking then text",
		file: "gemini_thinking_text.sse",
		want: []chat.Chunk{
			{Model: "gemini-2.5-flash-lite", Thinking: "**Considering Single-Word Greetings**\n\nI've determined the simplest way to fulfill this request is to utilize the single-word greeting \"Hello\". This seems the most direct way to get the job done.\n\n\n"},
			{Text: "Hello."},
			{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 9, OutputTokens: 29, ReasoningTokens: 28}},
		},
	},
	{
		name: "max tokens spent thinking",
		file: "gemini_thinking_max_tokens.sse",
		want: []chat.Chunk{
			{Model: "gemini-2.5-flash-lite", Thinking: "**Initiating Explanations**\n\nMy initial focus is on outlining a process for creating a comprehensive explanation. I'm starting with a high-level approach, aiming to break down the complex concept into manageable steps. The goal is to develop a structured methodology that addresses all key aspects thoroughly.\n\n\n"},
			{FinishReason: chat.FinishLength, Usage: &chat.Usage{InputTokens: 10, OutputTokens: 13, ReasoningTokens: 13}},
		},
	},
	{
		name: "function call",
		file: "gemini_tool_call.sse",
		want: []chat.Chunk{
			{Model: "gemini-2.5-flash-lite", Thinking: "**Calculating Square Root**\n\nI've determined I need to find the square root of 132413.0, and the tool to use is \"square_root,\" which takes a floating-point number. I'm ready to call the tool with the provided number. No further complexities have emerged, and I am prepared to deliver the result once available.\n\n\n"},
			{Thinking: "**Refining Result Delivery**\n\nI've decided to refine the output delivery. Since the user specifically requested *only* the result and no explanation, I'll extract the 'response' directly from the tool's output and return that value. This is a streamlined approach to meet the user's specific requirement for a minimal response.\n\n\n"},
			{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "call_0", Name: "square_root", Arguments: `{"number":132413}`}}, Thought: &chat.Thought{Signature: sigSquareRoot, Format: chat.ThinkingGemini}},
			{FinishReason: chat.FinishToolCalls, Usage: &chat.Usage{InputTokens: 117, OutputTokens: 123, ReasoningTokens: 105}},
		},
	},
	{
		name: "parallel function calls",
		file: "gemini_parallel_tool_calls.sse",
		want: []chat.Chunk{
			{Model: "gemini-2.5-flash-lite", Thinking: "**Considering Country Comparison**\n\nI'm currently focused on determining how to utilize the \"best_country\" tool. It seems this tool is relevant to compare Canada and the USA. I have identified a parameter requirement: \"country\".\n\n\n"},
			{Thinking: "**Assessing Tool Limitations**\n\nI realize the `best_country` tool, while seemingly relevant, doesn't directly support the user's need for a side-by-side comparison. It only accepts one country at a time, making a direct \"better than\" analysis impossible. I'm focusing on how to communicate this limitation effectively to the user, perhaps suggesting alternative strategies to achieve the desired comparison if possible.\n\n\n"},
			{ToolCalls: []chat.ToolCallDelta{
				{Index: 0, ID: "call_0", Name: "best_country", Arguments: `{"country":"Canada"}`},
				{Index: 1, ID: "call_1", Name: "best_country", Arguments: `{"country":"USA"}`},
			}, Thought: &chat.Thought{Signature: sigBestCountry, Format: chat.ThinkingGemini}},
			{FinishReason: chat.FinishToolCalls, Usage: &chat.Usage{InputTokens: 115, OutputTokens: 321, ReasoningTokens: 293}},
		},
	},
	{
		// Synthetic, from the documented types: a Gemini 3 answer without
		// function calls carries its signature on a text part, here an
		// empty one in the last event.
		name: "signature on an empty text part",
		in: "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Weighing é\", \"thought\": true}],\"role\": \"model\"}}],\"modelVersion\": \"gemini-3-pro-preview\"}\n\n" +
			"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Yes.\"}],\"role\": \"model\"}}]}\n\n" +
			"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\", \"thoughtSignature\": \"EqQBsig3\"}],\"role\": \"model\"},\"finishReason\": \"STOP\"}]," +
			"\"usageMetadata\": {\"promptTokenCount\": 5,\"candidatesTokenCount\": 1,\"thoughtsTokenCount\": 40,\"totalTokenCount\": 46}}\n\n",
		want: []chat.Chunk{
			{Model: "gemini-3-pro-preview", Thinking: "Weighing é"},
			{Text: "Yes."},
			{Thought: &chat.Thought{Signature: "EqQBsig3", Format: chat.ThinkingGemini}},
			{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 41, ReasoningTokens: 40}},
		},
	},
	{
		// Synthetic: two signed parts in one event, thinking between
		// them: each signature closes the thinking before it, so the
		// event is split into chunks at the second.
		name: "two signatures in one event",
		in: "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\", \"thought\": true}, {\"text\": \"A\", \"thoughtSignature\": \"s1\"}, " +
			"{\"text\": \"b\", \"thought\": true}, {\"functionCall\": {\"name\": \"f\", \"args\": {}}, \"thoughtSignature\": \"s2\"}, {\"functionCall\": {\"name\": \"g\"}}],\"role\": \"model\"},\"finishReason\": \"STOP\"}]," +
			"\"usageMetadata\": {\"promptTokenCount\": 1,\"candidatesTokenCount\": 2,\"totalTokenCount\": 3}}\n\n",
		want: []chat.Chunk{
			{Thinking: "a", Text: "A", Thought: &chat.Thought{Signature: "s1", Format: chat.ThinkingGemini}},
			{Thinking: "b", ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "call_0", Name: "f", Arguments: "{}"}, {Index: 1, ID: "call_1", Name: "g", Arguments: "{}"}},
				Thought: &chat.Thought{Signature: "s2", Format: chat.ThinkingGemini}},
			{FinishReason: chat.FinishToolCalls, Usage: &chat.Usage{InputTokens: 1, OutputTokens: 2}},
		},
	},
	{
		name: "multi-byte text, LF framing, no index, cached tokens",
		in: "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Grüße, \"}],\"role\": \"model\"}}],\"modelVersion\": \"gemini-2.5-flash\"}\n\n" +
			"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"世界 🌍\"}, {\"text\": \"!\"}],\"role\": \"model\"},\"finishReason\": \"STOP\"}]," +
			"\"usageMetadata\": {\"promptTokenCount\": 2100,\"cachedContentTokenCount\": 2048,\"candidatesTokenCount\": 6,\"totalTokenCount\": 2106}}\n\n",
		want: []chat.Chunk{
			{Text: "Grüße, ", Model: "gemini-2.5-flash"},
			{Text: "世界 🌍!"},
			{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 2100, OutputTokens: 6, CachedInputTokens: 2048}},
		},
	},
	{
		name: "two candidates, usage in a later event",
		in: "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"A\"}],\"role\": \"model\"},\"index\": 0},{\"content\": {\"parts\": [{\"text\": \"B\"}],\"role\": \"model\"},\"index\": 1}]}\r\n\r\n" +
			"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"b\"}],\"role\": \"model\"},\"finishReason\": \"MAX_TOKENS\",\"index\": 1}]}\r\n\r\n" +
			"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}]}\r\n\r\n" +
			"data: {\"usageMetadata\": {\"promptTokenCount\": 4,\"candidatesTokenCount\": 4,\"toolUsePromptTokenCount\": 3,\"totalTokenCount\": 11}}\r\n\r\n",
		want: []chat.Chunk{
			{Text: "A"},
			{Choice: 1, Text: "B"},
			{Choice: 1, Text: "b"},
			{Text: "a"},
			{Choice: 1, FinishReason: chat.FinishLength},
			{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 7, OutputTokens: 4}},
		},
	},
	{
		name: "function call with an id, after text",
		in:   "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Let me look.\"},{\"functionCall\": {\"id\": \"fc-7\",\"name\": \"lookup\"}}],\"role\": \"model\"},\"finishReason\": \"STOP\"}]}\n\n",
		want: []chat.Chunk{
			{Text: "Let me look.", ToolCalls: []chat.ToolCallDelta{{ID: "fc-7", Name: "lookup", Arguments: "{}"}}},
			{FinishReason: chat.FinishToolCalls},
		},
	},
	{
		name: "safety stop",
		in:   "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Sure, here\"}],\"role\": \"model\"}}]}\n\ndata: {\"candidates\": [{\"finishReason\": \"SAFETY\",\"index\": 0,\"safetyRatings\": [{\"category\": \"HARM_CATEGORY_DANGEROUS_CONTENT\",\"probability\": \"HIGH\",\"blocked\": true}]}]}\n\n",
		want: []chat.Chunk{{Text: "Sure, here"}, {FinishReason: chat.FinishContentFilter}},
	},
	{
		name: "unknown finish reasons pass through in lower case",
		in:   "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Bonjour\"}]},\"finishReason\": \"LANGUAGE\"}]}\n\n",
		want: []chat.Chunk{{Text: "Bonjour"}, {FinishReason: "language"}},
	},
	{
		name: "comments, BOM and empty events",
		in:   "\xEF\xBB\xBF: hello\n\ndata:\n\ndata: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"ok\"}]},\"finishReason\": \"STOP\"}]}\n\n",
		want: []chat.Chunk{{Text: "ok"}, {FinishReason: chat.FinishStop}},
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

// Every proper prefix of a capture is a broken stream: it must end in a
// protocol error, with no finish reason reported. The exceptions are the
// prefixes that end after the last event's JSON, which lack only its
// line endings: that event is complete, and it is the stream's last
// (issue 16), so they read as the whole capture does.
func TestReadStreamEveryPrefix(t *testing.T) {
	for _, file := range []string{"gemini_stream.sse", "gemini_tool_call.sse"} {
		raw, _ := os.ReadFile("testdata/" + file)
		whole, err := chunks(pull(bytes.NewReader(raw), 0))
		if err != nil {
			t.Fatal(err)
		}
		last := bytes.LastIndexByte(raw, '}') + 1
		for n := last; n < len(raw); n++ {
			got, err := chunks(pull(bytes.NewReader(raw[:n]), 0))
			if err != nil {
				t.Fatalf("%s[:%d] (%q at the end): %v", file, n, raw[last:n], err)
			}
			if diff := cmp.Diff(whole, got, cmpopts.IgnoreFields(chat.Chunk{}, "More")); diff != "" {
				t.Fatalf("%s[:%d] (%q at the end): chunks (-whole +got):\n%s", file, n, raw[last:n], diff)
			}
		}
		for n := range last {
			got, err := chunks(pull(bytes.NewReader(raw[:n]), 0))
			var ce *chat.Error
			if !errors.As(err, &ce) || ce.Category != chat.CategoryProtocol || !errors.Is(err, chat.ErrTruncated) {
				t.Fatalf("%s[:%d]: error = %v, want a truncation", file, n, err)
			}
			for _, ch := range got {
				if ch.FinishReason != "" || ch.Usage != nil {
					t.Fatalf("%s[:%d]: a broken stream reported %+v", file, n, ch)
				}
			}
		}
	}
}

func TestReadStreamMore(t *testing.T) {
	raw, _ := os.ReadFile("testdata/gemini_stream.sse")
	var more []bool
	for ch, err := range pull(bytes.NewReader(raw), 0) {
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, ch.More)
	}
	// Whole, every event but the last is followed by a buffered one; the
	// last event's text is followed by its finish chunk, which ends the
	// stream.
	if diff := cmp.Diff([]bool{true, true, true, false}, more); diff != "" {
		t.Errorf("More (-want +got):\n%s", diff)
	}
	more = more[:0]
	for ch, err := range pull(iotest.OneByteReader(bytes.NewReader(raw)), 0) {
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, ch.More)
	}
	if diff := cmp.Diff([]bool{false, false, true, false}, more); diff != "" {
		t.Errorf("More one byte at a time (-want +got):\n%s", diff)
	}
}

// The last event (every candidate finished, with the usage) ends the
// stream: a response kept open after it is not waited for.
func TestLastEventEndsStream(t *testing.T) {
	raw, _ := os.ReadFile("testdata/gemini_stream.sse")
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(raw)
	resp, err := chat.Collect(pull(pr, 0))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; c.Text != "The capital of Wyoming is **Cheyenne**.\n" || c.FinishReason != chat.FinishStop || resp.Usage.OutputTokens != 10 {
		t.Errorf("got %+v, usage %+v", c, resp.Usage)
	}
}

// With two candidates asked for, an event that finishes the only one
// named so far does not end the stream.
func TestLastEventWaitsForEveryCandidate(t *testing.T) {
	in := "data: {\"candidates\": [{\"index\": 0,\"content\": {\"parts\": [{\"text\": \"a\"}]},\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"promptTokenCount\": 3,\"candidatesTokenCount\": 1}}\n\n" +
		"data: {\"candidates\": [{\"index\": 1,\"content\": {\"parts\": [{\"text\": \"b\"}]},\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"promptTokenCount\": 3,\"candidatesTokenCount\": 2}}\n\n"
	sr := NewStreamReader(strings.NewReader(in), 0)
	sr.Candidates = 2
	resp, err := chat.Collect(chat.Pull(sr.Next))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 2 || resp.Choices[1].Text != "b" || resp.Usage.OutputTokens != 2 {
		t.Errorf("got %+v, usage %+v", resp.Choices, resp.Usage)
	}
}

func TestReadStreamErrors(t *testing.T) {
	ok := "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"hi\"}],\"role\": \"model\"}}]}\r\n\r\n"
	tests := []struct {
		name      string
		in        string
		cat       chat.Category
		retryable bool
		text      string // delivered before the error
	}{
		{"missing finish", ok, chat.CategoryProtocol, true, "hi"},
		{"one candidate of two unfinished", strings.Replace(ok, `"role": "model"}}`, `"role": "model"}},{"index": 1}`, 1) +
			"data: {\"candidates\": [{\"finishReason\": \"STOP\"}]}\r\n\r\n", chat.CategoryProtocol, true, "hi"},
		{"truncated json", ok + "data: {\"candidates\": [{\"content\"\r\n\r\n", chat.CategoryProtocol, true, "hi"},
		{"truncated mid event", ok + "data: {\"candidates\": [{\"finishReason\": \"STOP\"}]}\r\n", chat.CategoryProtocol, true, "hi"},
		{"finish then a broken event", ok + "data: {\"candidates\": [{\"finishReason\": \"STOP\"}]}\r\n\r\ndata: {\"usageMeta", chat.CategoryProtocol, true, "hi"},
		{"finish then malformed", ok + "data: {\"candidates\": [{\"finishReason\": \"STOP\"}]}\r\n\r\ndata: [DONE]\r\n\r\n", chat.CategoryProtocol, true, "hi"},
		{"invalid utf8", ok + "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\xff\xfe\"}]}}]}\r\n\r\n", chat.CategoryProtocol, true, "hi"},
		{"huge line", ok + "data: " + strings.Repeat("x", 10<<20) + "\r\n\r\n", chat.CategoryProtocol, true, "hi"},
		{"candidate index out of range", ok + "data: {\"candidates\": [{\"index\": 500}]}\r\n\r\n", chat.CategoryProtocol, true, "hi"},
		{"malformed function call", "data: {\"candidates\": [{\"finishReason\": \"MALFORMED_FUNCTION_CALL\",\"finishMessage\": \"Malformed function call: print(1\"}]}\r\n\r\n", chat.CategoryUpstreamUnavailable, true, ""},
		{"no candidates", "data: {\"usageMetadata\": {\"promptTokenCount\": 3}}\r\n\r\n", chat.CategoryProtocol, true, ""},
		{"empty body", "", chat.CategoryProtocol, true, ""},
		{"prompt blocked", "data: {\"promptFeedback\": {\"blockReason\": \"PROHIBITED_CONTENT\"},\"usageMetadata\": {\"promptTokenCount\": 8,\"totalTokenCount\": 8},\"modelVersion\": \"gemini-2.5-flash\"}\r\n\r\n", chat.CategoryContentFilter, false, ""},
		{"overloaded", ok + "data: {\"error\": {\"code\": 503,\"message\": \"The model is overloaded. Please try again later.\",\"status\": \"UNAVAILABLE\"}}\r\n\r\n", chat.CategoryOverloaded, true, "hi"},
		{"quota", "data: {\"error\": {\"code\": 429,\"message\": \"Resource has been exhausted (e.g. check quota).\",\"status\": \"RESOURCE_EXHAUSTED\"}}\r\n\r\n", chat.CategoryRateLimited, true, ""},
		{"internal", ok + "data: {\"error\": {\"code\": 500,\"message\": \"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting\",\"status\": \"INTERNAL\"}}\r\n\r\n", chat.CategoryUpstreamUnavailable, true, "hi"},
		{"invalid argument", "data: {\"error\": {\"code\": 400,\"message\": \"Request contains an invalid argument.\",\"status\": \"INVALID_ARGUMENT\"}}\r\n\r\n", chat.CategoryInvalidRequest, false, ""},
		{"permission denied", "data: {\"error\": {\"code\": 403,\"message\": \"Permission denied\",\"status\": \"PERMISSION_DENIED\"}}\r\n\r\n", chat.CategoryAuth, false, ""},
		{"unauthenticated", "data: {\"error\": {\"code\": 401,\"message\": \"Request had invalid authentication credentials.\",\"status\": \"UNAUTHENTICATED\"}}\r\n\r\n", chat.CategoryAuth, false, ""},
		{"not found", "data: {\"error\": {\"code\": 404,\"message\": \"models/x is not found\",\"status\": \"NOT_FOUND\"}}\r\n\r\n", chat.CategoryNotFound, false, ""},
		{"deadline", ok + "data: {\"error\": {\"code\": 504,\"message\": \"The request timed out. Please try again.\",\"status\": \"DEADLINE_EXCEEDED\"}}\r\n\r\n", chat.CategoryTimeout, true, "hi"},
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
	raw, _ := os.ReadFile("testdata/gemini_stream.sse")
	for stop := range 4 {
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
		body   string
		file   string
		want   *chat.Error
	}{
		{
			name: "not found", status: 404, file: "gemini_error_404.json",
			want: &chat.Error{Category: chat.CategoryNotFound, Status: 404, Message: "models/gemini-exp-1206 is not found for API version v1beta, or is not supported for generateContent. Call ModelService.ListModels to see the list of available models and their supported methods."},
		},
		{
			name: "quota with retry delay", status: 429, file: "gemini_error_429.json",
			want: &chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true, RetryAfter: 46 * time.Second,
				Message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."},
		},
		{
			name: "array form", status: 429, file: "gemini_error_429_array.json",
			want: &chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true,
				Message: "Resource exhausted. Please try again later. Please refer to https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details."},
		},
		{
			name: "invalid key", status: 400,
			body: `{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]}}`,
			want: &chat.Error{Category: chat.CategoryAuth, Status: 400, Message: "API key not valid. Please pass a valid API key."},
		},
		{
			name: "context too long", status: 400,
			body: `{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}`,
			want: &chat.Error{Category: chat.CategoryContextLength, Status: 400, Message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."},
		},
		{
			name: "location not supported", status: 400,
			body: `{"error": {"code": 400, "message": "User location is not supported for the API use.", "status": "FAILED_PRECONDITION"}}`,
			want: &chat.Error{Category: chat.CategoryInvalidRequest, Status: 400, Message: "User location is not supported for the API use."},
		},
		{
			name: "overloaded", status: 503,
			body: `{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}`,
			want: &chat.Error{Category: chat.CategoryOverloaded, Status: 503, Retryable: true, Message: "The model is overloaded. Please try again later."},
		},
		{
			name: "not json", status: 502, body: "<html>Bad Gateway</html>",
			want: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 502, Retryable: true, Message: "<html>Bad Gateway</html>"},
		},
		{
			name: "empty", status: 500,
			want: &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: 500, Retryable: true, Message: "upstream answered 500"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			if tt.file != "" {
				var err error
				if body, err = os.ReadFile("testdata/" + tt.file); err != nil {
					t.Fatal(err)
				}
			}
			got := DecodeError(tt.status, body)
			if diff := cmp.Diff(tt.want, got); diff != "" {
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
	f.Add([]byte("data: {\"candidates\": [{\"index\": -1}]}\n\n"))
	f.Add([]byte("data: {\"error\": {\"code\": 429, \"status\": \"RESOURCE_EXHAUSTED\"}}\n\n"))
	f.Add([]byte("data: {\"promptFeedback\": {\"blockReason\": \"SAFETY\"}}\n\n"))
	for _, file := range endingFiles {
		b, _ := os.ReadFile("testdata/" + file)
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
			if ch.Choice < 0 || ch.Choice >= chat.MaxChoices {
				t.Fatalf("choice %d out of range", ch.Choice)
			}
			if ch.FinishReason != "" {
				if finished[ch.Choice] {
					t.Fatalf("choice %d finished twice", ch.Choice)
				}
				finished[ch.Choice] = true
			}
			c.Add(ch)
		}
		// A stream that ended without an error finished every choice.
		for _, ch := range c.Response().Choices {
			if ch.FinishReason == "" && (ch.Text != "" || len(ch.ToolCalls) > 0) {
				t.Fatalf("choice %d ended without a finish reason", ch.Index)
			}
		}
	})
}

var responseSeeds = []string{
	`{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4},"modelVersion":"gemini-2.5-flash"}`,
	`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":[1,{"b":2}]}}}]},"finishReason":"STOP"}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]},"content":{"role":"model"}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]},"content":null,"content":{"role":"x"}}],"candidates":[{"index":1}]}`,
	`{"candidates":[{"CONTENT":{"Parts":[{"Text":"a","thought":true}]}}],"promptFeedback":{"blockReason":"SAFETY"}}`,
	`{"candidates":[{"content":{"parts":[{"text":"t","thought":true,"thoughtSignature":"s"},{"functionCall":{"name":"f"},"ThoughtSignature":"x","thought_signature":"y"}]}}]}`,
	`{"candidates":[{"content":5}]}`,
	`{"candidates":[{"content":{"parts":"x"}}]}`,
	`{"candidates":null,"error":{"code":500,"message":"boom","status":"INTERNAL"}}`,
	`{"candidates":[]}`,
	`{"candidates":[{"content":{"parts":[{"text":"\u00e9\ud83d\ude00"}]}}]`,
	// A type error inside a value a repeated member replaces is still an
	// error (found by review).
	`{"candidates":[{"content":{"parts":5},"content":null}]}`,
	`{"candidates":[{"content":{"parts":[{"text":1}]},"content":null}]}`,
	`{"candidates":[{"content":{"parts":5}}],"candidates":null}`,
	`{"candidates":[{"content":{"parts":5}}],"candidates":[]}`,
	`{"candidates":[{},{"content":5}],"candidates":[{}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}],"Parts":[{"text":1}]}}]}`,
}

// TestDecodeResponseMatchesEncodingJSON and FuzzDecodeResponse: the
// two-step decoder decodes every event exactly as json.Unmarshal does.
func TestDecodeResponseMatchesEncodingJSON(t *testing.T) {
	for _, s := range responseSeeds {
		compareResponseDecoders(t, []byte(s))
	}
}

func FuzzDecodeResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		compareResponseDecoders(t, b)
	})
}

func compareResponseDecoders(t *testing.T, b []byte) {
	t.Helper()
	var std, got Response
	serr := json.Unmarshal(b, &std)
	gerr := decodeResponse(b, &got)
	if (serr == nil) != (gerr == nil) {
		t.Fatalf("%s: decodeResponse error %v, encoding/json error %v", b, gerr, serr)
	}
	if serr != nil {
		return
	}
	if d := cmp.Diff(std, got); d != "" {
		t.Fatalf("%s: decoders differ (-encoding/json +decodeResponse):\n%s", b, d)
	}
}
