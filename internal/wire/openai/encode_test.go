package openai

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// The reference chunk: what ChunkEncoder writes, as Go values for
// encoding/json to write, fields in the encoder's order.
type (
	refChunk struct {
		ID      string          `json:"id"`
		Object  string          `json:"object"`
		Created int64           `json:"created"`
		Model   string          `json:"model"`
		Choices []refChoice     `json:"choices"`
		Usage   json.RawMessage `json:"usage,omitempty"`
	}
	refChoice struct {
		Index        int       `json:"index"`
		Delta        refDelta  `json:"delta"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason *string   `json:"finish_reason"`
	}
	refDelta struct {
		Role             string          `json:"role,omitempty"`
		Content          *string         `json:"content,omitempty"`
		ReasoningContent string          `json:"reasoning_content,omitempty"`
		ThinkingBlocks   []ThinkingBlock `json:"thinking_blocks,omitempty"`
		Refusal          string          `json:"refusal,omitempty"`
		ToolCalls        []refToolCall   `json:"tool_calls,omitempty"`
	}
	refToolCall struct {
		Index    int    `json:"index"`
		ID       string `json:"id,omitempty"`
		Type     string `json:"type,omitempty"`
		Function struct {
			Name      string `json:"name,omitempty"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
)

// refEncoder writes ChunkEncoder's events with encoding/json.
type refEncoder struct {
	enc      ChunkEncoder
	roleSent map[int]bool
	thinking map[int]string // the open thinking block's text, per choice
}

func (r *refEncoder) event(t *testing.T, choices []refChoice, usage json.RawMessage) []byte {
	t.Helper()
	if usage == nil && r.enc.IncludeUsage {
		usage = json.RawMessage("null")
	}
	var buf bytes.Buffer
	buf.WriteString("data: ")
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as a client-facing stream is written
	if err := enc.Encode(refChunk{ID: r.enc.ID, Object: "chat.completion.chunk", Created: r.enc.Created, Model: r.enc.Model, Choices: choices, Usage: usage}); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("\n") // Encode ended the JSON with the first newline
	return buf.Bytes()
}

func (r *refEncoder) chunk(t *testing.T, c *chat.Chunk) []byte {
	t.Helper()
	var blocks []ThinkingBlock
	if th := c.Thought; th != nil && th.Restart {
		r.thinking[c.Choice] = ""
	}
	r.thinking[c.Choice] += c.Thinking
	if th := c.Thought; th != nil && (th.Signature != "" || th.Redacted != "") {
		b := chat.ThinkingBlock{Signature: th.Signature, Redacted: th.Redacted}
		if th.Signature != "" {
			b.Text = r.thinking[c.Choice]
			r.thinking[c.Choice] = ""
		}
		if th.Format == chat.ThinkingAnthropic {
			blocks = []ThinkingBlock{thinkingBlock(&b)}
		}
	}
	if !c.Visible() && c.FinishReason == "" && c.Thinking == "" && blocks == nil {
		return nil
	}
	var out []byte
	if !r.roleSent[c.Choice] {
		r.roleSent[c.Choice] = true
		empty := ""
		out = r.event(t, []refChoice{{Index: c.Choice, Delta: refDelta{Role: "assistant", Content: &empty}}}, nil)
	}
	ch := refChoice{Index: c.Choice, Delta: refDelta{Refusal: c.Refusal, ReasoningContent: c.Thinking, ThinkingBlocks: blocks}}
	if c.Text != "" {
		ch.Delta.Content = &c.Text
	}
	for _, tc := range c.ToolCalls {
		rc := refToolCall{Index: tc.Index, ID: tc.ID}
		if tc.ID != "" {
			rc.Type = "function"
		}
		rc.Function.Name, rc.Function.Arguments = tc.Name, tc.Arguments
		ch.Delta.ToolCalls = append(ch.Delta.ToolCalls, rc)
	}
	if c.FinishReason != "" {
		finish := string(c.FinishReason)
		ch.FinishReason = &finish
	}
	return append(out, r.event(t, []refChoice{ch}, nil)...)
}

func (r *refEncoder) usage(t *testing.T, u *chat.Usage) []byte {
	t.Helper()
	j, err := json.Marshal(UsageFromChat(u))
	if err != nil {
		t.Fatal(err)
	}
	return r.event(t, []refChoice{}, j)
}

// chunkEncoderCase is one row: an encoder, the chunks it writes in turn,
// and the usage it ends with.
type chunkEncoderCase struct {
	name   string
	enc    ChunkEncoder
	chunks []chat.Chunk
	usage  *chat.Usage
}

var chunkEncoderTests = []chunkEncoderCase{
	{"text", ChunkEncoder{ID: "chatcmpl-1", Created: 1727346168, Model: "gpt-4o"},
		[]chat.Chunk{{Text: "Hello"}, {Text: " world"}, {FinishReason: chat.FinishStop}}, nil},
	{"usage", ChunkEncoder{ID: "c", Created: 1, Model: "m", IncludeUsage: true},
		[]chat.Chunk{{Text: "x", Model: "up"}, {Usage: &chat.Usage{InputTokens: 3}}, {FinishReason: chat.FinishLength}},
		&chat.Usage{InputTokens: 9, OutputTokens: 2, CachedInputTokens: 4, ReasoningTokens: 1}},
	{"escapes", ChunkEncoder{ID: "<id>&\"", Created: -5, Model: "m\u2028\xff"},
		[]chat.Chunk{{Text: "<b>\"q\"\\\n\t\x01 é \u2029 \xff\xfe"}, {Refusal: "no </script>"}}, nil},
	{"choices", ChunkEncoder{ID: "c", Model: "m"},
		[]chat.Chunk{{Choice: 2, Text: "c"}, {Choice: 0, Refusal: "r"}, {Choice: 2, FinishReason: "custom"}, {Choice: 0, Text: "a", Refusal: "b"}}, nil},
	{"tool calls", ChunkEncoder{ID: "c", Model: "m", IncludeUsage: true},
		[]chat.Chunk{
			{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "call_1", Name: "get_weather", Arguments: ""}, {Index: 1, ID: "call_2", Name: "now"}}},
			{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: `{"city":"Zürich"}`}}},
			{Text: "t", ToolCalls: []chat.ToolCallDelta{{Index: 1, Name: "only a name"}}, FinishReason: chat.FinishToolCalls},
		}, &chat.Usage{}},
	{"thinking", ChunkEncoder{ID: "c", Model: "m", IncludeUsage: true},
		[]chat.Chunk{
			{Thinking: "Let me "},
			{Thinking: "think."},
			{Thought: &chat.Thought{Signature: "EqQBCgIYAhIM", Format: chat.ThinkingAnthropic}},
			{Thought: &chat.Thought{Redacted: "EmwKAhgBEgy3va", Format: chat.ThinkingAnthropic}},
			{Thinking: "half", Thought: &chat.Thought{Signature: "gemini-sig", Format: chat.ThinkingGemini}},
			{Thinking: "dropped"},
			{Thought: &chat.Thought{Restart: true}},
			{Thinking: "again <\"\u2028>", Thought: &chat.Thought{Signature: "s2", Format: chat.ThinkingAnthropic}},
			{Text: "Paris", Choice: 1, Thinking: "other choice"},
			{Text: "Paris"},
			{FinishReason: chat.FinishStop},
		}, &chat.Usage{OutputTokens: 9, ReasoningTokens: 7}},
	{"nothing to say", ChunkEncoder{ID: "c", Model: "m"},
		[]chat.Chunk{{Model: "m"}, {Usage: &chat.Usage{OutputTokens: 1}}, {UsageSoFar: &chat.Usage{}}}, nil},
}

// checkChunkEncoder writes tt's chunks with ChunkEncoder and with
// encoding/json and compares the bytes, then checks that every event is
// a data line of JSON.
func checkChunkEncoder(t *testing.T, tt chunkEncoderCase) {
	t.Helper()
	enc := tt.enc
	ref := refEncoder{enc: tt.enc, roleSent: map[int]bool{}, thinking: map[int]string{}}
	var got, want []byte
	for i := range tt.chunks {
		got = enc.AppendChunk(got, &tt.chunks[i])
		want = append(want, ref.chunk(t, &tt.chunks[i])...)
	}
	if tt.usage != nil {
		got = enc.AppendUsage(got, tt.usage)
		want = append(want, ref.usage(t, tt.usage)...)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Fatalf("ChunkEncoder differs from encoding/json (-want +got):\n%s", diff)
	}
	for _, ev := range bytes.SplitAfter(got, []byte("\n\n")) {
		if len(ev) == 0 {
			continue
		}
		data, ok := bytes.CutPrefix(ev, []byte("data: "))
		if !ok || !json.Valid(bytes.TrimSuffix(data, []byte("\n\n"))) {
			t.Fatalf("not a data event of JSON: %q", ev)
		}
	}
}

func TestChunkEncoder(t *testing.T) {
	for _, tt := range chunkEncoderTests {
		t.Run(tt.name, func(t *testing.T) { checkChunkEncoder(t, tt) })
	}
}

// FuzzChunkEncoder writes a chunk twice (the role is sent once), then the
// usage, with ChunkEncoder and with encoding/json.
func FuzzChunkEncoder(f *testing.F) {
	for _, tt := range chunkEncoderTests {
		for _, c := range tt.chunks {
			var tc chat.ToolCallDelta
			if len(c.ToolCalls) > 0 {
				tc = c.ToolCalls[0]
			}
			var th chat.Thought
			if c.Thought != nil {
				th = *c.Thought
			}
			f.Add(tt.enc.ID, tt.enc.Model, tt.enc.Created, tt.enc.IncludeUsage, uint8(c.Choice), c.Text, c.Refusal, string(c.FinishReason),
				tc.Index, tc.ID, tc.Name, tc.Arguments, uint8(len(c.ToolCalls)), 7, 3,
				c.Thinking, th.Signature, th.Redacted, th.Format, th.Restart)
		}
	}
	f.Fuzz(func(t *testing.T, id, model string, created int64, includeUsage bool, choice uint8, text, refusal, finish string,
		callIndex int, callID, callName, callArgs string, calls uint8, in, out int,
		thinking, signature, redacted, format string, restart bool) {
		c := chat.Chunk{Choice: int(choice % 4), Text: text, Refusal: refusal, FinishReason: chat.FinishReason(finish), Thinking: thinking}
		if signature != "" || redacted != "" || restart {
			c.Thought = &chat.Thought{Signature: signature, Redacted: redacted, Format: format, Restart: restart}
		}
		for i := range int(calls % 3) {
			c.ToolCalls = append(c.ToolCalls, chat.ToolCallDelta{Index: callIndex + i, ID: callID, Name: callName, Arguments: callArgs})
		}
		checkChunkEncoder(t, chunkEncoderCase{
			enc:    ChunkEncoder{ID: id, Created: created, Model: model, IncludeUsage: includeUsage},
			chunks: []chat.Chunk{c, c},
			usage:  &chat.Usage{InputTokens: in, OutputTokens: out, CachedInputTokens: in / 2, ReasoningTokens: out / 2},
		})
	})
}
