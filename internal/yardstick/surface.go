package yardstick

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/sse"
	"github.com/firstword/firstword/internal/wire/anthropic"
	"github.com/firstword/firstword/internal/wire/openai"
	"github.com/firstword/firstword/internal/wire/responses"
)

// maxEvent bounds one event of a measured stream.
const maxEvent = 1 << 20

// chunkReader is a decoded stream: the next chunk, io.EOF after a clean
// end (the surface's end marker seen), or the error that ended it.
type chunkReader interface {
	Next() (*chat.Chunk, error)
}

// newRequest builds the streaming request for prompt on t's surface.
func (t *Target) newRequest(prompt string, maxTokens int) (*http.Request, error) {
	var body any
	switch t.Surface {
	case SurfaceOpenAI:
		b := map[string]any{"model": t.Model, "stream": true,
			"messages":       []map[string]string{{"role": "user", "content": prompt}},
			"stream_options": map[string]bool{"include_usage": true}}
		if maxTokens > 0 {
			b["max_tokens"] = maxTokens
		}
		body = b
	case SurfaceAnthropic:
		body = map[string]any{"model": t.Model, "stream": true, "max_tokens": maxTokens,
			"messages": []map[string]string{{"role": "user", "content": prompt}}}
	case SurfaceResponses:
		b := map[string]any{"model": t.Model, "stream": true, "input": prompt}
		if maxTokens > 0 {
			b["max_output_tokens"] = maxTokens
		}
		body = b
	case SurfaceChat:
		body = map[string]any{"model": t.Model, "message": prompt}
	default:
		return nil, fmt.Errorf("target %s: unknown surface %q", t.Name, t.Surface)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest("POST", t.URL, strings.NewReader(string(b)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if t.apiKey != "" {
		switch t.Surface {
		case SurfaceAnthropic:
			req.Header.Set("x-api-key", t.apiKey)
		default:
			req.Header.Set("Authorization", "Bearer "+t.apiKey)
		}
	}
	if t.Surface == SurfaceAnthropic {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	for _, h := range t.Headers {
		req.Header.Set(h[0], h[1])
	}
	return req, nil
}

// decoder returns the reader of t's surface over body.
func (t *Target) decoder(body io.Reader) chunkReader {
	switch t.Surface {
	case SurfaceAnthropic:
		return anthropic.NewStreamReader(body, maxEvent)
	case SurfaceResponses:
		return &incompleteReader{r: responses.NewUpstreamStreamReader(body, maxEvent)}
	case SurfaceChat:
		return newChatReader(body)
	default:
		return openai.NewStreamReader(body, maxEvent)
	}
}

// chatReader decodes firstword's /v1/chat event stream (docs/events.md):
// meta is skipped, each delta is a chunk, done ends the stream cleanly
// (its usage on a last chunk), error ends it with the event's code.
// Heartbeat comments are skipped by the SSE reader.
type chatReader struct {
	rd    *sse.Reader
	out   chat.Chunk
	ended error
}

func newChatReader(r io.Reader) *chatReader { return &chatReader{rd: sse.NewReader(r, maxEvent)} }

func (c *chatReader) Next() (*chat.Chunk, error) {
	if c.ended != nil {
		return nil, c.ended
	}
	ch, err := c.next()
	if err != nil {
		c.ended = err
	}
	return ch, err
}

func (c *chatReader) next() (*chat.Chunk, error) {
	for {
		ev, err := c.rd.Next()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, chat.ProtocolError(fmt.Errorf("stream ended without a done or error event"))
		}
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case "delta":
			var d struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil || d.Text == nil {
				return nil, chat.ProtocolError(fmt.Errorf("malformed delta event"))
			}
			c.out = chat.Chunk{Text: *d.Text}
			return &c.out, nil
		case "done":
			var d struct {
				Status string `json:"status"`
				Usage  *struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, chat.ProtocolError(fmt.Errorf("malformed done event"))
			}
			c.ended = io.EOF
			if d.Status != "" && d.Status != "complete" {
				// A cut answer (timeout, cancelled) is not a success.
				c.ended = &endError{kind: "done_" + d.Status}
				return nil, c.ended
			}
			if d.Usage == nil {
				return nil, io.EOF
			}
			c.out = chat.Chunk{FinishReason: chat.FinishReason(d.Status),
				Usage: &chat.Usage{InputTokens: d.Usage.InputTokens, OutputTokens: d.Usage.OutputTokens}}
			return &c.out, nil
		case "error":
			var d struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}
			json.Unmarshal(ev.Data, &d)
			if d.Code == "" {
				d.Code = "unknown"
			}
			return nil, &eventError{code: d.Code, message: d.Message}
		}
	}
}

// eventError is a stream's terminal error event, as /v1/chat sends it.
type eventError struct{ code, message string }

func (e *eventError) Error() string { return "error event " + e.code + ": " + e.message }

// endError is a stream that ended by its surface's rules but without a
// whole answer: kind names how (done_timeout, done_cancelled, incomplete).
type endError struct{ kind string }

func (e *endError) Error() string { return "the answer ended " + e.kind }

// incompleteReader ends a Responses stream whose terminal event was
// response.incomplete (a finish other than stop or tool calls) with an
// endError instead of a clean end.
type incompleteReader struct {
	r      chunkReader
	finish chat.FinishReason
}

func (i *incompleteReader) Next() (*chat.Chunk, error) {
	ch, err := i.r.Next()
	if err == io.EOF && i.finish != "" && i.finish != chat.FinishStop && i.finish != chat.FinishToolCalls {
		return nil, &endError{kind: "incomplete"}
	}
	if ch != nil && ch.FinishReason != "" {
		i.finish = ch.FinishReason
	}
	return ch, err
}
