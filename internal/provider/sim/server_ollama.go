package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonenc"
	"github.com/firstword/firstword/internal/wire/ollama"
)

// serveOllama is Ollama's POST /api/chat: NDJSON, one object a line, the
// last with "done": true (or one object when "stream": false). Thinking
// is shown as message.thinking unless "think": false turned it off.
func (p *Provider) serveOllama(w http.ResponseWriter, r *http.Request) {
	p.serve(w, r, "application/x-ndjson", writeOllamaError, func(body []byte) (*parsed, error) {
		req, stream, err := ollamaRequest(body)
		if err != nil {
			return nil, err
		}
		return &parsed{req, stream, askThinking(body, dialectOllama, req), &ollamaStream{model: req.Model, start: time.Now()}}, nil
	})
}

// ollamaRequest decodes what the sim reads of an /api/chat body: the
// messages, tools, options.num_predict, and stream (true when absent,
// as Ollama has it).
func ollamaRequest(body []byte) (*chat.Request, bool, error) {
	var in struct {
		ollama.Request
		Stream *bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, false, fmt.Errorf("request body: %v", err)
	}
	if in.Model == "" {
		return nil, false, fmt.Errorf("model is required")
	}
	req := &chat.Request{Model: in.Model}
	for _, m := range in.Messages {
		cm := chat.Message{Role: chat.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
		}
		req.Messages = append(req.Messages, cm)
	}
	if len(req.Messages) == 0 {
		return nil, false, fmt.Errorf("messages: required")
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, chat.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	if in.Options != nil {
		req.MaxTokens = in.Options.NumPredict
	}
	return req, in.Stream == nil || *in.Stream, nil
}

func writeOllamaError(w http.ResponseWriter, e *chat.Error) {
	st := status(w, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	w.Write(appendOllamaError(nil, e.Message))
}

func appendOllamaError(b []byte, message string) []byte {
	b = append(b, `{"error":`...)
	b = jsonenc.AppendString(b, message)
	return append(b, "}\n"...)
}

// ollamaStream writes /api/chat's lines: one per chunk, content or
// thinking (Ollama has no signatures); tool calls, which Ollama sends
// whole, are gathered and sent in one line before the done line, which
// carries the finish reason and the counts (eval_count includes the
// thinking). Only choice 0 is written: Ollama has one.
type ollamaStream struct {
	model string
	start time.Time
	calls toolCalls
}

func (e *ollamaStream) chunk(b []byte, c *chat.Chunk) []byte {
	if c.Choice != 0 {
		return b
	}
	e.calls.add(c.ToolCalls)
	if c.Text == "" && c.Thinking == "" {
		return b
	}
	return e.appendLine(b, c.Text, c.Thinking, nil, nil)
}

func (e *ollamaStream) end(b []byte, reason chat.FinishReason, u *chat.Usage) []byte {
	if len(e.calls) > 0 {
		b = e.appendLine(b, "", "", e.calls, nil)
	}
	return e.appendLine(b, "", "", nil, &ollamaDone{reason, u})
}

func (e *ollamaStream) fail(b []byte, ce *chat.Error) []byte {
	return appendOllamaError(b, ce.Message)
}

// whole writes the one object of an answer not streamed: choice 0, its
// thinking's text joined.
func (e *ollamaStream) whole(w http.ResponseWriter, resp *chat.Response) {
	var c chat.Choice
	if len(resp.Choices) > 0 {
		c = resp.Choices[0]
	}
	var thinking strings.Builder
	for _, t := range c.Thinking {
		thinking.WriteString(t.Text)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(e.appendLine(nil, c.Text, thinking.String(), c.ToolCalls, &ollamaDone{c.FinishReason, resp.Usage}))
}

// ollamaDone is what the done line says besides the message.
type ollamaDone struct {
	reason chat.FinishReason
	usage  *chat.Usage
}

// appendLine appends one line: the model, the time, a message and, on
// the last (done set), the finish reason and the counts.
func (e *ollamaStream) appendLine(b []byte, text, thinking string, calls []chat.ToolCall, done *ollamaDone) []byte {
	b = append(b, `{"model":`...)
	b = jsonenc.AppendString(b, e.model)
	b = append(b, `,"created_at":"`...)
	b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","message":{"role":"assistant","content":`...)
	b = jsonenc.AppendString(b, text)
	if thinking != "" {
		b = append(b, `,"thinking":`...)
		b = jsonenc.AppendString(b, thinking)
	}
	if len(calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = jsonenc.AppendString(b, calls[i].ID)
			b = append(b, `,"function":{"index":`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `,"name":`...)
			b = jsonenc.AppendString(b, calls[i].Name)
			b = append(b, `,"arguments":`...)
			b = appendArgs(b, calls[i].Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if done == nil {
		return append(b, "},\"done\":false}\n"...)
	}
	b = append(b, `},"done":true,"done_reason":"`...)
	if done.reason == chat.FinishLength {
		b = append(b, "length"...)
	} else {
		b = append(b, "stop"...)
	}
	b = append(b, `","total_duration":`...)
	b = strconv.AppendInt(b, int64(time.Since(e.start)), 10)
	if u := done.usage; u != nil {
		b = append(b, `,"prompt_eval_count":`...)
		b = strconv.AppendInt(b, int64(u.InputTokens), 10)
		b = append(b, `,"eval_count":`...)
		b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
	}
	return append(b, "}\n"...)
}
