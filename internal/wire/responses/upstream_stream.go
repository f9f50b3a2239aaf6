package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/sse"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// maxItems bounds the output_index an upstream stream may use. An answer
// has a handful of items (reasoning, a message, its function calls).
const maxItems = 4096

// upEvent is one decoded upstream event: its type and the members the
// events firstword reads carry. Nested objects are kept raw and decoded
// only for the events that need them, a level at a time: a response
// object is deep (tools and their schemas, output items and their
// content), and encoding/json's recursion costs about 0.9 KiB of stack a
// level under every frame of a stream.
type upEvent struct {
	Type        string `json:"type"`
	OutputIndex *int   `json:"output_index"`
	// SummaryIndex and ContentIndex name the part of a reasoning item a
	// reasoning delta belongs to (summary_index for a summary's text,
	// content_index for raw reasoning text).
	SummaryIndex *int            `json:"summary_index"`
	ContentIndex *int            `json:"content_index"`
	Delta        string          `json:"delta"`
	Arguments    *string         `json:"arguments"`
	Item         json.RawMessage `json:"item"`
	Response     json.RawMessage `json:"response"`
	// An error event's error: OpenAI nests it in "error"; its SDKs'
	// types put code and message at the top. Both are read.
	Error   json.RawMessage `json:"error"`
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

// reset empties e for the next event, keeping the raw members' storage:
// json.Unmarshal leaves absent members as they were.
func (e *upEvent) reset() {
	*e = upEvent{Item: e.Item[:0], Response: e.Response[:0], Error: e.Error[:0], Code: e.Code[:0]}
}

// upOutItem is an output item, as output_item.added and .done carry it;
// a message's content is not read (its text comes in deltas), nor a
// reasoning item's summary unless no delta brought it.
type upOutItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// A reasoning item's: its opaque state, when the request included
	// reasoning.encrypted_content, and its summary parts.
	EncryptedContent string       `json:"encrypted_content"`
	Summary          []upTextPart `json:"summary"`
}

// upResponse is the response object of response.created and of the
// terminal events, as far as firstword reads it.
type upResponse struct {
	Model             string          `json:"model"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails json.RawMessage `json:"incomplete_details"`
	Usage             json.RawMessage `json:"usage"`
}

// upUsage is a response's usage. input_tokens includes the cached and
// cache-written tokens and output_tokens the reasoning tokens, as
// chat.Usage wants them.
type upUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// upError is the error of a failed response or of an error event.
type upError struct {
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

type itemKind uint8

const (
	itemUnused itemKind = iota
	itemMessage
	itemCall
	itemReasoning
	itemOther // hosted tools' calls, kinds yet to come
)

// itemState is what the stream said so far of one output item.
type itemState struct {
	kind itemKind
	call int  // ordinal among the stream's function calls
	args bool // some of its arguments were sent
	text bool // some of its text (a reasoning item's: thinking) was sent
	done bool // output_item.done came
	part int  // a reasoning item's: 1 + the index of the part last sent
}

// upState decodes one stream's events into chunks.
type upState struct {
	ev        upEvent
	model     string
	modelSent bool
	items     []itemState // by output_index
	calls     int
	texts     int // message items whose text was sent
	events    int
}

// NewUpstreamStreamReader returns a pull reader of a Responses API event
// stream from an upstream (POST /responses with stream true), from r
// (chat.Pull makes it a chat.Stream); maxEventSize bounds one event (0
// means the sse package's default).
//
// output_text deltas become Chunk.Text (a message item after another
// starts with a blank line: a chat answer has one text) and refusal
// deltas Chunk.Refusal. Reasoning summary deltas (and raw reasoning text
// deltas) become Chunk.Thinking, a summary part after another of the same
// item starting with a blank line; a reasoning item's output_item.done
// ends its thinking block with a chat.Thought whose Signature is the
// item's encrypted_content (when the request included it) and ID its id.
// A function_call item becomes tool-call deltas whose Index is the item's
// ordinal among the stream's function calls (not its output_index, which
// reasoning and message items share), the first (at output_item.added)
// carrying ID (the call_id, which a function_call_output answers) and
// Name, the others Arguments; a call whose arguments came in no delta
// gets them, or {}, from its .done events. Reasoning tokens are counted in
// Usage.ReasoningTokens. Hosted tools' items and events yet to come are
// skipped.
//
// The stream ends at its terminal event: response.completed (finish stop,
// or tool_calls when the answer called a function), response.incomplete
// (max_output_tokens: length; content_filter: content_filter; another
// reason passes through) with the response's usage, or response.failed
// and the error event, which yield a *chat.Error classified by the
// error's code. A body that ends before a terminal event, or that carries
// malformed JSON, invalid UTF-8 or an oversized event, yields a
// *chat.Error of CategoryProtocol. The first chunk carries the model.
//
// A chunk is held back only while the next event is already buffered,
// and Chunk.More is set when the next chunk followed without waiting.
func NewUpstreamStreamReader(r io.Reader, maxEventSize int) *UpstreamStreamReader {
	return &UpstreamStreamReader{d: upDecoder{rd: sse.NewReader(r, maxEventSize)}}
}

// UpstreamStreamReader decodes a Responses API event stream chunk by
// chunk (see NewUpstreamStreamReader).
type UpstreamStreamReader struct {
	hb upstream.HoldBack
	d  upDecoder
}

// Release lets a later reader reuse the reader's buffer; Next then fails.
func (s *UpstreamStreamReader) Release() { s.d.rd.Release() }

// Next returns the next chunk, valid until the following call; io.EOF
// after the last; or the error that ends the stream.
func (r *UpstreamStreamReader) Next() (*chat.Chunk, error) { return r.hb.Next(&r.d) }

// upDecoder is the upstream.Stepper an UpstreamStreamReader's HoldBack
// drives.
type upDecoder struct {
	rd *sse.Reader
	s  upState
}

func (d *upDecoder) Step(c *chat.Chunk) (emit, done bool, err error) {
	ev, err := d.rd.Next()
	if err != nil {
		return false, false, upstream.ReadError(err, "no response.completed, response.incomplete or response.failed after %d events", d.s.events)
	}
	return d.s.step(ev, c)
}

func (d *upDecoder) Buffered() bool { return d.rd.EventBuffered() }

// step applies one event. It sets c to the chunk the event produced and
// reports whether it did (emit), and whether the stream is done.
func (s *upState) step(ev *sse.Event, c *chat.Chunk) (emit, done bool, err error) {
	*c = chat.Chunk{}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return false, false, nil
	}
	if string(data) == "[DONE]" {
		// OpenAI's streams end at their terminal event; servers that
		// imitate them sometimes add Chat Completions' end marker, which
		// is read only before it, as a stream cut short.
		return false, false, chat.ProtocolError(fmt.Errorf("%w: [DONE] before response.completed after %d events", chat.ErrTruncated, s.events))
	}
	s.events++
	if !utf8.Valid(data) || data[0] != '{' {
		return false, false, upstream.NotObject(data)
	}
	e := &s.ev
	e.reset()
	if err := json.Unmarshal(data, e); err != nil {
		return false, false, malformed(ev.Type, err)
	}
	typ := e.Type
	if typ == "" {
		typ = ev.Type
	}
	emit, done, err = s.apply(typ, e, data, c)
	if emit && !s.modelSent && s.model != "" {
		c.Model, s.modelSent = s.model, true
	}
	return emit, done, err
}

func (s *upState) apply(typ string, e *upEvent, data []byte, c *chat.Chunk) (emit, done bool, err error) {
	switch typ {
	case "error":
		return false, false, errorEvent(e, data)
	case "response.created", "response.in_progress", "response.queued":
		if s.model != "" || len(e.Response) == 0 {
			return false, false, nil
		}
		var resp upResponse
		if err := json.Unmarshal(e.Response, &resp); err != nil {
			return false, false, malformed(typ, err)
		}
		s.model = resp.Model
		return s.model != "", false, nil
	case "response.output_text.delta":
		if e.Delta == "" {
			return false, false, nil
		}
		c.Text = e.Delta
		if i := e.OutputIndex; i != nil && *i >= 0 && *i < len(s.items) && s.items[*i].kind == itemMessage && !s.items[*i].text {
			// A message after another (a commentary, then the final
			// answer) starts a paragraph of its own in the one text a
			// chat answer has.
			s.items[*i].text = true
			if s.texts > 0 {
				c.Text = "\n\n" + c.Text
			}
			s.texts++
		}
		return true, false, nil
	case "response.refusal.delta":
		c.Refusal = e.Delta
		return c.Refusal != "", false, nil
	case "response.reasoning_summary_text.delta":
		return s.thinking(e, e.SummaryIndex, c)
	case "response.reasoning_text.delta":
		// Raw reasoning, from the servers that show it (gpt-oss behind
		// vLLM or Ollama); OpenAI's own models send summaries only.
		return s.thinking(e, e.ContentIndex, c)
	case "response.output_item.added", "response.output_item.done":
		return s.itemEvent(typ, e, c)
	case "response.function_call_arguments.delta", "response.function_call_arguments.done":
		it, err := s.item(e.OutputIndex, typ)
		if err != nil {
			return false, false, err
		}
		if it.kind != itemCall {
			return false, false, chat.ProtocolError(fmt.Errorf("upstream sent %s for output item %d, which is not a function call", typ, *e.OutputIndex))
		}
		args := e.Delta
		if typ == "response.function_call_arguments.done" {
			// The whole arguments: sent only when no delta was.
			if it.args || e.Arguments == nil {
				return false, false, nil
			}
			args = *e.Arguments
		}
		if args == "" {
			return false, false, nil
		}
		it.args = true
		c.ToolCalls = []chat.ToolCallDelta{{Index: it.call, Arguments: args}}
		return true, false, nil
	case "response.completed", "response.incomplete":
		return s.finish(typ, e, c)
	case "response.failed":
		return false, false, failed(e)
	}
	// Summary and content parts' boundaries, .done events whose deltas
	// came, annotations, hosted tools' progress, keep-alives and event
	// types yet to come.
	return false, false, nil
}

// thinking applies a reasoning delta: a summary's text or raw reasoning
// text, of part *part of its item. The parts of one item are a
// paragraph apart, as a chat answer's messages are.
func (s *upState) thinking(e *upEvent, part *int, c *chat.Chunk) (emit, done bool, err error) {
	if e.Delta == "" {
		return false, false, nil
	}
	c.Thinking = e.Delta
	if i := e.OutputIndex; i != nil && *i >= 0 && *i < len(s.items) && s.items[*i].kind == itemReasoning {
		it := &s.items[*i]
		p := 0
		if part != nil {
			p = *part
		}
		if it.part != 0 && it.part != p+1 {
			c.Thinking = "\n\n" + c.Thinking
		}
		it.part, it.text = p+1, true
	}
	return true, false, nil
}

// item returns the state of the output item at *index for an event of
// type typ, which must have started it.
func (s *upState) item(index *int, typ string) (*itemState, error) {
	if index == nil {
		return nil, chat.ProtocolError(fmt.Errorf("upstream sent %s without an output_index", typ))
	}
	i := *index
	if i < 0 || i >= len(s.items) || s.items[i].kind == itemUnused {
		return nil, chat.ProtocolError(fmt.Errorf("upstream sent %s for output item %d, which was not added", typ, i))
	}
	return &s.items[i], nil
}

// itemEvent applies output_item.added or output_item.done.
func (s *upState) itemEvent(typ string, e *upEvent, c *chat.Chunk) (emit, done bool, err error) {
	if e.OutputIndex == nil {
		return false, false, chat.ProtocolError(fmt.Errorf("upstream sent %s without an output_index", typ))
	}
	i := *e.OutputIndex
	if i < 0 || i >= maxItems {
		return false, false, chat.ProtocolError(fmt.Errorf("upstream sent output_index %d", i))
	}
	var item upOutItem
	if err := json.Unmarshal(e.Item, &item); err != nil {
		return false, false, malformed(typ, err)
	}
	if i >= len(s.items) {
		s.items = append(s.items, make([]itemState, i+1-len(s.items))...)
	}
	it := &s.items[i]
	added := typ == "response.output_item.added"
	switch {
	case added && it.kind != itemUnused:
		return false, false, chat.ProtocolError(fmt.Errorf("upstream added output item %d twice", i))
	case !added && it.done:
		return false, false, chat.ProtocolError(fmt.Errorf("upstream finished output item %d twice", i))
	}
	it.done = !added
	if it.kind == itemUnused {
		// An item that is done without having been added is taken whole.
		switch item.Type {
		case "function_call":
			if s.calls >= chat.MaxToolCalls {
				return false, false, chat.ProtocolError(fmt.Errorf("upstream sent more than %d function calls", chat.MaxToolCalls))
			}
			it.kind, it.call = itemCall, s.calls
			s.calls++
			id := item.CallID
			if id == "" {
				id = item.ID
			}
			c.ToolCalls = []chat.ToolCallDelta{{Index: it.call, ID: id, Name: item.Name, Arguments: item.Arguments}}
			it.args = item.Arguments != ""
			if !added && !it.args {
				c.ToolCalls[0].Arguments, it.args = "{}", true
			}
			return true, false, nil
		case "message":
			it.kind = itemMessage
		case "reasoning":
			it.kind = itemReasoning
			if !added {
				return s.reasoningDone(it, &item, c)
			}
		default:
			it.kind = itemOther
		}
		return false, false, nil
	}
	if it.kind == itemReasoning && !added {
		return s.reasoningDone(it, &item, c)
	}
	if it.kind == itemCall && !it.args {
		// A call whose arguments came in no delta: the item has them.
		args := item.Arguments
		if args == "" {
			args = "{}"
		}
		it.args = true
		c.ToolCalls = []chat.ToolCallDelta{{Index: it.call, Arguments: args}}
		return true, false, nil
	}
	return false, false, nil
}

// reasoningDone applies a reasoning item's output_item.done: its
// encrypted_content ends the thinking block as its signature, with the
// item's id, so that the block can go back upstream in the next turn
// (see EncodeUpstreamRequest). Its summary is sent here only when no
// delta sent it (a server that sends the item whole).
func (s *upState) reasoningDone(it *itemState, item *upOutItem, c *chat.Chunk) (emit, done bool, err error) {
	if !it.text {
		for i, p := range item.Summary {
			if p.Text == "" {
				continue
			}
			if c.Thinking != "" {
				c.Thinking += "\n\n"
			}
			c.Thinking += p.Text
			it.part, it.text = i+1, true
		}
	}
	if item.EncryptedContent != "" {
		c.Thought = &chat.Thought{Signature: item.EncryptedContent, Format: chat.ThinkingResponses, ID: item.ID}
	}
	return c.Thinks(), false, nil
}

// finish applies a terminal event: the finish reason and the usage.
func (s *upState) finish(typ string, e *upEvent, c *chat.Chunk) (emit, done bool, err error) {
	var resp upResponse
	if len(e.Response) > 0 {
		if err := json.Unmarshal(e.Response, &resp); err != nil {
			return false, false, malformed(typ, err)
		}
	}
	if s.model == "" {
		s.model = resp.Model
	}
	if typ == "response.completed" {
		c.FinishReason = chat.FinishStop
		if s.calls > 0 {
			c.FinishReason = chat.FinishToolCalls
		}
	} else {
		var details struct {
			Reason string `json:"reason"`
		}
		if len(resp.IncompleteDetails) > 0 {
			if err := json.Unmarshal(resp.IncompleteDetails, &details); err != nil {
				return false, false, malformed(typ, err)
			}
		}
		c.FinishReason = IncompleteReason(details.Reason)
	}
	if u := bytes.TrimSpace(resp.Usage); len(u) > 0 && string(u) != "null" {
		var uu upUsage
		if err := json.Unmarshal(u, &uu); err != nil {
			return false, false, malformed(typ, err)
		}
		c.Usage = &chat.Usage{
			InputTokens:       uu.InputTokens,
			OutputTokens:      uu.OutputTokens,
			CachedInputTokens: uu.InputTokensDetails.CachedTokens,
			CacheWriteTokens:  uu.InputTokensDetails.CacheWriteTokens,
			ReasoningTokens:   uu.OutputTokensDetails.ReasoningTokens,
		}
	}
	// Calls whose arguments never came get the empty object, so that
	// every call the client sees has JSON arguments.
	for i := range s.items {
		if it := &s.items[i]; it.kind == itemCall && !it.args {
			it.args = true
			c.ToolCalls = append(c.ToolCalls, chat.ToolCallDelta{Index: it.call, Arguments: "{}"})
		}
	}
	return true, true, nil
}

// IncompleteReason maps response.incomplete's incomplete_details.reason
// onto a finish reason: max_output_tokens (and a missing reason: the
// answer was cut) is length, content_filter is content_filter; others
// pass through.
func IncompleteReason(reason string) chat.FinishReason {
	switch reason {
	case "", "max_output_tokens":
		return chat.FinishLength
	case "content_filter":
		return chat.FinishContentFilter
	}
	return chat.FinishReason(reason)
}

// failed is response.failed's error.
func failed(e *upEvent) error {
	var resp upResponse
	if len(e.Response) > 0 {
		if err := json.Unmarshal(e.Response, &resp); err != nil {
			return malformed("response.failed", err)
		}
	}
	var ue upError
	if eb := bytes.TrimSpace(resp.Error); len(eb) > 0 && string(eb) != "null" {
		if err := json.Unmarshal(eb, &ue); err != nil {
			return malformed("response.failed", err)
		}
	}
	if ue.Message == "" && len(ue.Code) == 0 {
		return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Retryable: true, Message: "the upstream reported the response failed, without an error"}
	}
	return streamError(&ue)
}

// errorEvent is an error event's error, nested in "error" or at the top.
func errorEvent(e *upEvent, data []byte) error {
	ue := upError{Code: e.Code, Message: e.Message}
	if eb := bytes.TrimSpace(e.Error); len(eb) > 0 && eb[0] == '{' {
		if err := json.Unmarshal(eb, &ue); err != nil {
			return malformed("error", err)
		}
	}
	if ue.Message == "" && codeString(ue.Code) == "" {
		return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Retryable: true, Message: "upstream error event: " + upstream.Excerpt(string(data), 200)}
	}
	return streamError(&ue)
}

// codeString is an error code: a string, or the text of another JSON
// value (some servers send numbers); "" for null or none.
func codeString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// streamError classifies an error reported inside a stream by its code
// (and type): Chat Completions' codes, which the Responses API shares,
// and its own (response.failed's error.code).
func streamError(ue *upError) *chat.Error {
	code, typ := codeString(ue.Code), ue.Type
	cat, retry := chat.CategoryUpstreamUnavailable, true
	switch {
	case code == "rate_limit_exceeded" || typ == "rate_limit_error" || typ == "tokens" || typ == "requests":
		cat = chat.CategoryRateLimited
	case code == "insufficient_quota" || typ == "insufficient_quota":
		// Retrying will not help until someone pays; another deployment
		// may.
		cat, retry = chat.CategoryRateLimited, false
	case code == "context_length_exceeded" || code == "string_above_max_length":
		cat, retry = chat.CategoryContextLength, false
	case code == "content_filter" || code == "content_policy_violation" || code == "invalid_prompt" ||
		code == "bio_policy" || code == "misalignment_policy_violation" || code == "image_content_policy_violation":
		// invalid_prompt is the Responses API's "your prompt was flagged
		// as potentially violating our usage policy".
		cat, retry = chat.CategoryContentFilter, false
	case code == "invalid_api_key" || typ == "authentication_error":
		cat, retry = chat.CategoryAuth, false
	case code == "model_not_found":
		cat, retry = chat.CategoryNotFound, false
	case typ == "overloaded_error" || code == "overloaded" || code == "server_is_overloaded":
		cat = chat.CategoryOverloaded
	case code == "vector_store_timeout":
		cat = chat.CategoryTimeout
	case typ == "invalid_request_error" || strings.HasPrefix(code, "invalid_") || strings.HasPrefix(code, "image_") ||
		code == "empty_image_file" || code == "unsupported_image_media_type" || code == "failed_to_download_image":
		cat, retry = chat.CategoryInvalidRequest, false
	}
	msg := ue.Message
	if msg == "" {
		msg = "upstream error: " + code
	}
	ce := &chat.Error{Category: cat, Message: msg, Retryable: retry}
	if code == chat.CodeInsufficientQuota || typ == chat.CodeInsufficientQuota {
		ce.Code = chat.CodeInsufficientQuota
	}
	return ce
}

func malformed(typ string, err error) error {
	if typ == "" {
		return chat.ProtocolError(fmt.Errorf("upstream sent a malformed event: %v", err))
	}
	return chat.ProtocolError(fmt.Errorf("upstream sent a malformed %s event: %v", typ, err))
}
