package openai

import (
	"encoding/json"
	"strconv"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonenc"
)

// ChunkEncoder writes chat.completion.chunk events for a client. The zero
// value is not usable; set ID, Created and Model.
//
// It runs once per token on every /v1/chat/completions stream, so it
// appends bytes by hand instead of marshalling a struct; the bytes are
// those encoding/json would write for OpenAI's chunk, members in OpenAI's
// order (FuzzChunkEncoder checks), so that clients and SDKs parsing
// strictly see exactly what OpenAI would have sent.
type ChunkEncoder struct {
	ID      string
	Created int64
	Model   string
	// IncludeUsage adds "usage":null to every chunk, as OpenAI does when
	// the client asked for stream_options.include_usage.
	IncludeUsage bool

	// roleSent records, per choice, whether the role-only chunk that
	// opens OpenAI's streams went out: SDKs that rebuild the message
	// from deltas take the role from it.
	roleSent []bool
	// thinking holds, per choice, the open thinking block's text, for the
	// thinking_blocks entry its signature ends it with; block is that
	// entry while it is written.
	thinking [][]byte
	block    chat.ThinkingBlock
}

// thought keeps c's thinking text for its choice's open block and
// returns the block c's Thought ends, when it is one this dialect writes
// (Anthropic's), or nil.
func (e *ChunkEncoder) thought(c *chat.Chunk) *chat.ThinkingBlock {
	th := c.Thought
	for len(e.thinking) <= c.Choice {
		e.thinking = append(e.thinking, nil)
	}
	text := &e.thinking[c.Choice]
	if th != nil && th.Restart {
		*text = (*text)[:0]
	}
	*text = append(*text, c.Thinking...)
	if th == nil || th.Signature == "" && th.Redacted == "" {
		return nil
	}
	e.block = chat.ThinkingBlock{Signature: th.Signature, Redacted: th.Redacted, Format: th.Format}
	if th.Signature != "" {
		e.block.Text = string(*text)
		*text = (*text)[:0]
	}
	if th.Format != chat.ThinkingAnthropic {
		return nil
	}
	return &e.block
}

// ThinkingBlock is a thinking block as LiteLLM writes it in a message's
// (or a delta's) thinking_blocks: Anthropic's thinking block (Type
// "thinking", its text and signature) or redacted_thinking block (Type
// "redacted_thinking", its data), which a client sends back unchanged.
type ThinkingBlock struct {
	Type      string  `json:"type"`
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	Data      *string `json:"data,omitempty"`
}

// thinkingBlock is b as a thinking_blocks entry.
func thinkingBlock(b *chat.ThinkingBlock) ThinkingBlock {
	if b.Redacted != "" {
		return ThinkingBlock{Type: "redacted_thinking", Data: &b.Redacted}
	}
	return ThinkingBlock{Type: "thinking", Thinking: &b.Text, Signature: &b.Signature}
}

// appendThinkingBlock appends thinkingBlock(b)'s JSON, as encoding/json
// writes it.
func appendThinkingBlock(b []byte, tb *chat.ThinkingBlock) []byte {
	if tb.Redacted != "" {
		b = append(b, `{"type":"redacted_thinking","data":`...)
		b = AppendString(b, tb.Redacted)
		return append(b, '}')
	}
	b = append(b, `{"type":"thinking","thinking":`...)
	b = AppendString(b, tb.Text)
	b = append(b, `,"signature":`...)
	b = AppendString(b, tb.Signature)
	return append(b, '}')
}

// AppendChunk appends the SSE events for c to b: a role-only chunk before a
// choice's first delta, then the delta. Chunks with nothing to say (usage
// only, model only) append nothing; usage is written by AppendUsage.
//
// Thinking is written as the OpenAI-compatible ecosystem writes it
// (DeepSeek, vLLM, LiteLLM): delta.reasoning_content. An Anthropic
// signature or redacted block is LiteLLM's delta.thinking_blocks, one
// whole block ({"type":"thinking","thinking":<the block's text>,
// "signature":...} or {"type":"redacted_thinking","data":...}), which a
// client sends back on its assistant message for Claude to check. Other
// formats' signatures have no place in this dialect and are not written.
// A restart writes nothing: Chat Completions has no way to take back a
// delta, so a client sees the failed attempt's thinking, then the new
// attempt's (and any block the failed attempt had signed before it
// failed: see docs/thinking.md).
func (e *ChunkEncoder) AppendChunk(b []byte, c *chat.Chunk) []byte {
	var block *chat.ThinkingBlock
	if c.Thinking != "" || c.Thought != nil {
		block = e.thought(c) // answer text skips the call
	}
	if !c.Visible() && c.FinishReason == "" && c.Thinking == "" && block == nil {
		return b
	}
	for len(e.roleSent) <= c.Choice {
		e.roleSent = append(e.roleSent, false)
	}
	if !e.roleSent[c.Choice] {
		e.roleSent[c.Choice] = true
		b = e.open(b)
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(c.Choice), 10)
		b = append(b, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
		b = e.close(b)
	}
	b = e.open(b)
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(c.Choice), 10)
	b = append(b, `,"delta":{`...)
	// Only the members with something to say, as OpenAI omits the rest
	// from a delta; sep tracks whether a comma is due.
	sep := false
	if c.Text != "" {
		b = append(b, `"content":`...)
		b = AppendString(b, c.Text)
		sep = true
	}
	if c.Thinking != "" {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"reasoning_content":`...)
		b = AppendString(b, c.Thinking)
		sep = true
	}
	if block != nil {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"thinking_blocks":[`...)
		b = appendThinkingBlock(b, block)
		b = append(b, ']')
		sep = true
	}
	if c.Refusal != "" {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"refusal":`...)
		b = AppendString(b, c.Refusal)
		sep = true
	}
	if len(c.ToolCalls) > 0 {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"tool_calls":[`...)
		for i, tc := range c.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(tc.Index), 10)
			// id, type and name open a call (its first delta); later
			// deltas carry only arguments, which clients join by index.
			// arguments is always written, "" included, as OpenAI
			// writes it.
			if tc.ID != "" {
				b = append(b, `,"id":`...)
				b = AppendString(b, tc.ID)
				b = append(b, `,"type":"function"`...)
			}
			b = append(b, `,"function":{`...)
			if tc.Name != "" {
				b = append(b, `"name":`...)
				b = AppendString(b, tc.Name)
				b = append(b, ',')
			}
			b = append(b, `"arguments":`...)
			b = AppendString(b, tc.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	if c.FinishReason != "" {
		b = AppendString(b, string(c.FinishReason))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, "}]"...)
	return e.close(b)
}

// AppendUsage appends the usage-only chunk (empty choices) that OpenAI sends
// last when the client set stream_options.include_usage.
func (e *ChunkEncoder) AppendUsage(b []byte, u *chat.Usage) []byte {
	b = e.open(b)
	b = append(b, `],"usage":`...)
	// Once a stream: encoding/json is cheap enough here, and keeps the
	// usage object's shape in one place (Usage).
	j, _ := json.Marshal(UsageFromChat(u))
	b = append(b, j...)
	return append(b, "}\n\n"...)
}

// AppendDone appends the terminal data: [DONE] event.
func AppendDone(b []byte) []byte { return append(b, "data: [DONE]\n\n"...) }

// AppendErrorEvent appends a mid-stream error event in the shape OpenAI's
// SDKs raise as an error: data: {"error": {...}}.
func AppendErrorEvent(b []byte, body *ErrorBody) []byte {
	j, _ := json.Marshal(struct {
		Error *ErrorBody `json:"error"`
	}{body})
	b = append(b, "data: "...)
	b = append(b, j...)
	return append(b, "\n\n"...)
}

// open writes a chunk event up to the start of its choices, with the
// members every chunk of the stream repeats.
func (e *ChunkEncoder) open(b []byte) []byte {
	b = append(b, `data: {"id":`...)
	b = AppendString(b, e.ID)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, e.Created, 10)
	b = append(b, `,"model":`...)
	b = AppendString(b, e.Model)
	return append(b, `,"choices":[`...)
}

// close ends a chunk event after its choices, and the event itself (a
// blank line).
func (e *ChunkEncoder) close(b []byte) []byte {
	if e.IncludeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; U+2028 and U+2029 are escaped so the output is safe
// in JavaScript too. <, > and & are not escaped, as OpenAI does not: a
// client comparing bytes, or a person reading a transcript, sees the
// text as it was.
func AppendString(b []byte, s string) []byte { return jsonenc.AppendStringNoHTML(b, s) }

// Completion is a non-streaming chat.completion response.
type Completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *Usage             `json:"usage,omitempty"`
	SystemFingerprint *string            `json:"system_fingerprint"`
}

// CompletionChoice is one choice of a Completion.
type CompletionChoice struct {
	Index        int               `json:"index"`
	Message      CompletionMessage `json:"message"`
	Logprobs     json.RawMessage   `json:"logprobs"`
	FinishReason string            `json:"finish_reason"`
}

// CompletionMessage is a Completion's message: a Message with the
// model's thinking, as the OpenAI-compatible ecosystem writes it (see
// ChunkEncoder.AppendChunk): all of its text in reasoning_content, and
// its Anthropic blocks, signed, in thinking_blocks.
type CompletionMessage struct {
	Message
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ThinkingBlocks   []ThinkingBlock `json:"thinking_blocks,omitempty"`
}

// EncodeCompletion builds the non-streaming response for a collected
// answer.
func EncodeCompletion(id string, created int64, model string, r *chat.Response) *Completion {
	c := &Completion{ID: id, Object: "chat.completion", Created: created, Model: model, Choices: []CompletionChoice{}}
	for _, ch := range r.Choices {
		m := CompletionMessage{Message: Message{Role: "assistant"}}
		// content is null only for a pure tool-call answer, as OpenAI
		// sends it; otherwise a string, "" included.
		if ch.Text != "" || len(ch.ToolCalls) == 0 {
			m.Content, _ = json.Marshal(ch.Text)
		} else {
			m.Content = json.RawMessage("null")
		}
		if ch.Refusal != "" {
			ref := ch.Refusal
			m.Refusal = &ref
		}
		for _, tc := range ch.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
		for i := range ch.Thinking {
			tb := &ch.Thinking[i]
			m.ReasoningContent += tb.Text
			if tb.Format == chat.ThinkingAnthropic {
				m.ThinkingBlocks = append(m.ThinkingBlocks, thinkingBlock(tb))
			}
		}
		c.Choices = append(c.Choices, CompletionChoice{Index: ch.Index, Message: m, Logprobs: json.RawMessage("null"), FinishReason: string(ch.FinishReason)})
	}
	if r.Usage != nil {
		c.Usage = UsageFromChat(r.Usage)
	}
	return c
}

// ErrorType is the OpenAI error "type" for a firstword error category.
func ErrorType(c chat.Category) string {
	switch c {
	case chat.CategoryInvalidRequest, chat.CategoryContextLength, chat.CategoryContentFilter, chat.CategoryNotFound, chat.CategoryClientClosed:
		return "invalid_request_error"
	case chat.CategoryAuth:
		return "upstream_authentication_error"
	case chat.CategoryRateLimited:
		return "rate_limit_error"
	case chat.CategoryTimeout:
		return "timeout_error"
	}
	return "server_error"
}

// ErrorFromChat builds the error object for a classified error.
func ErrorFromChat(e *chat.Error) *ErrorBody {
	c := string(e.Category)
	if e.Category == chat.CategoryContextLength {
		c = "context_length_exceeded" // OpenAI's own code, which its SDKs' users test for
	}
	typ := ErrorType(e.Category)
	if e.Code == chat.CodeInsufficientQuota {
		c, typ = e.Code, e.Code // OpenAI's spent quota: its type is its code
	}
	code, _ := json.Marshal(c)
	return &ErrorBody{Message: e.Message, Type: typ, Code: code}
}
