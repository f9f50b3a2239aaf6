package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/sse"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// Usage is the usage object of a response or of the usage-only chunk.
type Usage struct {
	PromptTokens            int                      `json:"prompt_tokens"`
	CompletionTokens        int                      `json:"completion_tokens"`
	TotalTokens             int                      `json:"total_tokens"`
	PromptTokensDetails     *PromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails breaks prompt tokens down.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// CompletionTokensDetails breaks completion tokens down.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

func (u *Usage) toChat() *chat.Usage {
	out := &chat.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedInputTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// UsageFromChat encodes usage for a client.
func UsageFromChat(u *chat.Usage) *Usage {
	return &Usage{
		PromptTokens:            u.InputTokens,
		CompletionTokens:        u.OutputTokens,
		TotalTokens:             u.InputTokens + u.OutputTokens,
		PromptTokensDetails:     &PromptTokensDetails{CachedTokens: u.CachedInputTokens},
		CompletionTokensDetails: &CompletionTokensDetails{ReasoningTokens: u.ReasoningTokens},
	}
}

// ErrorBody is the error object of an error response or error event.
type ErrorBody struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Param   *string         `json:"param"`
	Code    json.RawMessage `json:"code"`
}

// chunk is a chat.completion.chunk as received from an upstream.
type chunk struct {
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage"`
	Error   *ErrorBody    `json:"error"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
	finish       string  // what FinishReason points to, from the fast decoder
}

type delta struct {
	Content *string `json:"content"`
	Refusal *string `json:"refusal"`
	// The model's thinking: reasoning_content at DeepSeek, vLLM (before
	// 0.10), llama.cpp and most servers that copied DeepSeek; reasoning at
	// OpenRouter, Groq and newer vLLM. OpenRouter's reasoning_details
	// repeats reasoning's text (or carries encrypted data only an
	// upstream of the same family can read) and is not read.
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
	// What the pointers point to, from the fast decoder: kept in the
	// reused chunk rather than allocated per chunk.
	content, refusal, reasoningContent, reasoning string
}

// thinking is the delta's thinking text: reasoning_content, or reasoning
// when that is empty (a server that sends both sends the same text).
func (d *delta) thinking() string {
	if d.ReasoningContent != nil && *d.ReasoningContent != "" {
		return *d.ReasoningContent
	}
	if d.Reasoning != nil {
		return *d.Reasoning
	}
	return ""
}

type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// NormalizeFinishReason maps OpenAI-compatible finish reasons onto
// firstword's; unknown values pass through unchanged.
func NormalizeFinishReason(s string) chat.FinishReason {
	switch s {
	case "stop", "eos", "end_turn", "stop_sequence":
		return chat.FinishStop
	case "length", "max_tokens":
		return chat.FinishLength
	case "tool_calls", "function_call", "tool_use":
		return chat.FinishToolCalls
	case "content_filter":
		return chat.FinishContentFilter
	}
	return chat.FinishReason(s)
}

// NewStreamReader returns a pull reader of an upstream's Chat Completions
// event stream from r (chat.Pull makes it a chat.Stream).
//
// Finish reasons are held back until the stream's end ([DONE]) and then
// yielded with the usage, so a stream that breaks after its finish reason
// is still reported as broken rather than as complete. The usage of the
// last usage-bearing chunk wins (some servers report usage on every chunk);
// each is also passed on as it arrives, as Chunk.UsageSoFar (on a chunk of
// its own when its event has nothing else to yield), so that a stream that
// breaks before [DONE] is billed what the upstream reported.
// A stream that ends without [DONE], or that carries truncated JSON,
// invalid UTF-8 or an oversized event, yields a protocol error.
func NewStreamReader(r io.Reader, maxEventSize int) *StreamReader {
	return &StreamReader{rd: newEventReader(r, maxEventSize)}
}

// StreamReader decodes a Chat Completions event stream chunk by chunk
// (see NewStreamReader).
//
// One event can hold several choices (n > 1), each its own chat.Chunk, so
// the reader keeps the decoded event (c) and hands its choices out one
// call at a time; c, its choices and out are reused from event to event,
// which is what keeps a token's path free of allocations beyond its text.
type StreamReader struct {
	rd     *sse.Reader
	c      chunk // the event being yielded, choice by choice
	choice int   // the next choice of c to look at
	more   bool  // another event is already buffered
	// held are the finish reasons, one chunk per choice, yielded only
	// after [DONE]: an upstream that stops after its finish reason but
	// before [DONE] was cut, and its answer must not look complete.
	held      []chat.Chunk
	usage     *chat.Usage
	soFar     bool // usage came that no chunk has carried yet
	model     string
	modelSent bool
	chunks    int
	done      bool // [DONE] seen: yielding held
	out       chat.Chunk
	ending    upstream.Ending
}

// Release lets a later reader reuse the reader's buffer; Next then fails.
func (s *StreamReader) Release() { s.rd.Release() }

// Next returns the next chunk, io.EOF after the last, or the error that
// ends the stream. The chunk is the reader's own, valid until the next
// call.
//
// The ending is sticky (upstream.Ending).
func (s *StreamReader) Next() (*chat.Chunk, error) {
	if err := s.ending.Ended(); err != nil {
		return nil, err
	}
	return s.ending.Keep(s.next())
}

// next yields, in order: after [DONE], the held finish reasons (the last
// with the usage); otherwise the next choice of the current event that
// has something to say; otherwise usage that arrived alone; otherwise it
// reads the next event.
func (s *StreamReader) next() (*chat.Chunk, error) {
	for {
		if s.done {
			if len(s.held) == 0 {
				return nil, io.EOF
			}
			s.out = s.held[0]
			s.held = s.held[1:]
			if len(s.held) == 0 {
				s.out.Usage = s.usage
			}
			// [DONE] is read: the next chunk, or the end, is here.
			s.out.More = true
			return &s.out, nil
		}
		for s.choice < len(s.c.Choices) {
			i := s.choice
			s.choice++
			ch := &s.c.Choices[i]
			// Indexes are bounded because they size slices downstream
			// (the encoders' per-choice state): an upstream must not be
			// able to make the gateway allocate at will.
			if ch.Index < 0 || ch.Index >= chat.MaxChoices {
				return nil, chat.ProtocolError(fmt.Errorf("upstream sent choice index %d", ch.Index))
			}
			s.out = chat.Chunk{Choice: ch.Index}
			out := &s.out
			if !s.modelSent && s.model != "" {
				// The first chunk after the model is known (Azure's
				// first chunk carries none).
				out.Model, s.modelSent = s.model, true
			}
			if ch.Delta.Content != nil {
				out.Text = *ch.Delta.Content
			}
			if ch.Delta.Refusal != nil {
				out.Refusal = *ch.Delta.Refusal
			}
			out.Thinking = ch.Delta.thinking()
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index >= chat.MaxToolCalls {
					return nil, chat.ProtocolError(fmt.Errorf("upstream sent tool call index %d", tc.Index))
				}
				out.ToolCalls = append(out.ToolCalls, chat.ToolCallDelta{Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				// Some servers repeat it on a later chunk.
				s.held = upstream.Hold(s.held, ch.Index, NormalizeFinishReason(*ch.FinishReason))
			}
			// A choice with nothing visible (a role-only delta, a bare
			// finish reason, now held) yields no chunk, unless it is the
			// first to carry the model or it carries thinking.
			if out.Visible() || out.Model != "" || out.Thinking != "" {
				// More: the next chunk is already here, either another
				// choice of this event or the next event, buffered.
				out.More = s.more || s.choice < len(s.c.Choices)
				if s.soFar {
					out.UsageSoFar, s.soFar = s.usage, false
				}
				return out, nil
			}
		}
		if s.soFar {
			// Usage with nothing else to carry it: passed on now as
			// UsageSoFar, so that it is billed if [DONE] never comes.
			s.soFar = false
			s.out = chat.Chunk{UsageSoFar: s.usage, More: s.more}
			return &s.out, nil
		}
		if err := s.event(); err != nil {
			return nil, err
		}
	}
}

// event reads and decodes the next event into s.c, or notes [DONE].
func (s *StreamReader) event() error {
	for {
		ev, err := s.nextEvent()
		if err != nil {
			return err
		}
		data := ev.Data
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, doneMarker) {
			// [DONE] with no chunk before it is a server that failed
			// before answering and closed politely: not an empty answer.
			if s.chunks == 0 {
				return chat.ProtocolError(fmt.Errorf("%w: the end marker came before any chunk", chat.ErrTruncated))
			}
			// No finish reason to carry the usage: an empty chunk does,
			// so that it still comes with the stream's last chunk.
			if len(s.held) == 0 && s.usage != nil {
				s.held = append(s.held, chat.Chunk{})
			}
			s.done = true
			return nil
		}
		if ev.Type == "error" {
			return decodeErrorEvent(data)
		}
		if !utf8.Valid(data) {
			return chat.ProtocolError(errors.New("upstream sent invalid UTF-8"))
		}
		// decodeChunk resets s.c but keeps its storage (choices and
		// model) for this chunk: nothing handed out points into it.
		s.choice = 0
		if err := decodeChunk(data, &s.c); err != nil {
			return chat.ProtocolError(fmt.Errorf("upstream sent a malformed chunk: %v", err))
		}
		s.chunks++
		// An error object inside a chunk, after the 200: servers that
		// fail mid-stream (vLLM, llama.cpp) report it this way.
		if s.c.Error != nil {
			return errorFromBody(0, s.c.Error)
		}
		if s.c.Usage != nil {
			s.usage, s.soFar = s.c.Usage.toChat(), true
		}
		if s.model == "" && s.c.Model != "" {
			s.model = s.c.Model
		}
		// Whether the next event is already here is asked once per
		// event: its choices are then handed out without reading.
		s.more = s.rd.EventBuffered()
		return nil
	}
}

var doneMarker = []byte("[DONE]")

// hasErrorMessage reports whether an "error" member says something: an
// object with a message, or a non-empty string ("error": null, "" or {}
// beside a valid completion is not a failure).
func hasErrorMessage(raw json.RawMessage) bool {
	var o struct {
		Message string `json:"message"`
	}
	var str string
	return len(raw) > 0 && (json.Unmarshal(raw, &o) == nil && o.Message != "" || json.Unmarshal(raw, &str) == nil && str != "")
}

// decodeErrorEvent classifies an "event: error" event: its data is an
// error object, wrapped in {"error": ...} as OpenAI writes it or bare as
// some servers do. Anything else is still an error, of an unavailable
// upstream, retryable: the event's name says the upstream gave up.
func decodeErrorEvent(data []byte) error {
	var env struct {
		Error *ErrorBody `json:"error"`
	}
	if json.Unmarshal(data, &env) == nil && env.Error != nil {
		return errorFromBody(0, env.Error)
	}
	var body ErrorBody
	if json.Unmarshal(data, &body) == nil && body.Message != "" {
		return errorFromBody(0, &body)
	}
	return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "upstream error event: " + upstream.Excerpt(string(data), 200), Retryable: true}
}

// DecodeError classifies an upstream's non-2xx response.
func DecodeError(status int, body []byte) *chat.Error {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		var eb ErrorBody
		if json.Unmarshal(env.Error, &eb) == nil && eb.Message != "" {
			return errorFromBody(status, &eb)
		}
		var s string
		if json.Unmarshal(env.Error, &s) == nil && s != "" {
			return errorFromBody(status, &ErrorBody{Message: s})
		}
	}
	cat, retry := chat.CategoryForStatus(status)
	msg := upstream.Excerpt(string(bytes.TrimSpace(body)), 200)
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d", status)
	}
	return &chat.Error{Category: cat, Status: status, Message: msg, Retryable: retry}
}

// errorFromBody classifies an error object: by the HTTP status first, then
// by what the object's code and type say, which is more precise (a 400
// can be a prompt over the context window, which is not worth retrying
// elsewhere with the same prompt, or a plain bad request). status is 0
// for an error inside a 200 stream.
func errorFromBody(status int, eb *ErrorBody) *chat.Error {
	// code is a string at OpenAI, a number at llama.cpp and vLLM: kept
	// as its JSON text when it is not a string.
	var code string
	if len(eb.Code) > 0 {
		if json.Unmarshal(eb.Code, &code) != nil {
			code = string(eb.Code)
		}
	}
	cat, retry := chat.CategoryForStatus(status)
	// In a stream there is no status to go by: an upstream that failed
	// mid-answer is taken as unavailable, and retryable.
	if status == 0 {
		cat, retry = chat.CategoryUpstreamUnavailable, true
		if n := codeStatus(eb.Code); n != 0 {
			// In a stream, llama.cpp and vLLM give the status they
			// would have answered with.
			cat, retry = chat.CategoryForStatus(n)
		}
	}
	switch {
	case code == "context_length_exceeded" || code == "string_above_max_length" || eb.Type == "exceed_context_size_error" ||
		cat == chat.CategoryInvalidRequest && contextTooLong(eb.Message):
		cat, retry = chat.CategoryContextLength, false
	case code == "content_filter" || code == "content_policy_violation":
		cat, retry = chat.CategoryContentFilter, false
	case code == "rate_limit_exceeded" || eb.Type == "rate_limit_error" || eb.Type == "tokens" || eb.Type == "requests":
		cat, retry = chat.CategoryRateLimited, true
	case eb.Type == "overloaded_error" || code == "overloaded":
		cat, retry = chat.CategoryOverloaded, true
	case code == "invalid_api_key" || eb.Type == "authentication_error":
		cat, retry = chat.CategoryAuth, false
	case code == chat.CodeInsufficientQuota || eb.Type == chat.CodeInsufficientQuota:
		cat, retry = chat.CategoryRateLimited, false
	case status == 0 && eb.Type == "invalid_request_error":
		cat, retry = chat.CategoryInvalidRequest, false
	}
	ce := &chat.Error{Category: cat, Status: status, Message: eb.Message, Retryable: retry}
	if code == chat.CodeInsufficientQuota || eb.Type == chat.CodeInsufficientQuota {
		ce.Code = chat.CodeInsufficientQuota
	}
	return ce
}

// CompletionChunks decodes a non-streaming chat.completion response from r
// as a stream's chunks: one per choice, the first with the model, the last
// with the usage.
func CompletionChunks(r io.Reader) ([]chat.Chunk, error) {
	var c struct {
		Completion
		Error json.RawMessage `json:"error"`
	}
	// A whole answer is read at once, unlike a stream's events: bounded,
	// so that a server that never stops cannot exhaust memory.
	dec := json.NewDecoder(io.LimitReader(r, 64<<20))
	if err := dec.Decode(&c); err != nil {
		return nil, chat.ProtocolError(fmt.Errorf("upstream sent a malformed completion: %v", err))
	}
	if hasErrorMessage(c.Error) {
		// Some servers answer 200 with an error object.
		return nil, DecodeError(0, append(append([]byte(`{"error":`), c.Error...), '}'))
	}
	if len(c.Choices) == 0 {
		return nil, chat.ProtocolError(errors.New("upstream sent a completion without choices"))
	}
	chunks := make([]chat.Chunk, 0, len(c.Choices))
	for i, ch := range c.Choices {
		if ch.Index < 0 || ch.Index >= chat.MaxChoices {
			return nil, chat.ProtocolError(fmt.Errorf("upstream sent choice index %d", ch.Index))
		}
		out := chat.Chunk{Choice: ch.Index, FinishReason: NormalizeFinishReason(ch.FinishReason)}
		if i == 0 {
			out.Model = c.Model
		}
		// content is a string, or null beside tool calls; any other
		// shape is read as no text rather than failing the answer.
		var text string
		if len(ch.Message.Content) > 0 && ch.Message.Content[0] == '"' {
			_ = json.Unmarshal(ch.Message.Content, &text)
		}
		out.Text = text
		out.Thinking = ch.Message.ReasoningContent
		if out.Thinking == "" {
			out.Thinking = ch.Message.Reasoning
		}
		if ch.Message.Refusal != nil {
			out.Refusal = *ch.Message.Refusal
		}
		for j, tc := range ch.Message.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, chat.ToolCallDelta{Index: j, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if i == len(c.Choices)-1 && c.Usage != nil {
			out.Usage = c.Usage.toChat()
		}
		chunks = append(chunks, out)
	}
	return chunks, nil
}
