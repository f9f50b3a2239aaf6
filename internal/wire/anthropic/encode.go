package anthropic

import (
	"net/http"
	"strconv"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonenc"
)

// StopReason is the Anthropic stop_reason for a finish reason. A timeout
// (firstword's own deadline cut the answer) is an end_turn here: the cut is
// reported to the client by firstword's own means, and no Anthropic stop
// reason says it. Anthropic's own values pass through; anything else is
// end_turn.
func StopReason(r chat.FinishReason) string {
	switch r {
	case chat.FinishLength:
		return "max_tokens"
	case chat.FinishToolCalls:
		return "tool_use"
	case chat.FinishContentFilter:
		return "refusal"
	case "end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal", "model_context_window_exceeded":
		return string(r)
	}
	return "end_turn"
}

// EventEncoder writes a Messages API event stream for a client, emitting
// the events Anthropic emits. Set ID, Model and InputTokens (the prompt's
// estimated size, reported in message_start); the encoder then tracks the
// open content block. Each method appends complete events
// ("event: <type>\ndata: <json>\n\n") to b and returns it. Only choice 0 is
// encoded. Not safe for concurrent use.
type EventEncoder struct {
	ID          string
	Model       string
	InputTokens int
	// Thinking is what the client is sent of the model's thinking (see
	// Show): as Anthropic does, nothing unless the request enabled it.
	Thinking Show

	started bool
	blocks  int  // content blocks opened so far
	open    int  // the open block's index, or -1 (valid once started)
	text    bool // the open block is a text block
	think   bool // the open block is a thinking block
	// tools maps a chat tool-call index to its block index plus one.
	tools []int
}

// Start appends message_start: a message with no content yet. Chunk and
// Finish call it when it was not called, so a caller may wait for the
// first chunk to learn the upstream model.
func (e *EventEncoder) Start(b []byte) []byte {
	if e.started {
		return b
	}
	e.started, e.open = true, -1
	b = append(b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	b = appendString(b, e.ID)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendString(b, e.Model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(max(e.InputTokens, 0)), 10)
	return append(b, ",\"output_tokens\":0}}}\n\n"...)
}

// Show is what a client is sent of the model's thinking.
type Show uint8

const (
	// ShowNone: no thinking blocks (the request did not enable thinking).
	ShowNone Show = iota
	// ShowSigned: thinking blocks with their signatures but no text, as
	// Anthropic sends them when the request asked display "omitted".
	ShowSigned
	// ShowAll: thinking blocks with their text and signatures.
	ShowAll
)

// Chunk appends the events for c: thinking goes to a thinking block (see
// thinking), text deltas to a text block and tool calls to a tool_use
// block each, opening a block (content_block_start) and closing the
// previous one (content_block_stop) as needed. A refusal is encoded as
// text. Chunks of other choices, and chunks with nothing visible, append
// nothing but message_start, if it was not yet sent.
//
// Arguments for a tool call whose block was already closed (an upstream
// that interleaves calls) are sent to that block's index: Anthropic's
// SDKs, and the stream reader, accumulate them correctly.
func (e *EventEncoder) Chunk(b []byte, c *chat.Chunk) []byte {
	b = e.Start(b)
	if c.Choice != 0 {
		return b
	}
	if e.Thinking != ShowNone && c.Thinks() {
		b = e.thinking(b, c)
	}
	if c.Text != "" {
		b = e.textDelta(b, c.Text)
	}
	if c.Refusal != "" {
		b = e.textDelta(b, c.Refusal)
	}
	for i := range c.ToolCalls {
		b = e.toolDelta(b, &c.ToolCalls[i])
	}
	return b
}

// thinking appends the events for c's thinking: a thinking block is
// opened (its thinking and signature empty, as Anthropic opens one) for
// its first delta, and its signature (signature_delta) closes it. A
// redacted block is a redacted_thinking block of its own, opened and
// closed at once. A restart closes the open thinking block unsigned (no
// event can take back what was sent): the new attempt's thinking opens a
// new one. Only Anthropic's signatures and redacted data are written;
// another provider's would only be refused if sent back to Claude.
func (e *EventEncoder) thinking(b []byte, c *chat.Chunk) []byte {
	th := c.Thought
	if th != nil && th.Restart && e.think {
		b = e.stop(b)
	}
	if c.Thinking != "" && e.Thinking == ShowAll {
		b = e.openThinking(b)
		b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
		b = strconv.AppendInt(b, int64(e.open), 10)
		b = append(b, `,"delta":{"type":"thinking_delta","thinking":`...)
		b = appendString(b, c.Thinking)
		b = append(b, "}}\n\n"...)
	}
	if th == nil || th.Format != chat.ThinkingAnthropic {
		return b
	}
	if th.Signature != "" {
		b = e.openThinking(b)
		b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
		b = strconv.AppendInt(b, int64(e.open), 10)
		b = append(b, `,"delta":{"type":"signature_delta","signature":`...)
		b = appendString(b, th.Signature)
		b = append(b, "}}\n\n"...)
		b = e.stop(b)
	}
	if th.Redacted != "" {
		b = e.stop(b)
		e.open, e.text, e.think = e.blocks, false, false
		e.blocks++
		b = append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
		b = strconv.AppendInt(b, int64(e.open), 10)
		b = append(b, `,"content_block":{"type":"redacted_thinking","data":`...)
		b = appendString(b, th.Redacted)
		b = append(b, "}}\n\n"...)
		b = e.stop(b)
	}
	return b
}

// openThinking opens a thinking block unless one is open.
func (e *EventEncoder) openThinking(b []byte) []byte {
	if e.open >= 0 && e.think {
		return b
	}
	b = e.stop(b)
	e.open, e.text, e.think = e.blocks, false, true
	e.blocks++
	b = append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	b = strconv.AppendInt(b, int64(e.open), 10)
	return append(b, ",\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"...)
}

func (e *EventEncoder) textDelta(b []byte, text string) []byte {
	if e.open < 0 || !e.text {
		b = e.stop(b)
		e.open, e.text, e.think = e.blocks, true, false
		e.blocks++
		b = append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
		b = strconv.AppendInt(b, int64(e.open), 10)
		b = append(b, ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"...)
	}
	b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	b = strconv.AppendInt(b, int64(e.open), 10)
	b = append(b, `,"delta":{"type":"text_delta","text":`...)
	b = appendString(b, text)
	return append(b, "}}\n\n"...)
}

func (e *EventEncoder) toolDelta(b []byte, d *chat.ToolCallDelta) []byte {
	if d.Index < 0 || d.Index >= chat.MaxToolCalls {
		return b
	}
	for len(e.tools) <= d.Index {
		e.tools = append(e.tools, 0)
	}
	idx := e.tools[d.Index] - 1
	if idx < 0 {
		b = e.stop(b)
		idx = e.blocks
		e.blocks++
		e.tools[d.Index] = idx + 1
		e.open, e.text, e.think = idx, false, false
		b = append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
		b = strconv.AppendInt(b, int64(idx), 10)
		b = append(b, `,"content_block":{"type":"tool_use","id":`...)
		b = appendString(b, d.ID)
		b = append(b, `,"name":`...)
		b = appendString(b, d.Name)
		b = append(b, ",\"input\":{}}}\n\n"...)
	}
	if d.Arguments == "" {
		return b
	}
	b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	b = strconv.AppendInt(b, int64(idx), 10)
	b = append(b, `,"delta":{"type":"input_json_delta","partial_json":`...)
	b = appendString(b, d.Arguments)
	return append(b, "}}\n\n"...)
}

// stop closes the open block, if any.
func (e *EventEncoder) stop(b []byte) []byte {
	if e.open < 0 {
		return b
	}
	b = append(b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	b = strconv.AppendInt(b, int64(e.open), 10)
	e.open, e.think = -1, false
	return append(b, "}\n\n"...)
}

// Finish appends the end of the message: content_block_stop for the open
// block, message_delta with the stop reason (see StopReason) and the
// usage, and message_stop. u may be nil.
func (e *EventEncoder) Finish(b []byte, reason chat.FinishReason, u *chat.Usage) []byte {
	b = e.Start(b)
	b = e.stop(b)
	b = append(b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"...)
	b = appendString(b, StopReason(reason))
	b = append(b, `,"stop_sequence":null},"usage":`...)
	b = appendUsage(b, e.usage(u))
	b = append(b, "}\n\n"...)
	return append(b, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

func (e *EventEncoder) usage(u *chat.Usage) Usage {
	if u == nil {
		return Usage{InputTokens: max(e.InputTokens, 0)}
	}
	return UsageFromChat(u)
}

// UsageFromChat converts usage for a client: Anthropic's input_tokens
// exclude the tokens read from and written to the cache.
func UsageFromChat(u *chat.Usage) Usage {
	return Usage{
		InputTokens:              max(u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens, 0),
		CacheCreationInputTokens: u.CacheWriteTokens,
		CacheReadInputTokens:     u.CachedInputTokens,
		OutputTokens:             u.OutputTokens,
	}
}

func appendUsage(b []byte, u Usage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.InputTokens), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheCreationInputTokens), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheReadInputTokens), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
	return append(b, '}')
}

// Error appends an error event, which Anthropic's SDKs raise as an API
// error of e's type (see ErrorType).
func (e *EventEncoder) Error(b []byte, ce *chat.Error) []byte {
	typ, _ := ErrorType(ce.Category)
	if ce.Code == chat.CodeInsufficientQuota {
		// Only an upstream's failure comes mid-stream: its account
		// cannot pay, Anthropic's billing_error.
		typ = typeBilling
	}
	b = append(b, "event: error\ndata: "...)
	b = appendErrorBody(b, typ, ce.Message)
	return append(b, "\n\n"...)
}

// Ping appends a ping event, Anthropic's keep-alive.
func (e *EventEncoder) Ping(b []byte) []byte {
	return append(b, "event: ping\ndata: {\"type\": \"ping\"}\n\n"...)
}

// typeBilling is Anthropic's error type (HTTP 402) for an account that
// cannot pay: OpenAI's insufficient_quota.
const typeBilling = "billing_error"

// BillingError returns the Anthropic error type and status of an
// upstream's spent quota (chat.CodeInsufficientQuota).
func BillingError() (typ string, status int) { return typeBilling, 402 }

// ErrorType returns the Anthropic error type and HTTP status for a
// category. An upstream's authentication failure is an api_error (502),
// not an authentication_error: the client's key was fine, and the SDKs
// would say it was not. Overloaded is Anthropic's 529.
func ErrorType(c chat.Category) (typ string, status int) {
	switch c {
	case chat.CategoryRateLimited:
		return "rate_limit_error", http.StatusTooManyRequests
	case chat.CategoryOverloaded:
		return "overloaded_error", 529
	case chat.CategoryInvalidRequest, chat.CategoryContextLength, chat.CategoryContentFilter, chat.CategoryBlocked:
		return "invalid_request_error", http.StatusBadRequest
	case chat.CategoryNotFound:
		return "not_found_error", http.StatusNotFound
	case chat.CategoryTimeout:
		return "timeout_error", http.StatusGatewayTimeout
	case chat.CategoryAuth, chat.CategoryUpstreamUnavailable, chat.CategoryProtocol:
		return "api_error", http.StatusBadGateway
	case chat.CategoryClientClosed:
		return "invalid_request_error", chat.StatusClientClosedRequest
	case chat.CategoryShuttingDown:
		return "overloaded_error", http.StatusServiceUnavailable
	}
	return "api_error", http.StatusInternalServerError
}

// ErrorResponse is the body of an error response:
// {"type":"error","error":{"type":...,"message":...}}.
func ErrorResponse(typ, message string) []byte {
	return appendErrorBody(nil, typ, message)
}

func appendErrorBody(b []byte, typ, message string) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"message":`...)
	b = appendString(b, message)
	return append(b, "}}"...)
}

// EncodeMessage builds the non-streaming response for a collected answer:
// choice 0's thinking as thinking and redacted_thinking blocks, first, as
// show says (see EventEncoder.thinking), its text (and refusal) as a
// text block, its tool calls as tool_use blocks whose input is the parsed
// arguments (see toolInput).
func EncodeMessage(id, model string, r *chat.Response, show Show) *Message {
	m := &Message{ID: id, Type: "message", Role: "assistant", Model: model, Content: []ContentBlock{}, StopReason: "end_turn"}
	if len(r.Choices) > 0 {
		ch := &r.Choices[0]
		if show != ShowNone {
			m.Content = thinkingContent(m.Content, ch.Thinking, show)
		}
		if text := ch.Text + ch.Refusal; text != "" {
			m.Content = append(m.Content, ContentBlock{Type: "text", Text: &text})
		}
		for _, tc := range ch.ToolCalls {
			m.Content = append(m.Content, ContentBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
		}
		m.StopReason = StopReason(ch.FinishReason)
	}
	if r.Usage != nil {
		m.Usage = UsageFromChat(r.Usage)
	}
	return m
}

// thinkingContent appends the content blocks of a message's thinking.
func thinkingContent(out []ContentBlock, blocks []chat.ThinkingBlock, show Show) []ContentBlock {
	for i := range blocks {
		tb := &blocks[i]
		anthropic := tb.Format == chat.ThinkingAnthropic
		switch {
		case tb.Redacted != "":
			if anthropic {
				out = append(out, ContentBlock{Type: "redacted_thinking", ContentBlockThinking: ContentBlockThinking{Data: tb.Redacted}})
			}
			continue
		case show == ShowSigned && !anthropic:
			continue // nothing to show
		}
		var text, sig string
		if show == ShowAll {
			text = tb.Text
		}
		if anthropic {
			sig = tb.Signature
		}
		out = append(out, ContentBlock{Type: "thinking", ContentBlockThinking: ContentBlockThinking{Thinking: &text, Signature: &sig}})
	}
	return out
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; U+2028 and U+2029 are escaped so that the output is
// safe in JavaScript too.
func appendString(b []byte, s string) []byte { return jsonenc.AppendStringNoHTML(b, s) }
