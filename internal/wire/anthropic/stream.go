package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/sse"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// maxBlocks bounds the content block indexes a stream may use. Answers
// with server tools and citations use a few dozen.
const maxBlocks = 4096

// maxSignature bounds the thinking signatures of a stream, joined from
// their deltas (Anthropic's are a few KiB, in one delta), and
// maxSignatureParts the deltas of one signature: joining many small
// pieces would cost their count times the signature's size.
const (
	maxSignature      = 1 << 20
	maxSignatureParts = 64
)

// noIndex marks an event without an index field.
const noIndex = -1

// event is one decoded stream event. Delta is a value, not a pointer, so
// that decoding a content_block_delta allocates nothing but its text.
type event struct {
	Type         string        `json:"type"`
	Index        int           `json:"index"`
	Message      *startMessage `json:"message"`
	ContentBlock *startBlock   `json:"content_block"`
	Delta        eventDelta    `json:"delta"`
	Usage        *streamUsage  `json:"usage"`
	Error        *ErrorBody    `json:"error"`
}

// startMessage is message_start's message, empty but for its model and
// usage.
type startMessage struct {
	Model string       `json:"model"`
	Usage *streamUsage `json:"usage"`
}

// startBlock is content_block_start's content_block.
type startBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// thinking and redacted_thinking
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
}

// eventDelta is the delta of content_block_delta and of message_delta.
type eventDelta struct {
	Type        string  `json:"type"`
	Text        string  `json:"text"`
	PartialJSON string  `json:"partial_json"`
	Thinking    string  `json:"thinking"`
	Signature   string  `json:"signature"`
	StopReason  *string `json:"stop_reason"`
}

// streamUsage is a usage object whose counts may each be absent:
// message_delta's carries output_tokens and, in newer versions, repeats
// the input counts.
type streamUsage struct {
	InputTokens              *int `json:"input_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	// OutputTokensDetails.ThinkingTokens is the part of OutputTokens
	// spent thinking (newer API versions).
	OutputTokensDetails *struct {
		ThinkingTokens *int `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// NormalizeStopReason maps an Anthropic stop_reason onto firstword's
// finish reasons. pause_turn (a server-tool loop paused; the client may
// send the turn back to continue) ends the answer as far as a chat client
// is concerned, so it is a stop; model_context_window_exceeded is a
// length. Unknown values pass through unchanged.
func NormalizeStopReason(s string) chat.FinishReason {
	switch s {
	case "end_turn", "stop_sequence", "pause_turn":
		return chat.FinishStop
	case "max_tokens", "model_context_window_exceeded":
		return chat.FinishLength
	case "tool_use":
		return chat.FinishToolCalls
	case "refusal":
		return chat.FinishContentFilter
	}
	return chat.FinishReason(s)
}

type blockKind uint8

const (
	blockUnused blockKind = iota
	blockText
	blockTool
	blockThinking
	blockOther // redacted thinking, server tools, citations, kinds yet to come
)

// block is the state of one content block of the stream.
type block struct {
	kind  blockKind
	open  bool
	tool  int  // ordinal among the stream's tool_use blocks
	args  bool // a non-empty input_json_delta arrived
	parts int  // signature_delta events of a thinking block
	// input is content_block_start's input when it was not empty: sent as
	// the arguments at message_stop if no delta came. For a thinking
	// block it is the signature so far, sent when the block stops.
	input string
}

// streamState decodes one stream's events into chunks.
type streamState struct {
	ev       event
	started  bool
	signed   int // bytes of thinking signatures so far
	model    string
	blocks   []block
	tools    int
	finish   chat.FinishReason
	hasUsage bool
	in       int // input_tokens, without the cache's
	cacheR   int
	cacheW   int
	out      int
	thought  int // output_tokens_details.thinking_tokens
	events   int
}

// NewStreamReader returns a pull reader of an upstream's Messages API
// event stream from r (chat.Pull makes it a chat.Stream).
//
// Text deltas become Chunk.Text; a tool_use block becomes tool-call deltas
// whose Index is the block's ordinal among the stream's tool_use blocks,
// the first carrying ID and Name and the others Arguments (a call whose
// input came in no delta gets {}, or the start's input, with the finish).
// A thinking block's text becomes Chunk.Thinking, and its signature a
// Chunk.Thought when the block stops (a signed block without text is
// still one); a redacted_thinking block is a Thought with its data.
// Other blocks are skipped. The finish reason and the usage
// (input tokens include the cache's) are held back
// until message_stop, so that a stream that breaks after message_delta is
// still reported as broken: a stream that ends without message_stop, or
// that carries malformed JSON, invalid UTF-8, an oversized event or
// events out of order, yields a *chat.Error of CategoryProtocol, and an
// error event a *chat.Error classified by its type. The first chunk
// carries the model, and message_start's usage as Chunk.UsageSoFar.
//
// A chunk is held back only while the next event is already buffered,
// and Chunk.More is set when the next chunk followed without waiting.
func NewStreamReader(r io.Reader, maxEventSize int) *StreamReader {
	return &StreamReader{d: decoder{rd: sse.NewReader(r, maxEventSize)}}
}

// StreamReader decodes a Messages API event stream chunk by chunk (see
// NewStreamReader).
type StreamReader struct {
	hb upstream.HoldBack
	d  decoder
}

// Release lets a later reader reuse the reader's buffer; Next then fails.
func (s *StreamReader) Release() { s.d.rd.Release() }

// Next returns the next chunk, valid until the following call; io.EOF
// after the last; or the error that ends the stream.
func (r *StreamReader) Next() (*chat.Chunk, error) { return r.hb.Next(&r.d) }

// decoder is the upstream.Stepper a StreamReader's HoldBack drives.
type decoder struct {
	rd *sse.Reader
	s  streamState
}

func (d *decoder) Step(c *chat.Chunk) (emit, done bool, err error) {
	ev, err := d.nextEvent()
	if err != nil {
		return false, false, upstream.ReadError(err, "no message_stop after %d events", d.s.events)
	}
	return d.s.step(ev, c)
}

func (d *decoder) Buffered() bool { return d.rd.EventBuffered() }

// step applies one event. It sets c to the chunk the event produced and
// reports whether it did (emit), and whether the stream is done.
func (s *streamState) step(ev *sse.Event, c *chat.Chunk) (emit, done bool, err error) {
	*c = chat.Chunk{}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return false, false, nil
	}
	s.events++
	if ev.Type == "error" {
		return false, false, decodeErrorEvent(data)
	}
	if !utf8.Valid(data) || data[0] != '{' {
		return false, false, upstream.NotObject(data)
	}
	e := &s.ev
	if err := decodeEvent(data, e); err != nil {
		return false, false, chat.ProtocolError(fmt.Errorf("upstream sent a malformed %s event: %v", ev.Type, err))
	}
	typ := e.Type
	if typ == "" {
		typ = ev.Type
	}
	switch typ {
	case "ping":
		return false, false, nil
	case "error":
		return false, false, errorFromBody(0, e.Error, data)
	case "message_start":
		if s.started {
			return false, false, chat.ProtocolError(errors.New("upstream sent a second message_start"))
		}
		s.started = true
		if m := e.Message; m != nil {
			s.model = m.Model
			s.addUsage(m.Usage)
		}
		c.Model = s.model
		// Its input counts are final: passed on now, so that a stream
		// that breaks or is cancelled is billed them.
		c.UsageSoFar = s.usage()
		return s.model != "" || c.UsageSoFar != nil, false, nil
	case "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop":
		if !s.started {
			return false, false, chat.ProtocolError(fmt.Errorf("upstream sent %s before message_start", typ))
		}
	default:
		// New event types may be added to the API; they are skipped.
		return false, false, nil
	}

	switch typ {
	case "content_block_start":
		b, err := s.startBlock(e.Index)
		if err != nil {
			return false, false, err
		}
		cb := e.ContentBlock
		if cb == nil {
			return false, false, chat.ProtocolError(fmt.Errorf("upstream sent content_block_start %d without a content_block", e.Index))
		}
		switch cb.Type {
		case "text":
			b.kind = blockText
			c.Text = cb.Text
			return c.Text != "", false, nil
		case "thinking":
			b.kind, b.input = blockThinking, cb.Signature
			c.Thinking = cb.Thinking
			return c.Thinking != "", false, nil
		case "redacted_thinking":
			b.kind = blockOther
			if cb.Data == "" {
				return false, false, nil
			}
			c.Thought = &chat.Thought{Redacted: cb.Data, Format: chat.ThinkingAnthropic}
			return true, false, nil
		case "tool_use":
			if s.tools >= chat.MaxToolCalls {
				return false, false, chat.ProtocolError(fmt.Errorf("upstream sent more than %d tool calls", chat.MaxToolCalls))
			}
			b.kind, b.tool = blockTool, s.tools
			s.tools++
			if in := bytes.TrimSpace(cb.Input); len(in) > 0 && string(in) != "null" && string(in) != "{}" {
				b.input = string(in)
			}
			c.ToolCalls = []chat.ToolCallDelta{{Index: b.tool, ID: cb.ID, Name: cb.Name}}
			return true, false, nil
		default:
			b.kind = blockOther
		}
	case "content_block_delta":
		// A delta for a stopped block is taken, as Anthropic's SDKs take
		// it: EventEncoder sends one when an upstream interleaves calls.
		b, err := s.block(e.Index, "content_block_delta")
		if err != nil {
			return false, false, err
		}
		d := &e.Delta
		switch {
		case b.kind == blockText && d.Type == "text_delta":
			c.Text = d.Text
			return c.Text != "", false, nil
		case b.kind == blockTool && d.Type == "input_json_delta" && d.PartialJSON != "":
			b.args = true
			c.ToolCalls = []chat.ToolCallDelta{{Index: b.tool, Arguments: d.PartialJSON}}
			return true, false, nil
		case b.kind == blockThinking && d.Type == "thinking_delta":
			c.Thinking = d.Thinking
			return c.Thinking != "", false, nil
		case b.kind == blockThinking && d.Type == "signature_delta":
			// Held until the block stops: Anthropic's SDKs append a
			// block's signature deltas, so the last is not the whole.
			s.signed += len(d.Signature)
			b.parts++
			if s.signed > maxSignature || b.parts > maxSignatureParts {
				return false, false, chat.ProtocolError(fmt.Errorf("upstream sent thinking signatures over %d bytes, or one in over %d pieces", maxSignature, maxSignatureParts))
			}
			b.input += d.Signature
		}
	case "content_block_stop":
		b, err := s.block(e.Index, "content_block_stop")
		if err != nil {
			return false, false, err
		}
		if !b.open {
			return false, false, chat.ProtocolError(fmt.Errorf("upstream stopped content block %d twice", e.Index))
		}
		b.open = false
		if b.kind == blockThinking && b.input != "" {
			c.Thought = &chat.Thought{Signature: b.input, Format: chat.ThinkingAnthropic}
			b.input = ""
			return true, false, nil
		}
	case "message_delta":
		if r := e.Delta.StopReason; r != nil && *r != "" {
			s.finish = NormalizeStopReason(*r)
		}
		s.addUsage(e.Usage)
	case "message_stop":
		// Tool calls whose input came in no delta get the start's input,
		// or the empty object, with the finish.
		for i := range s.blocks {
			if b := &s.blocks[i]; b.kind == blockTool && !b.args {
				args := b.input
				if args == "" {
					args = "{}"
				}
				c.ToolCalls = append(c.ToolCalls, chat.ToolCallDelta{Index: b.tool, Arguments: args})
			}
		}
		c.FinishReason = s.finish
		if c.FinishReason == "" {
			// message_stop is an explicit, complete end even without a
			// stop_reason.
			c.FinishReason = chat.FinishStop
		}
		c.Usage = s.usage()
		return true, true, nil
	}
	return false, false, nil
}

// startBlock claims the block at index i for a content_block_start.
func (s *streamState) startBlock(i int) (*block, error) {
	if i < 0 || i >= maxBlocks {
		return nil, chat.ProtocolError(fmt.Errorf("upstream sent content block index %d", i))
	}
	if i >= len(s.blocks) {
		s.blocks = append(s.blocks, make([]block, i+1-len(s.blocks))...)
	}
	b := &s.blocks[i]
	if b.kind != blockUnused {
		return nil, chat.ProtocolError(fmt.Errorf("upstream started content block %d twice", i))
	}
	b.open = true
	return b, nil
}

// block returns the started block at index i.
func (s *streamState) block(i int, what string) (*block, error) {
	if i < 0 || i >= len(s.blocks) || s.blocks[i].kind == blockUnused {
		return nil, chat.ProtocolError(fmt.Errorf("upstream sent %s for content block %d, which was not started", what, i))
	}
	return &s.blocks[i], nil
}

// addUsage folds a usage object in: each count present replaces the last
// one (message_delta's counts are cumulative).
func (s *streamState) addUsage(u *streamUsage) {
	if u == nil {
		return
	}
	s.hasUsage = true
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.in, u.InputTokens)
	set(&s.cacheR, u.CacheReadInputTokens)
	set(&s.cacheW, u.CacheCreationInputTokens)
	set(&s.out, u.OutputTokens)
	if d := u.OutputTokensDetails; d != nil {
		set(&s.thought, d.ThinkingTokens)
	}
}

// usage returns the totals: firstword's input tokens include the cache's.
func (s *streamState) usage() *chat.Usage {
	if !s.hasUsage {
		return nil
	}
	return &chat.Usage{
		InputTokens:       s.in + s.cacheR + s.cacheW,
		OutputTokens:      s.out,
		CachedInputTokens: s.cacheR,
		CacheWriteTokens:  s.cacheW,
		ReasoningTokens:   s.thought,
	}
}

// decodeErrorEvent classifies an error event, whatever its data holds.
func decodeErrorEvent(data []byte) error {
	var env struct {
		Error *ErrorBody `json:"error"`
	}
	if json.Unmarshal(data, &env) == nil && env.Error != nil {
		return errorFromBody(0, env.Error, data)
	}
	return errorFromBody(0, nil, data)
}

// errorFromBody classifies an error object; raw is shown when there is
// none.
func errorFromBody(status int, eb *ErrorBody, raw []byte) *chat.Error {
	if eb == nil || (eb.Type == "" && eb.Message == "") {
		cat, retry := chat.CategoryForStatus(status)
		if status == 0 {
			cat, retry = chat.CategoryUpstreamUnavailable, true
		}
		msg := upstream.Excerpt(string(bytes.TrimSpace(raw)), 200)
		if msg == "" {
			msg = fmt.Sprintf("upstream answered %d", status)
		}
		return &chat.Error{Category: cat, Status: status, Message: msg, Retryable: retry}
	}
	cat, retry := classify(status, eb.Type, eb.Message)
	msg := eb.Message
	if msg == "" {
		msg = eb.Type
	}
	ce := &chat.Error{Category: cat, Status: status, Message: msg, Retryable: retry}
	if eb.Type == "billing_error" {
		ce.Code = chat.CodeInsufficientQuota
	}
	return ce
}

// classify maps an Anthropic error type onto a category; an unknown type
// falls back on the HTTP status (none, mid-stream: the upstream failed).
func classify(status int, typ, msg string) (chat.Category, bool) {
	switch typ {
	case "overloaded_error":
		return chat.CategoryOverloaded, true
	case "rate_limit_error":
		return chat.CategoryRateLimited, true
	case "api_error":
		return chat.CategoryUpstreamUnavailable, true
	case "timeout_error":
		return chat.CategoryTimeout, true
	case "invalid_request_error":
		if contextTooLong(msg) {
			return chat.CategoryContextLength, false
		}
		return chat.CategoryInvalidRequest, false
	case "authentication_error", "permission_error":
		return chat.CategoryAuth, false
	case "billing_error":
		// As OpenAI's insufficient_quota: this account cannot pay.
		return chat.CategoryRateLimited, false
	case "not_found_error":
		return chat.CategoryNotFound, false
	case "request_too_large":
		return chat.CategoryContextLength, false
	}
	if status == 0 {
		return chat.CategoryUpstreamUnavailable, true
	}
	return chat.CategoryForStatus(status)
}

// contextTooLong recognises the invalid_request_error messages Anthropic
// sends when the prompt does not fit the context window.
func contextTooLong(msg string) bool {
	return strings.HasPrefix(msg, "prompt is too long") || strings.Contains(msg, "exceed context limit")
}

// DecodeError classifies an upstream's non-2xx response, whose body is
// normally {"type":"error","error":{"type":...,"message":...}}. A body
// that is not falls back on the status (529 is overloaded).
func DecodeError(status int, body []byte) *chat.Error {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		var eb ErrorBody
		if json.Unmarshal(env.Error, &eb) == nil && (eb.Type != "" || eb.Message != "") {
			return errorFromBody(status, &eb, body)
		}
		var s string
		if json.Unmarshal(env.Error, &s) == nil && s != "" {
			cat, retry := chat.CategoryForStatus(status)
			return &chat.Error{Category: cat, Status: status, Message: s, Retryable: retry}
		}
	}
	return errorFromBody(status, nil, body)
}
