package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// DefaultMaxLineSize bounds one line when NewStreamReader is given no
// limit.
const DefaultMaxLineSize = 1 << 20

// Response is one line of the stream.
type Response struct {
	Model      string  `json:"model"`
	Message    Message `json:"message"`
	Done       bool    `json:"done"`
	DoneReason string  `json:"done_reason"`
	// The counts and durations come on the final line only.
	PromptEvalCount    *int  `json:"prompt_eval_count"`
	EvalCount          *int  `json:"eval_count"`
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalDuration       int64 `json:"eval_duration"`
	// Error is set on a line that reports a failure after the stream
	// started (the status was already 200).
	Error json.RawMessage `json:"error"`
}

// NormalizeDoneReason maps a done_reason onto firstword's finish reasons.
// "stop" (and no reason, as Ollama before 0.3 sent) is a natural stop,
// "length" the num_predict or context limit. "load" and "unload" end the
// requests that only load or unload a model (no messages); they pass
// through, as does anything unknown, in lower case.
func NormalizeDoneReason(s string) chat.FinishReason {
	switch s {
	case "stop", "":
		return chat.FinishStop
	case "length":
		return chat.FinishLength
	case "tool_calls":
		return chat.FinishToolCalls
	}
	return chat.FinishReason(strings.ToLower(s))
}

// NewStreamReader returns a pull reader of an /api/chat NDJSON stream from
// r (chat.Pull makes it a chat.Stream).
//
// message.content becomes Text and message.thinking (the model's
// reasoning, sent when the request asked for it) Thinking; each message.tool_calls entry becomes a complete
// ToolCallDelta, numbered in order of arrival, with Ollama's id or a
// generated "call_<n>". Blank lines and CRLF line ends are accepted; a line
// longer than maxLineSize (0: DefaultMaxLineSize) is a protocol error.
//
// The line with "done": true carries the finish reason and the usage
// (prompt_eval_count, eval_count), and ends the stream: what follows it,
// or a response kept open after it, is not read. "stop" after tool calls
// is reported as tool_calls. A stream that ends without the done line, or
// carries malformed JSON or invalid UTF-8 before it, yields a protocol
// error; an {"error": ...} line yields a classified *chat.Error.
func NewStreamReader(r io.Reader, maxLineSize int) *StreamReader {
	return &StreamReader{lr: newLineReader(r, maxLineSize)}
}

// StreamReader decodes an /api/chat stream line by line (see
// NewStreamReader).
type StreamReader struct {
	lr        *lineReader
	resp      Response
	final     *chat.Chunk
	calls     int
	lines     int
	modelSent bool
	ended     bool // the done line's chunk was returned
	out       chat.Chunk
	ending    upstream.Ending
}

// Next returns the next chunk, io.EOF after the last, or the error that
// ends the stream. The chunk is the reader's own, valid until the next
// call.
func (s *StreamReader) Next() (*chat.Chunk, error) {
	if err := s.ending.Ended(); err != nil {
		return nil, err
	}
	return s.ending.Keep(s.next())
}

func (s *StreamReader) next() (*chat.Chunk, error) {
	for {
		if s.final != nil {
			// The done line ends the stream, whether or not the upstream
			// then ends its response: what follows is not read.
			return s.end()
		}
		line, err := s.lr.next()
		if err == io.EOF {
			return s.end()
		}
		if err != nil {
			return nil, chat.ProtocolError(err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := s.decode(line); err != nil {
			return nil, err
		}
		if s.out.Visible() || s.out.Model != "" || s.out.Thinking != "" {
			s.out.More = s.lr.lineBuffered()
			return &s.out, nil
		}
	}
}

// decode decodes one line into s.out, noting the done line's ending.
func (s *StreamReader) decode(line []byte) error {
	if !utf8.Valid(line) {
		return chat.ProtocolError(errors.New("upstream sent invalid UTF-8"))
	}
	resp := &s.resp
	*resp = Response{}
	if err := json.Unmarshal(line, resp); err != nil {
		if s.lr.partial {
			err = fmt.Errorf("%w: stream ended inside a line after %d lines", chat.ErrTruncated, s.lines)
		} else {
			err = fmt.Errorf("upstream sent a malformed line: %v", err)
		}
		return chat.ProtocolError(err)
	}
	s.lines++
	if len(resp.Error) > 0 && string(resp.Error) != "null" {
		return streamError(resp.Error)
	}
	s.out = chat.Chunk{Text: resp.Message.Content, Thinking: resp.Message.Thinking}
	for _, tc := range resp.Message.ToolCalls {
		if s.calls >= chat.MaxToolCalls {
			return chat.ProtocolError(fmt.Errorf("upstream sent more than %d tool calls", chat.MaxToolCalls))
		}
		s.out.ToolCalls = append(s.out.ToolCalls, upstream.ToolCall(s.calls, s.calls, tc.ID, tc.Function.Name, tc.Function.Arguments))
		s.calls++
	}
	if !s.modelSent && resp.Model != "" {
		s.out.Model = resp.Model
		s.modelSent = true
	}
	if resp.Done {
		fr := NormalizeDoneReason(resp.DoneReason)
		if fr == chat.FinishStop && s.calls > 0 {
			fr = chat.FinishToolCalls
		}
		s.final = &chat.Chunk{FinishReason: fr}
		if resp.PromptEvalCount != nil || resp.EvalCount != nil {
			s.final.Usage = &chat.Usage{InputTokens: deref(resp.PromptEvalCount), OutputTokens: deref(resp.EvalCount)}
		}
	}
	return nil
}

// end is the body's clean end: the held done line, once, or the error for
// a stream that had none.
func (s *StreamReader) end() (*chat.Chunk, error) {
	if s.ended {
		return nil, io.EOF
	}
	if s.final == nil {
		return nil, chat.ProtocolError(fmt.Errorf("%w: no done line after %d lines", chat.ErrTruncated, s.lines))
	}
	s.out, s.ended = *s.final, true
	return &s.out, nil
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// streamError classifies an error line. Ollama sends a string; a proxy in
// front of it may send an object with a message.
func streamError(raw json.RawMessage) *chat.Error {
	msg := errorMessage(raw)
	if notFound(msg) {
		return &chat.Error{Category: chat.CategoryNotFound, Message: msg}
	}
	return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: msg, Retryable: true}
}

func errorMessage(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	return upstream.Excerpt(string(raw), 200)
}

// notFound recognises Ollama's missing-model errors: model "x" not found,
// try pulling it first.
func notFound(msg string) bool {
	return strings.Contains(msg, "model") && strings.Contains(msg, "not found")
}

// DecodeError classifies a non-2xx /api/chat response ({"error": "..."}).
func DecodeError(status int, body []byte) *chat.Error {
	cat, retry := chat.CategoryForStatus(status)
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		msg = errorMessage(env.Error)
	}
	if msg == "" {
		msg = upstream.Excerpt(string(bytes.TrimSpace(body)), 200)
	}
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d", status)
	}
	if notFound(msg) {
		cat, retry = chat.CategoryNotFound, false
	}
	return &chat.Error{Category: cat, Status: status, Message: msg, Retryable: retry}
}

// lineReader splits a stream into lines of at most max bytes, so that a
// line is never buffered whole beyond the bound.
type lineReader struct {
	src  io.Reader
	max  int
	buf  []byte
	r, w int
	err  error
	// partial is set when next returned a last line without terminator.
	partial bool
}

func newLineReader(src io.Reader, max int) *lineReader {
	if max <= 0 {
		max = DefaultMaxLineSize
	}
	return &lineReader{src: src, max: max, buf: make([]byte, 1024)}
}

// next returns the next line without its LF or CRLF, valid until the next
// call. The last line may lack a terminator. At the end it returns io.EOF.
func (l *lineReader) next() ([]byte, error) {
	scan := l.r
	for {
		if i := bytes.IndexByte(l.buf[scan:l.w], '\n'); i >= 0 {
			end := scan + i
			line := l.buf[l.r:end]
			l.r = end + 1
			if len(line) > l.max {
				return nil, fmt.Errorf("upstream sent a line over %d bytes", l.max)
			}
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		}
		scan = l.w
		if l.w-l.r > l.max {
			return nil, fmt.Errorf("upstream sent a line over %d bytes", l.max)
		}
		if l.err != nil {
			if l.r == l.w {
				if l.err == io.EOF {
					return nil, io.EOF
				}
				return nil, l.err
			}
			if l.err != io.EOF {
				return nil, l.err
			}
			line := l.buf[l.r:l.w]
			l.r = l.w
			l.partial = true
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		}
		scan -= l.r
		l.fill()
		scan += l.r
	}
}

// lineBuffered reports whether another whole line is already buffered.
func (l *lineReader) lineBuffered() bool {
	return bytes.IndexByte(l.buf[l.r:l.w], '\n') >= 0
}

func (l *lineReader) fill() {
	if l.r > 0 {
		l.w = copy(l.buf, l.buf[l.r:l.w])
		l.r = 0
	}
	if l.w == len(l.buf) {
		size := min(2*len(l.buf), l.max+2)
		if size <= len(l.buf) {
			size = len(l.buf) + 1
		}
		nb := make([]byte, size)
		copy(nb, l.buf[:l.w])
		l.buf = nb
	}
	for range 100 {
		n, err := l.src.Read(l.buf[l.w:])
		l.w += n
		if err != nil {
			l.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	l.err = io.ErrNoProgress
}
