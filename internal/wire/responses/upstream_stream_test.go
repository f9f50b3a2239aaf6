package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Sources of the streams in testdata: testdata/SOURCES.md.

// upstreamFiles are the streams read in golden tests: recorded, then
// constructed, then the client-facing encoder's own output (the gateway
// in front of another firstword).
var upstreamFiles = []string{
	"upstream_phase_text.sse",
	"upstream_reasoning_tool_call.sse",
	"upstream_error_quota.sse",
	"upstream_failed_rate_limit.sse",
	"constructed_reasoning_incomplete.sse",
	"constructed_text_parallel_tools.sse",
	"constructed_refusal_content_filter.sse",
	"text_and_tools.sse",
}

// splits feeds raw whole, one byte at a time, at random splits, and cut
// in two at every byte.
func splits(raw []byte) map[string]func() io.Reader {
	m := map[string]func() io.Reader{
		"whole":   func() io.Reader { return bytes.NewReader(raw) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(raw)) },
		"random":  func() io.Reader { return &splitReader{b: raw, rng: rand.New(rand.NewPCG(1, 2))} },
	}
	return m
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

// cuts are where TestReadUpstreamStreamGolden cuts raw in two: at every
// byte of a small stream; in a large one (whose every cut, decoded whole
// each time, would take a minute under the race detector) at every byte
// next to a line's end, where framing is decided, and at 64 more places
// spread over the rest. The one-byte reader has every byte end a read
// anyway.
func cuts(raw []byte) []int {
	var out []int
	stride := max(len(raw)/64, 1)
	for n := 1; n < len(raw); n++ {
		near := false
		for _, c := range raw[max(n-2, 0):min(n+2, len(raw))] {
			near = near || c == '\n' || c == '\r'
		}
		if len(raw) <= 4<<10 || near || n%stride == 0 {
			out = append(out, n)
		}
	}
	return out
}

// twoReads returns raw in two reads, cut at n.
func twoReads(raw []byte, n int) io.Reader {
	return io.MultiReader(bytes.NewReader(raw[:n]), bytes.NewReader(raw[n:]))
}

// pullUpstream reads r as the router does: an UpstreamStreamReader's
// Next, through chat.Pull when a chat.Stream is wanted.
func pullUpstream(r io.Reader, maxEventSize int) chat.Stream {
	return chat.Pull(NewUpstreamStreamReader(r, maxEventSize).Next)
}

// drain reads a stream to its end; More depends on how the bytes were
// split, so it is cleared (TestReadUpstreamStreamMore checks it).
func drain(s chat.Stream) ([]chat.Chunk, error) {
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

// goldenChunk is a chunk as the golden files show it.
type goldenChunk struct {
	Model        string            `json:"model,omitempty"`
	Text         string            `json:"text,omitempty"`
	Refusal      string            `json:"refusal,omitempty"`
	Thinking     string            `json:"thinking,omitempty"`
	Thought      *chat.Thought     `json:"thought,omitempty"`
	ToolCalls    []goldenCall      `json:"tool_calls,omitempty"`
	FinishReason chat.FinishReason `json:"finish_reason,omitempty"`
	Usage        *chat.Usage       `json:"usage,omitempty"`
	Error        *goldenError      `json:"error,omitempty"`
}

type goldenCall struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

type goldenError struct {
	Category  chat.Category `json:"category"`
	Message   string        `json:"message"`
	Retryable bool          `json:"retryable,omitempty"`
}

// render is a decoded stream as a golden file: a chunk a line, then the
// error that ended it, if one did.
func render(t *testing.T, chunks []chat.Chunk, err error) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, c := range chunks {
		if c.Choice != 0 {
			t.Fatalf("chunk of choice %d", c.Choice)
		}
		g := goldenChunk{Model: c.Model, Text: c.Text, Refusal: c.Refusal, Thinking: c.Thinking, Thought: c.Thought, FinishReason: c.FinishReason, Usage: c.Usage}
		for _, d := range c.ToolCalls {
			g.ToolCalls = append(g.ToolCalls, goldenCall(d))
		}
		enc.Encode(g)
	}
	if err != nil {
		var ce *chat.Error
		if !errors.As(err, &ce) {
			t.Fatalf("error %v is not a *chat.Error", err)
		}
		enc.Encode(goldenChunk{Error: &goldenError{Category: ce.Category, Message: ce.Message, Retryable: ce.Retryable}})
	}
	return b.Bytes()
}

// goldenFile compares got with testdata/name, or rewrites the file with
// -update.
func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestReadUpstreamStreamGolden decodes each stream, fed whole, a byte at
// a time and at random splits, into its golden file
// (testdata/NAME.chunks), and checks that cutting it in two at any byte
// changes nothing.
func TestReadUpstreamStreamGolden(t *testing.T) {
	for _, file := range upstreamFiles {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + file)
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := drain(pullUpstream(bytes.NewReader(raw), 0))
			golden := render(t, want, wantErr)
			goldenFile(t, strings.TrimSuffix(file, ".sse")+".chunks", golden)
			check := func(how string, r io.Reader) {
				got, err := drain(pullUpstream(r, 0))
				if g := render(t, got, err); !bytes.Equal(g, golden) {
					t.Fatalf("%s: decoded differently:\n%s\nwant:\n%s", how, g, golden)
				}
			}
			for name, mk := range splits(raw) {
				check(name, mk())
			}
			for _, n := range cuts(raw) {
				check("cut at "+strconv.Itoa(n), twoReads(raw, n))
			}
		})
	}
}

// The normalised answers of the recorded streams, checked apart from the
// golden files so that a rewrite with -update cannot bless a regression.
func TestReadUpstreamStreamAnswers(t *testing.T) {
	tests := []struct {
		file string
		want *chat.Response
		err  chat.Category
	}{
		{
			// Two message items (a commentary, then the final answer):
			// their deltas (abridged in the fixture), a paragraph apart.
			file: "upstream_phase_text.sse",
			want: &chat.Response{Model: "gpt-5.3-codex", Choices: []chat.Choice{{Text: "Got it\n\nHere are a few **AI", FinishReason: chat.FinishStop}},
				Usage: &chat.Usage{InputTokens: 7112, OutputTokens: 463, CachedInputTokens: 3072, ReasoningTokens: 64}},
		},
		{
			// A reasoning summary (skipped), then a function call.
			file: "upstream_reasoning_tool_call.sse",
			want: &chat.Response{Model: "gpt-5.1-codex-max", Choices: []chat.Choice{{FinishReason: chat.FinishToolCalls,
				ToolCalls: []chat.ToolCall{{ID: "call_AB6AaRZ1FYZB2RwS6A5vbdqn", Name: "calculator", Arguments: `{"a":12,"b":7,"op":"add"}`}}}},
				Usage: &chat.Usage{InputTokens: 134, OutputTokens: 28}},
		},
		{
			file: "constructed_reasoning_incomplete.sse",
			want: &chat.Response{Model: "gpt-5-mini-2025-08-07", Choices: []chat.Choice{{
				Text:         "Grüße aus 東京 🗼 — the \"quick\" answer is: Tokyo's population is about 14\u00a0million, and",
				FinishReason: chat.FinishLength}},
				Usage: &chat.Usage{InputTokens: 2213, OutputTokens: 64, CachedInputTokens: 2048, ReasoningTokens: 38}},
		},
		{
			file: "constructed_text_parallel_tools.sse",
			want: &chat.Response{Model: "gpt-5-mini-2025-08-07", Choices: []chat.Choice{{Text: "Checking both cities.", FinishReason: chat.FinishToolCalls,
				ToolCalls: []chat.ToolCall{
					{ID: "call_Wm3xR8pQ2vL5nT7kY1sJ4hD9", Name: "get_weather", Arguments: `{"city":"Zürich"}`},
					{ID: "call_Hb6fN2qZ8tC4mV0xA7rK3eL5", Name: "get_weather", Arguments: `{"city":"São Paulo"}`},
				}}},
				Usage: &chat.Usage{InputTokens: 91, OutputTokens: 58}},
		},
		{
			file: "constructed_refusal_content_filter.sse",
			want: &chat.Response{Model: "gpt-4o-2024-08-06", Choices: []chat.Choice{{Refusal: "I'm sorry, I can't help with that.", FinishReason: chat.FinishContentFilter}},
				Usage: &chat.Usage{InputTokens: 25, OutputTokens: 10}},
		},
		{file: "upstream_error_quota.sse", want: &chat.Response{Model: "gpt-5-nano-2025-08-07"}, err: chat.CategoryRateLimited},
		{file: "upstream_failed_rate_limit.sse", want: &chat.Response{Model: "gpt-4o-mini"}, err: chat.CategoryRateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := chat.Collect(pullUpstream(bytes.NewReader(raw), 0))
			if tt.err != "" {
				if ce := chat.AsError(err); err == nil || ce.Category != tt.err {
					t.Errorf("error = %v, want %s", err, tt.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			// The thinking is TestReadUpstreamThinkingRecorded's.
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(chat.Choice{}, "Thinking")); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadUpstreamThinkingRecorded: the reasoning summaries of the
// recorded (and constructed) streams are read whole, as thinking and not
// text, and a reasoning item's encrypted_content (the .done event's,
// which differs from the .added one's) signs its block with the item's
// id. What the thinking must be is read from the stream's own
// reasoning_summary_text.done and output_item.done events.
func TestReadUpstreamThinkingRecorded(t *testing.T) {
	for _, file := range []string{"upstream_reasoning_tool_call.sse", "constructed_reasoning_incomplete.sse"} {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + file)
			if err != nil {
				t.Fatal(err)
			}
			var want chat.ThinkingBlock
			for _, line := range strings.Split(string(raw), "\n") {
				d, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				var e struct {
					Type string `json:"type"`
					Text string `json:"text"`
					Item struct {
						Type, ID         string
						EncryptedContent string `json:"encrypted_content"`
					} `json:"item"`
				}
				if err := json.Unmarshal([]byte(d), &e); err != nil {
					t.Fatal(err)
				}
				switch {
				case e.Type == "response.reasoning_summary_text.done":
					want.Text = e.Text
				case e.Type == "response.output_item.done" && e.Item.Type == "reasoning" && e.Item.EncryptedContent != "":
					want.Signature, want.Format, want.ID = e.Item.EncryptedContent, chat.ThinkingResponses, e.Item.ID
				}
			}
			if want.Text == "" {
				t.Fatal("the stream has no reasoning summary")
			}
			for name, mk := range splits(raw) {
				got, _ := chat.Collect(pullUpstream(mk(), 0))
				if len(got.Choices) != 1 {
					t.Fatalf("%s: %d choices", name, len(got.Choices))
				}
				ch := got.Choices[0]
				if diff := cmp.Diff([]chat.ThinkingBlock{want}, ch.Thinking); diff != "" {
					t.Errorf("%s: thinking (-want +got):\n%s", name, diff)
				}
				if strings.Contains(ch.Text, "**") {
					t.Errorf("%s: thinking in the text: %q", name, ch.Text)
				}
			}
		})
	}
}

// The client-facing encoder's stream, read back, is the answer it
// encoded.
func TestUpstreamRoundTrip(t *testing.T) {
	chunks := []chat.Chunk{
		{Text: "Grüße, "},
		{Text: "世界 🌍 \"quoted\" <b>"},
		{Refusal: "no."},
		{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "call_a", Name: "weather"}}},
		{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: `{"city":`}, {Index: 1, ID: "call_b", Name: "time", Arguments: `{}`}}},
		{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: `"Oslo"}`}}},
	}
	usage := &chat.Usage{InputTokens: 10, OutputTokens: 20, CachedInputTokens: 4, ReasoningTokens: 3}
	for _, reason := range []chat.FinishReason{chat.FinishToolCalls, chat.FinishLength, chat.FinishContentFilter} {
		e := &EventEncoder{ID: "resp_1", Model: "gpt-x", CreatedAt: 1}
		var b []byte
		var want chat.Collector
		want.Add(chat.Chunk{Model: "gpt-x"})
		for _, c := range chunks {
			b = e.Chunk(b, &c)
			want.Add(c)
		}
		b = e.Finish(b, reason, usage)
		want.Add(chat.Chunk{FinishReason: reason, Usage: usage})
		got, err := chat.Collect(pullUpstream(bytes.NewReader(b), 0))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Response(), got); diff != "" {
			t.Errorf("%s: read back (-encoded +read):\n%s", reason, diff)
		}
	}
}

// ev is one upstream event, as OpenAI frames it.
func ev(data string) string {
	var t struct {
		Type string `json:"type"`
	}
	json.Unmarshal([]byte(data), &t)
	return "event: " + t.Type + "\ndata: " + data + "\n\n"
}

const (
	evCreated  = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-x","output":[],"usage":null}}`
	evMsgAdded = `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`
	evHi       = `{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"hi","logprobs":[]}`
	evDone     = `{"type":"response.completed","sequence_number":3,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-x","output":[],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":6}}}`
)

// Hand-written streams for what the recordings do not show.
var upstreamRows = []struct {
	name string
	in   string
	want []chat.Chunk
}{
	{
		name: "data only, no event lines, CRLF framing",
		in:   strings.ReplaceAll("data: "+evCreated+"\n\ndata: "+evMsgAdded+"\n\ndata: "+evHi+"\n\ndata: "+evDone+"\n\n", "\n", "\r\n"),
		want: []chat.Chunk{{Model: "gpt-x"}, {Text: "hi"}, {FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}}},
	},
	{
		name: "no created event: the model comes with the first chunk",
		in:   ev(evMsgAdded) + ev(evHi) + ev(evDone),
		want: []chat.Chunk{{Text: "hi"}, {Model: "gpt-x", FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}}},
	},
	{
		name: "a text delta for an item never added is still text",
		in:   ev(evCreated) + ev(`{"type":"response.output_text.delta","output_index":3,"delta":"x"}`) + ev(evDone),
		want: []chat.Chunk{{Model: "gpt-x"}, {Text: "x"}, {FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}}},
	},
	{
		name: "arguments only in function_call_arguments.done",
		in: ev(evCreated) +
			ev(`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"f"}}`) +
			ev(`{"type":"response.function_call_arguments.done","output_index":0,"item_id":"fc_1","arguments":"{\"a\":1}"}`) +
			ev(`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_1","name":"f"}}`) +
			ev(`{"type":"response.completed","response":{"status":"completed","usage":null}}`),
		want: []chat.Chunk{{Model: "gpt-x"}, {ToolCalls: []chat.ToolCallDelta{{ID: "call_1", Name: "f"}}},
			{ToolCalls: []chat.ToolCallDelta{{Arguments: `{"a":1}`}}}, {FinishReason: chat.FinishToolCalls}},
	},
	{
		name: "arguments only in output_item.done; a call with none gets {}",
		in: ev(`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"call_1","name":"f"}}`) +
			ev(`{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","call_id":"call_1","name":"f","arguments":"{\"b\":2}"}}`) +
			ev(`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_2","name":"g"}}`) +
			ev(`{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","call_id":"call_2","name":"g"}}`) +
			ev(`{"type":"response.completed","response":{"model":"m"}}`),
		want: []chat.Chunk{{ToolCalls: []chat.ToolCallDelta{{ID: "call_1", Name: "f"}}}, {ToolCalls: []chat.ToolCallDelta{{Arguments: `{"b":2}`}}},
			{ToolCalls: []chat.ToolCallDelta{{Index: 1, ID: "call_2", Name: "g"}}}, {ToolCalls: []chat.ToolCallDelta{{Index: 1, Arguments: "{}"}}},
			{Model: "m", FinishReason: chat.FinishToolCalls}},
	},
	{
		name: "a call only in output_item.done, arguments whole",
		in: ev(`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_9","type":"function_call","name":"f","arguments":"{}"}}`) +
			ev(`{"type":"response.completed","response":{}}`),
		want: []chat.Chunk{{ToolCalls: []chat.ToolCallDelta{{ID: "fc_9", Name: "f", Arguments: "{}"}}}, {FinishReason: chat.FinishToolCalls}},
	},
	{
		name: "a call cut before its arguments gets {} with the finish",
		in: ev(`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"call_1","name":"f","arguments":""}}`) +
			ev(`{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":3,"output_tokens":16,"output_tokens_details":{"reasoning_tokens":16}}}}`),
		want: []chat.Chunk{{ToolCalls: []chat.ToolCallDelta{{ID: "call_1", Name: "f"}}},
			{ToolCalls: []chat.ToolCallDelta{{Arguments: "{}"}}, FinishReason: chat.FinishLength, Usage: &chat.Usage{InputTokens: 3, OutputTokens: 16, ReasoningTokens: 16}}},
	},
	{
		name: "incomplete without details is a length cut; other reasons pass through",
		in:   ev(evHi) + ev(`{"type":"response.incomplete","response":{"incomplete_details":null}}`),
		want: []chat.Chunk{{Text: "hi"}, {FinishReason: chat.FinishLength}},
	},
	{
		name: "an unknown incomplete reason passes through",
		in:   ev(evHi) + ev(`{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_messages"}}}`),
		want: []chat.Chunk{{Text: "hi"}, {FinishReason: "max_messages"}},
	},
	{
		name: "cache writes",
		in:   ev(evHi) + ev(`{"type":"response.completed","response":{"usage":{"input_tokens":45,"input_tokens_details":{"cache_write_tokens":40,"cached_tokens":0},"output_tokens":25,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":70}}}`),
		want: []chat.Chunk{{Text: "hi"}, {FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 45, OutputTokens: 25, CacheWriteTokens: 40}}},
	},
	{
		name: "comments, unknown events, keep-alives and empty events are skipped",
		in: "\xEF\xBB\xBF: hello\n\ndata:\n\n" + ev(evCreated) + "event: keepalive\ndata: {\"type\":\"keepalive\",\"sequence_number\":1}\n\n" +
			ev(`{"type":"response.web_search_call.searching","output_index":0,"item_id":"ws_1"}`) +
			ev(`{"type":"response.output_text.annotation.added","output_index":0,"annotation":{"type":"url_citation","url":"https://example.com"}}`) +
			ev(`{"type":"response.reasoning_text.delta","output_index":0,"delta":"hmm"}`) + ev(evHi) + ev(evDone),
		want: []chat.Chunk{{Model: "gpt-x"}, {Thinking: "hmm"}, {Text: "hi"}, {FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}}},
	},
	{
		// Written from the documented event types (synthetic): two
		// reasoning items, the first with two summary parts (a paragraph
		// apart), each ended by its encrypted_content; the second has
		// raw reasoning text instead of a summary; part boundaries and
		// .done events carry nothing new.
		name: "synthetic: summaries, raw reasoning and encrypted content",
		in: ev(evCreated) +
			ev(`{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`) +
			ev(`{"type":"response.reasoning_summary_part.added","output_index":0,"item_id":"rs_1","summary_index":0,"part":{"type":"summary_text","text":""}}`) +
			ev(`{"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_1","summary_index":0,"delta":"**Plan**\n\nFirst"}`) +
			ev(`{"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_1","summary_index":0,"delta":" step."}`) +
			ev(`{"type":"response.reasoning_summary_text.done","output_index":0,"item_id":"rs_1","summary_index":0,"text":"**Plan**\n\nFirst step."}`) +
			ev(`{"type":"response.reasoning_summary_text.delta","output_index":0,"item_id":"rs_1","summary_index":1,"delta":"Then \"done\" ✓"}`) +
			ev(`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"gAAA+/=1","summary":[{"type":"summary_text","text":"**Plan**\n\nFirst step."},{"type":"summary_text","text":"Then \"done\" ✓"}]}}`) +
			ev(`{"type":"response.output_item.added","output_index":1,"item":{"id":"rs_2","type":"reasoning"}}`) +
			ev(`{"type":"response.reasoning_text.delta","output_index":1,"item_id":"rs_2","content_index":0,"delta":"raw"}`) +
			ev(`{"type":"response.output_item.done","output_index":1,"item":{"id":"rs_2","type":"reasoning","encrypted_content":"gBBB"}}`) +
			ev(`{"type":"response.output_item.added","output_index":2,"item":{"id":"msg_1","type":"message","content":[],"role":"assistant"}}`) +
			ev(`{"type":"response.output_text.delta","output_index":2,"delta":"hi"}`) + ev(evDone),
		want: []chat.Chunk{{Model: "gpt-x"}, {Thinking: "**Plan**\n\nFirst"}, {Thinking: " step."}, {Thinking: "\n\nThen \"done\" ✓"},
			{Thought: &chat.Thought{Signature: "gAAA+/=1", Format: chat.ThinkingResponses, ID: "rs_1"}},
			{Thinking: "raw"}, {Thought: &chat.Thought{Signature: "gBBB", Format: chat.ThinkingResponses, ID: "rs_2"}},
			{Text: "hi"}, {FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}}},
	},
	{
		// A reasoning item that comes whole (no deltas), and one without
		// encrypted_content (the request did not include it): its
		// summary is the thinking, and no signature follows.
		name: "synthetic: a reasoning item whole, one without encrypted content",
		in: ev(`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"enc","summary":[{"type":"summary_text","text":"a"},{"type":"summary_text","text":"b"}]}}`) +
			ev(`{"type":"response.output_item.added","output_index":1,"item":{"id":"rs_2","type":"reasoning","summary":[]}}`) +
			ev(`{"type":"response.output_item.done","output_index":1,"item":{"id":"rs_2","type":"reasoning","summary":[]}}`) +
			ev(evHi) + ev(evDone),
		want: []chat.Chunk{{Thinking: "a\n\nb", Thought: &chat.Thought{Signature: "enc", Format: chat.ThinkingResponses, ID: "rs_1"}},
			{Text: "hi"}, {Model: "gpt-x", FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}}},
	},
	{
		name: "the terminal event ends the stream: what follows is not read",
		in:   ev(evHi) + ev(evDone) + "data: [DONE]\n\ndata: {broken",
		want: []chat.Chunk{{Text: "hi"}, {Model: "gpt-x", FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}}},
	},
	{
		name: "the event's type wins over the SSE event name",
		in:   "event: message\ndata: " + evHi + "\n\n" + ev(evDone),
		want: []chat.Chunk{{Text: "hi"}, {Model: "gpt-x", FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 1}}},
	},
}

func TestReadUpstreamStreamRows(t *testing.T) {
	for _, tt := range upstreamRows {
		t.Run(tt.name, func(t *testing.T) {
			for name, mk := range splits([]byte(tt.in)) {
				got, err := drain(pullUpstream(mk(), 0))
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

func TestReadUpstreamStreamErrors(t *testing.T) {
	hi := ev(evCreated) + ev(evMsgAdded) + ev(evHi)
	tests := []struct {
		name      string
		in        string
		cat       chat.Category
		retryable bool
		msg       string // the error's message, when it matters
		text      string // delivered before the error
	}{
		{"ends before a terminal event", hi, chat.CategoryProtocol, true, "", "hi"},
		{"empty body", "", chat.CategoryProtocol, true, "", ""},
		{"[DONE] before a terminal event", hi + "data: [DONE]\n\n", chat.CategoryProtocol, true, "", "hi"},
		{"cut inside the terminal event", hi + "event: response.completed\ndata: " + evDone + "\n", chat.CategoryProtocol, true, "", "hi"},
		{"truncated json", hi + "data: {\"type\":\"response.output_text.delta\",\"delta\":\"x\n\n", chat.CategoryProtocol, true, "", "hi"},
		{"not an object", hi + "data: [1,2]\n\n", chat.CategoryProtocol, true, "", "hi"},
		{"wrong type", hi + ev(`{"type":"response.output_text.delta","delta":5}`), chat.CategoryProtocol, true, "", "hi"},
		{"invalid utf8", hi + "data: {\"type\":\"response.output_text.delta\",\"delta\":\"\xff\xfe\"}\n\n", chat.CategoryProtocol, true, "", "hi"},
		{"huge event", hi + "data: " + strings.Repeat("x", 2<<20) + "\n\n", chat.CategoryProtocol, true, "", "hi"},
		{"arguments for an item never added", hi + ev(`{"type":"response.function_call_arguments.delta","output_index":7,"delta":"{"}`), chat.CategoryProtocol, true, "", "hi"},
		{"arguments for a message", hi + ev(`{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{"}`), chat.CategoryProtocol, true, "", "hi"},
		{"arguments without an output_index", hi + ev(`{"type":"response.function_call_arguments.delta","delta":"{"}`), chat.CategoryProtocol, true, "", "hi"},
		{"an item added twice", hi + ev(evMsgAdded), chat.CategoryProtocol, true, "", "hi"},
		{"an item finished twice", ev(`{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning"}}`) + ev(`{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning"}}`), chat.CategoryProtocol, true, "", ""},
		{"output_index out of range", ev(`{"type":"response.output_item.added","output_index":4096,"item":{"type":"message"}}`), chat.CategoryProtocol, true, "", ""},
		{"negative output_index", ev(`{"type":"response.output_item.added","output_index":-1,"item":{"type":"message"}}`), chat.CategoryProtocol, true, "", ""},
		{"an item that is not an object", ev(`{"type":"response.output_item.added","output_index":0,"item":"message"}`), chat.CategoryProtocol, true, "", ""},
		{"malformed usage", hi + ev(`{"type":"response.completed","response":{"usage":{"input_tokens":"many"}}}`), chat.CategoryProtocol, true, "", "hi"},
		{
			// The error event as OpenAI sends it (recorded: see
			// upstream_error_quota.sse), with a null code.
			"error event, server error, null code",
			hi + ev(`{"type":"error","error":{"type":"server_error","code":null,"message":"An error occurred while processing the request.","param":null},"sequence_number":120}`),
			chat.CategoryUpstreamUnavailable, true, "An error occurred while processing the request.", "hi",
		},
		{
			// The error event as the SDKs' types describe it.
			"error event, flat, rate limit",
			hi + ev(`{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached for gpt-x in organization org-1 on tokens per min (TPM): Limit 30000, Used 30000, Requested 500. Please try again in 1s.","param":null,"sequence_number":3}`),
			chat.CategoryRateLimited, true, "", "hi",
		},
		{"error event, context length", ev(`{"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":"input"}}`), chat.CategoryContextLength, false, "", ""},
		{"error event, bad key", ev(`{"type":"error","error":{"type":"invalid_request_error","code":"invalid_api_key","message":"Incorrect API key provided."}}`), chat.CategoryAuth, false, "", ""},
		{"error event, overloaded", hi + ev(`{"type":"error","error":{"type":"server_error","code":"server_is_overloaded","message":"The server is overloaded."}}`), chat.CategoryOverloaded, true, "", "hi"},
		{"error event, invalid request", ev(`{"type":"error","error":{"type":"invalid_request_error","code":"integer_below_min_value","message":"Invalid 'max_output_tokens': integer below minimum value.","param":"max_output_tokens"}}`), chat.CategoryInvalidRequest, false, "", ""},
		{"error event, numeric code", ev(`{"type":"error","error":{"code":500,"message":"boom"}}`), chat.CategoryUpstreamUnavailable, true, "boom", ""},
		{"error event without a message", hi + "event: error\ndata: {\"sequence_number\":4}\n\n", chat.CategoryUpstreamUnavailable, true, `upstream error event: {"sequence_number":4}`, "hi"},
		{"error event with only a code", ev(`{"type":"error","code":"server_error"}`), chat.CategoryUpstreamUnavailable, true, "upstream error: server_error", ""},
		{"failed, flagged prompt", ev(`{"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_prompt","message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy."}}}`), chat.CategoryContentFilter, false, "", ""},
		{"failed, server error", hi + ev(`{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."}}}`), chat.CategoryUpstreamUnavailable, true, "The model failed to generate a response.", "hi"},
		{"failed, image", ev(`{"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_image_url","message":"Timeout while downloading https://example.com/a.png."}}}`), chat.CategoryInvalidRequest, false, "", ""},
		{"failed, vector store timeout", ev(`{"type":"response.failed","response":{"status":"failed","error":{"code":"vector_store_timeout","message":"Vector store timed out."}}}`), chat.CategoryTimeout, true, "", ""},
		{"failed, no error", hi + ev(`{"type":"response.failed","response":{"status":"failed","error":null}}`), chat.CategoryUpstreamUnavailable, true, "", "hi"},
		{"failed, malformed", ev(`{"type":"response.failed","response":{"error":{"code":{}}}}`), chat.CategoryUpstreamUnavailable, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, mk := range splits([]byte(tt.in)) {
				resp, err := chat.Collect(pullUpstream(mk(), 1<<20))
				var ce *chat.Error
				if !errors.As(err, &ce) {
					t.Fatalf("%s: error = %v, want *chat.Error", name, err)
				}
				if ce.Category != tt.cat || ce.Retryable != tt.retryable {
					t.Errorf("%s: error = %s retryable=%v, want %s retryable=%v (%v)", name, ce.Category, ce.Retryable, tt.cat, tt.retryable, err)
				}
				if tt.msg != "" && ce.Message != tt.msg {
					t.Errorf("%s: message = %q, want %q", name, ce.Message, tt.msg)
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

// Every proper prefix of a stream that finished is a broken stream: it
// ends in a truncation, and reports no finish reason and no usage.
func TestReadUpstreamStreamEveryPrefix(t *testing.T) {
	for _, file := range []string{"constructed_refusal_content_filter.sse", "text_and_tools.sse"} {
		raw, err := os.ReadFile("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(raw) - 1 {
			got, err := drain(pullUpstream(bytes.NewReader(raw[:n]), 0))
			if !errors.Is(err, chat.ErrTruncated) || chat.AsError(err).Category != chat.CategoryProtocol {
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

func TestReadUpstreamStreamMore(t *testing.T) {
	// Short events, so that the whole stream fits the SSE reader's first
	// read.
	in := ev(`{"type":"response.created","response":{"model":"m"}}`) +
		ev(`{"type":"response.output_item.added","output_index":0,"item":{"type":"message"}}`) +
		ev(`{"type":"response.output_text.delta","output_index":0,"delta":"hi"}`) +
		ev(`{"type":"response.output_text.delta","output_index":0,"delta":" there"}`) +
		ev(`{"type":"response.output_text.done","output_index":0,"text":"hi there"}`) +
		ev(`{"type":"response.completed","response":{}}`)
	more := func(r io.Reader) []bool {
		var m []bool
		for ch, err := range pullUpstream(r, 0) {
			if err != nil {
				t.Fatal(err)
			}
			m = append(m, ch.More)
		}
		return m
	}
	// Whole, every chunk is followed by one already read, and the last
	// by the end; the .done between the deltas and the end yields none
	// and does not break the chain.
	if diff := cmp.Diff([]bool{true, true, true, true}, more(strings.NewReader(in))); diff != "" {
		t.Errorf("More (-want +got):\n%s", diff)
	}
	// A byte at a time, nothing is buffered: no chunk waits for another,
	// but the last, made by the ending event itself.
	if diff := cmp.Diff([]bool{false, false, false, true}, more(iotest.OneByteReader(strings.NewReader(in)))); diff != "" {
		t.Errorf("More one byte at a time (-want +got):\n%s", diff)
	}
}

// The terminal event ends the stream: a response kept open after it is
// not waited for.
func TestUpstreamTerminalEventEndsStream(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go io.WriteString(pw, ev(evCreated)+ev(evMsgAdded)+ev(evHi)+ev(evDone))
	done := make(chan error, 1)
	go func() {
		_, err := chat.Collect(pullUpstream(pr, 0))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader waited for the body's end after response.completed")
	}
}

func TestReadUpstreamStreamBreak(t *testing.T) {
	raw, err := os.ReadFile("testdata/constructed_text_parallel_tools.sse")
	if err != nil {
		t.Fatal(err)
	}
	all, _ := drain(pullUpstream(bytes.NewReader(raw), 0))
	for stop := range len(all) {
		n := 0
		for _, err := range pullUpstream(bytes.NewReader(raw), 0) {
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

func FuzzReadUpstreamStream(f *testing.F) {
	for _, file := range upstreamFiles {
		b, err := os.ReadFile("testdata/" + file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, r := range upstreamRows {
		f.Add([]byte(r.in))
	}
	f.Add([]byte(ev(`{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","call_id":"c","name":"f"}}`) +
		ev(`{"type":"response.function_call_arguments.delta","output_index":2,"delta":"{"}`) + ev(`{"type":"response.completed"}`)))
	f.Add([]byte(ev(`{"type":"error","error":{"code":"rate_limit_exceeded","message":"slow"}}`)))
	f.Fuzz(func(t *testing.T, in []byte) {
		var c chat.Collector
		for ch, err := range pullUpstream(bytes.NewReader(in), 1<<16) {
			if err != nil {
				var ce *chat.Error
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a *chat.Error", err)
				}
				return
			}
			if ch.Choice != 0 {
				t.Fatalf("chunk of choice %d", ch.Choice)
			}
			for _, d := range ch.ToolCalls {
				if d.Index < 0 || d.Index >= chat.MaxToolCalls {
					t.Fatalf("tool call index %d out of range", d.Index)
				}
			}
			c.Add(ch)
		}
		// A stream that ended without an error finished its answer, and
		// every call it made has a name and JSON-ish arguments.
		resp := c.Response()
		if len(resp.Choices) == 0 || resp.Choices[0].FinishReason == "" {
			t.Fatalf("a stream ended without an error and without a finish reason: %+v", resp.Choices)
		}
		for _, tc := range resp.Choices[0].ToolCalls {
			if tc.Arguments == "" {
				t.Fatalf("call %+v ended without arguments", tc)
			}
		}
	})
}
