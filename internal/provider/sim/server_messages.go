package sim

import (
	"fmt"
	"net/http"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/anthropic"
	"github.com/firstword/firstword/internal/wire/responses"
)

// serveMessages is Anthropic's POST /v1/messages, written by the
// client-facing encoder firstword answers Messages clients with.
func (p *Provider) serveMessages(w http.ResponseWriter, r *http.Request) {
	p.serve(w, r, "text/event-stream", writeMessagesError, func(body []byte) (*parsed, error) {
		pr, err := anthropic.ParseRequest(body)
		if err != nil {
			return nil, err
		}
		req := pr.Request
		show := askThinking(body, dialectMessages, req)
		enc := &messagesStream{anthropic.EventEncoder{ID: fmt.Sprintf("msg_sim%d", p.seq.Load()+1), Model: req.Model, InputTokens: chat.EstimateInputTokens(req), Thinking: pr.Thinking}}
		return &parsed{req, pr.Stream, show, enc}, nil
	})
}

func writeMessagesError(w http.ResponseWriter, e *chat.Error) {
	typ, st := anthropic.ErrorType(e.Category)
	if e.Status == 0 {
		e.Status = st
	}
	st = status(w, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	w.Write(anthropic.ErrorResponse(typ, e.Message))
}

type messagesStream struct{ anthropic.EventEncoder }

func (e *messagesStream) chunk(b []byte, c *chat.Chunk) []byte { return e.Chunk(b, c) }

func (e *messagesStream) end(b []byte, reason chat.FinishReason, u *chat.Usage) []byte {
	return e.Finish(b, reason, u)
}

func (e *messagesStream) fail(b []byte, ce *chat.Error) []byte { return e.Error(b, ce) }

func (e *messagesStream) whole(w http.ResponseWriter, resp *chat.Response) {
	writeJSON(w, http.StatusOK, anthropic.EncodeMessage(e.ID, e.Model, resp, e.Thinking))
}

// serveResponses is OpenAI's POST /v1/responses, written by the
// client-facing encoder firstword answers Responses clients with.
func (p *Provider) serveResponses(w http.ResponseWriter, r *http.Request) {
	p.serve(w, r, "text/event-stream", writeError, func(body []byte) (*parsed, error) {
		pr, err := responses.ParseRequest(body, nil)
		if err != nil {
			return nil, err
		}
		req := pr.Request
		show := askThinking(body, dialectResponses, req)
		enc := &responsesStream{responses.EventEncoder{ID: fmt.Sprintf("resp_sim%d", p.seq.Load()+1), Model: req.Model, CreatedAt: time.Now().Unix(), Summary: pr.Summary, Encrypted: pr.Encrypted}}
		return &parsed{req, pr.Stream, show, enc}, nil
	})
}

type responsesStream struct{ responses.EventEncoder }

// chunk writes c; the sim's signature is, in this dialect, a reasoning
// item's encrypted_content.
func (e *responsesStream) chunk(b []byte, c *chat.Chunk) []byte {
	if th := c.Thought; th != nil && th.Signature != "" && th.Format != chat.ThinkingResponses {
		t := *th
		t.Format = chat.ThinkingResponses
		c.Thought = &t
	}
	return e.Chunk(b, c)
}

func (e *responsesStream) end(b []byte, reason chat.FinishReason, u *chat.Usage) []byte {
	return e.Finish(b, reason, u)
}

func (e *responsesStream) fail(b []byte, ce *chat.Error) []byte { return e.Error(b, ce, nil) }

// whole writes the response object; the sim's signatures are reasoning
// items' encrypted_content, as in the stream.
func (e *responsesStream) whole(w http.ResponseWriter, resp *chat.Response) {
	for i := range resp.Choices {
		for k := range resp.Choices[i].Thinking {
			resp.Choices[i].Thinking[k].Format = chat.ThinkingResponses
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(e.Response(resp))
}
