package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// The reference events: what EventEncoder writes, as Go values for
// encoding/json to write, fields in the encoder's order.
type (
	refMessageStart struct {
		Type    string `json:"type"`
		Message struct {
			ID           string     `json:"id"`
			Type         string     `json:"type"`
			Role         string     `json:"role"`
			Model        string     `json:"model"`
			Content      []struct{} `json:"content"`
			StopReason   *string    `json:"stop_reason"`
			StopSequence *string    `json:"stop_sequence"`
			Usage        struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		} `json:"message"`
	}
	refBlockStart struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Block struct {
			Type  string    `json:"type"`
			Text  *string   `json:"text,omitempty"`
			ID    *string   `json:"id,omitempty"`
			Name  *string   `json:"name,omitempty"`
			Input *struct{} `json:"input,omitempty"`
			// thinking and redacted_thinking
			Thinking  *string `json:"thinking,omitempty"`
			Signature *string `json:"signature,omitempty"`
			Data      *string `json:"data,omitempty"`
		} `json:"content_block"`
	}
	refBlockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta struct {
			Type        string  `json:"type"`
			Text        *string `json:"text,omitempty"`
			PartialJSON *string `json:"partial_json,omitempty"`
			Thinking    *string `json:"thinking,omitempty"`
			Signature   *string `json:"signature,omitempty"`
		} `json:"delta"`
	}
	refBlockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	refMessageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage Usage `json:"usage"`
	}
	refError struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// refEventEncoder is EventEncoder written plainly, its events by
// encoding/json.
type refEventEncoder struct {
	t           *testing.T
	id, model   string
	inputTokens int
	show        Show
	out         []byte
	started     bool
	blocks      int
	open        int // the open block, or -1
	text        bool
	think       bool        // the open block is a thinking block
	tools       map[int]int // chat tool-call index → block index
}

func (r *refEventEncoder) event(typ string, v any) {
	r.out = append(r.out, "event: "+typ+"\ndata: "...)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		r.t.Fatal(err)
	}
	r.out = append(r.out, buf.Bytes()...) // Encode ends with a newline
	r.out = append(r.out, '\n')
}

func (r *refEventEncoder) start() {
	if r.started {
		return
	}
	r.started, r.open = true, -1
	var ev refMessageStart
	ev.Type = "message_start"
	m := &ev.Message
	m.ID, m.Type, m.Role, m.Model, m.Content = r.id, "message", "assistant", r.model, []struct{}{}
	m.Usage.InputTokens = max(r.inputTokens, 0)
	r.event("message_start", ev)
}

func (r *refEventEncoder) chunk(c *chat.Chunk) {
	r.start()
	if c.Choice != 0 {
		return
	}
	if r.show != ShowNone {
		r.thinking(c)
	}
	for _, text := range []string{c.Text, c.Refusal} {
		if text == "" {
			continue
		}
		if r.open < 0 || !r.text {
			r.stop()
			r.open, r.text, r.think = r.blocks, true, false
			r.blocks++
			var ev refBlockStart
			ev.Type, ev.Index, ev.Block.Type, ev.Block.Text = "content_block_start", r.open, "text", new(string)
			r.event(ev.Type, ev)
		}
		var ev refBlockDelta
		ev.Type, ev.Index, ev.Delta.Type, ev.Delta.Text = "content_block_delta", r.open, "text_delta", &text
		r.event(ev.Type, ev)
	}
	for _, tc := range c.ToolCalls {
		if tc.Index < 0 || tc.Index >= chat.MaxToolCalls {
			continue
		}
		idx, ok := r.tools[tc.Index]
		if !ok {
			r.stop()
			idx = r.blocks
			r.blocks++
			r.tools[tc.Index] = idx
			r.open, r.text, r.think = idx, false, false
			var ev refBlockStart
			ev.Type, ev.Index, ev.Block.Type = "content_block_start", idx, "tool_use"
			ev.Block.ID, ev.Block.Name, ev.Block.Input = &tc.ID, &tc.Name, &struct{}{}
			r.event(ev.Type, ev)
		}
		if tc.Arguments != "" {
			var ev refBlockDelta
			ev.Type, ev.Index, ev.Delta.Type, ev.Delta.PartialJSON = "content_block_delta", idx, "input_json_delta", &tc.Arguments
			r.event(ev.Type, ev)
		}
	}
}

func (r *refEventEncoder) thinking(c *chat.Chunk) {
	th := c.Thought
	if th != nil && th.Restart && r.think {
		r.stop()
	}
	open := func() {
		if r.open >= 0 && r.think {
			return
		}
		r.stop()
		r.open, r.text, r.think = r.blocks, false, true
		r.blocks++
		var ev refBlockStart
		ev.Type, ev.Index, ev.Block.Type, ev.Block.Thinking, ev.Block.Signature = "content_block_start", r.open, "thinking", new(string), new(string)
		r.event(ev.Type, ev)
	}
	if c.Thinking != "" && r.show == ShowAll {
		open()
		var ev refBlockDelta
		ev.Type, ev.Index, ev.Delta.Type, ev.Delta.Thinking = "content_block_delta", r.open, "thinking_delta", &c.Thinking
		r.event(ev.Type, ev)
	}
	if th == nil || th.Format != chat.ThinkingAnthropic {
		return
	}
	if th.Signature != "" {
		open()
		var ev refBlockDelta
		ev.Type, ev.Index, ev.Delta.Type, ev.Delta.Signature = "content_block_delta", r.open, "signature_delta", &th.Signature
		r.event(ev.Type, ev)
		r.stop()
	}
	if th.Redacted != "" {
		r.stop()
		var ev refBlockStart
		ev.Type, ev.Index, ev.Block.Type, ev.Block.Data = "content_block_start", r.blocks, "redacted_thinking", &th.Redacted
		r.blocks++
		r.event(ev.Type, ev)
		r.event("content_block_stop", refBlockStop{"content_block_stop", ev.Index})
	}
}

func (r *refEventEncoder) stop() {
	if r.open < 0 {
		return
	}
	r.event("content_block_stop", refBlockStop{"content_block_stop", r.open})
	r.open, r.think = -1, false
}

func (r *refEventEncoder) finish(reason chat.FinishReason, u *chat.Usage) {
	r.start()
	r.stop()
	var ev refMessageDelta
	ev.Type, ev.Delta.StopReason = "message_delta", StopReason(reason)
	ev.Usage = Usage{InputTokens: max(r.inputTokens, 0)}
	if u != nil {
		ev.Usage = UsageFromChat(u)
	}
	r.event(ev.Type, ev)
	r.event("message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})
}

func (r *refEventEncoder) errorEvent(ce *chat.Error) {
	var ev refError
	ev.Type = "error"
	ev.Error.Type, _ = ErrorType(ce.Category)
	ev.Error.Message = ce.Message
	r.event("error", ev)
}

// eventEncoderCase is one row: the encoder's fields, its chunks, and an
// ending: an error when err is set, else Finish with reason and usage.
type eventEncoderCase struct {
	name        string
	id, model   string
	inputTokens int
	show        Show
	chunks      []chat.Chunk
	reason      chat.FinishReason
	usage       *chat.Usage
	err         *chat.Error
}

var eventEncoderTests = []eventEncoderCase{
	{name: "golden chunks", id: "msg_fw_1", model: "claude-sonnet-4-5", inputTokens: 1200, chunks: encoderChunks, reason: chat.FinishToolCalls, usage: encoderUsage},
	{name: "escapes", id: "<id>&\"", model: "m\u2028\xff", inputTokens: -3,
		chunks: []chat.Chunk{{Text: "<b>\"q\"\\\n\t\x01 é \u2029 \xff\xfe"}, {Refusal: "no </script>"}}, reason: chat.FinishTimeout},
	{name: "interleaved tools", id: "m", model: "x", chunks: []chat.Chunk{
		{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "t0", Name: "f", Arguments: "{"}}},
		{Text: "mid"},
		{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: "}"}, {Index: -1, Arguments: "x"}, {Index: chat.MaxToolCalls, ID: "x"}, {Index: 3, ID: "t3"}}},
		{Refusal: " refused", Text: "both"},
		{Choice: 1, Text: "other choice"},
	}, reason: chat.FinishStop},
	{name: "error", id: "m", model: "x", chunks: []chat.Chunk{{Text: "partial"}}, err: &chat.Error{Category: chat.CategoryOverloaded, Message: "busy \"now\"\n<>"}},
	{name: "nothing", id: "m", model: "x", reason: "pause_turn", usage: &chat.Usage{InputTokens: 1, CachedInputTokens: 5}},
	{name: "thinking", id: "m", model: "x", show: ShowAll, chunks: thinkingChunks, reason: chat.FinishToolCalls},
	{name: "thinking signed only", id: "m", model: "x", show: ShowSigned, chunks: thinkingChunks, reason: chat.FinishToolCalls},
	{name: "thinking not shown", id: "m", model: "x", show: ShowNone, chunks: thinkingChunks, reason: chat.FinishToolCalls},
}

// thinkingChunks are thinking in every shape: text then a signature, a
// redacted block, another format's signature, a restart in the middle of
// a block, thinking after text and after a tool call (interleaved).
var thinkingChunks = []chat.Chunk{
	{Thinking: "Let me "},
	{Thinking: "think \"hard\".", Thought: &chat.Thought{Signature: "EqQBCgIYAhIM", Format: chat.ThinkingAnthropic}},
	{Thought: &chat.Thought{Redacted: "EmwKAhgBEgy3va", Format: chat.ThinkingAnthropic}},
	{Thinking: "gemini's", Thought: &chat.Thought{Signature: "g-sig", Format: chat.ThinkingGemini}},
	{Thinking: "a failed attempt"},
	{Thought: &chat.Thought{Restart: true}},
	{Thinking: "again"},
	{Thought: &chat.Thought{Signature: "s2", Format: chat.ThinkingAnthropic}},
	{Text: "Checking."},
	{Thinking: "after text"},
	{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "toolu_1", Name: "f", Arguments: "{}"}}},
	{Thought: &chat.Thought{Signature: "signed without text", Format: chat.ThinkingAnthropic}},
	{Choice: 1, Thinking: "other choice"},
}

// checkEventEncoder writes tt with EventEncoder and with encoding/json and
// compares the bytes.
func checkEventEncoder(t *testing.T, tt eventEncoderCase) {
	t.Helper()
	enc := EventEncoder{ID: tt.id, Model: tt.model, InputTokens: tt.inputTokens, Thinking: tt.show}
	ref := refEventEncoder{t: t, id: tt.id, model: tt.model, inputTokens: tt.inputTokens, show: tt.show, tools: map[int]int{}}
	var got []byte
	for i := range tt.chunks {
		got = enc.Chunk(got, &tt.chunks[i])
		ref.chunk(&tt.chunks[i])
	}
	if tt.err != nil {
		got = enc.Error(got, tt.err)
		ref.errorEvent(tt.err)
	} else {
		got = enc.Finish(got, tt.reason, tt.usage)
		ref.finish(tt.reason, tt.usage)
	}
	if diff := cmp.Diff(string(ref.out), string(got)); diff != "" {
		t.Fatalf("EventEncoder differs from encoding/json (-want +got):\n%s", diff)
	}
}

func TestEventEncoderMatchesEncodingJSON(t *testing.T) {
	for _, tt := range eventEncoderTests {
		t.Run(tt.name, func(t *testing.T) { checkEventEncoder(t, tt) })
	}
}

// FuzzEventEncoder writes a stream of chunks made from ops (each byte a
// text, refusal, tool call, other-choice, thinking, signature, redacted
// or restart chunk), then an ending, with EventEncoder and with
// encoding/json.
func FuzzEventEncoder(f *testing.F) {
	for i, tt := range eventEncoderTests {
		var in, out int
		if tt.usage != nil {
			in, out = tt.usage.InputTokens, tt.usage.OutputTokens
		}
		f.Add(tt.id, tt.model, tt.inputTokens, []byte{0, 1, 2, 6, 10, 3, byte(i), 4, 5, 12, 7, 4, 13, 0}, "a \"b\"", "<\xff>", string(tt.reason), in, out, tt.err != nil, uint8(i))
	}
	f.Fuzz(func(t *testing.T, id, model string, inputTokens int, ops []byte, s1, s2, reason string, in, out int, fail bool, show uint8) {
		tt := eventEncoderCase{id: id, model: model, inputTokens: inputTokens, reason: chat.FinishReason(reason), show: Show(show % 3)}
		if len(ops) > 64 {
			ops = ops[:64]
		}
		for _, op := range ops {
			switch op % 8 {
			case 0:
				tt.chunks = append(tt.chunks, chat.Chunk{Text: s1})
			case 1:
				tt.chunks = append(tt.chunks, chat.Chunk{Refusal: s2, Text: s1[:len(s1)/2]})
			case 2:
				args := s1
				if op&4 != 0 {
					args = ""
				}
				tt.chunks = append(tt.chunks, chat.Chunk{ToolCalls: []chat.ToolCallDelta{{Index: int(op>>3)%5 - 1, ID: s2, Name: s1, Arguments: args}}})
			case 3:
				tt.chunks = append(tt.chunks, chat.Chunk{Choice: 1, Text: s1})
			case 4:
				tt.chunks = append(tt.chunks, chat.Chunk{Thinking: s1})
			case 5:
				format := chat.ThinkingAnthropic
				if op&8 != 0 {
					format = chat.ThinkingGemini
				}
				tt.chunks = append(tt.chunks, chat.Chunk{Thinking: s1[:len(s1)/2], Thought: &chat.Thought{Signature: s2, Format: format}})
			case 6:
				tt.chunks = append(tt.chunks, chat.Chunk{Thought: &chat.Thought{Redacted: s2, Format: chat.ThinkingAnthropic}})
			case 7:
				tt.chunks = append(tt.chunks, chat.Chunk{Thought: &chat.Thought{Restart: true}, Thinking: s2})
			}
		}
		switch {
		case fail:
			tt.err = &chat.Error{Category: chat.Category(reason), Message: s2}
		case in != 0 || out != 0:
			tt.usage = &chat.Usage{InputTokens: in, OutputTokens: out, CachedInputTokens: out / 2, CacheWriteTokens: in / 3}
		}
		checkEventEncoder(t, tt)
	})
}
