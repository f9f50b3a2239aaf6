package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/simspec"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// Handler serves the sim on a real socket in every upstream dialect
// firstword reads, streamed and not:
//
//	POST /v1/chat/completions                          OpenAI Chat Completions
//	POST /v1/messages                                  Anthropic Messages
//	POST /v1/responses                                 OpenAI Responses
//	POST /v1beta/models/{model}:streamGenerateContent  Gemini (?alt=sse)
//	POST /v1beta/models/{model}:generateContent        Gemini, not streamed
//	POST /api/chat                                     Ollama (NDJSON)
//
// and GET /v1/models and GET /sim/stats. Each dialect asks for thinking
// in its own words and shows it in its own form (see thinkingFields).
// Directives come from the X-Firstword-Sim header or a [sim ...] tag in
// the last user message. It is the fake upstream that tests and
// benchmarks put behind the gateway.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", p.serveChat)
	mux.HandleFunc("POST /v1/messages", p.serveMessages)
	mux.HandleFunc("POST /v1/responses", p.serveResponses)
	mux.HandleFunc("POST /v1beta/models/{call}", p.serveGemini)
	mux.HandleFunc("POST /api/chat", p.serveOllama)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		type model struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
		}
		var data []model
		for name := range simspec.Tiers {
			data = append(data, model{ID: name, Object: "model", OwnedBy: "sim"})
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	})
	mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, p.Stats())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// status is the HTTP status of a failure before the answer began, with
// the Retry-After header set when the failure has one.
func status(w http.ResponseWriter, e *chat.Error) int {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	if e.Status != 0 {
		return e.Status
	}
	return e.HTTPStatus()
}

// writeError answers a failure in OpenAI's form (Chat Completions and
// Responses).
func writeError(w http.ResponseWriter, e *chat.Error) {
	writeJSON(w, status(w, e), map[string]any{"error": wire.ErrorFromChat(e)})
}

func invalid(err error) *chat.Error {
	return &chat.Error{Category: chat.CategoryInvalidRequest, Message: err.Error()}
}

// streamDialect writes one API's stream of an answer.
type streamDialect interface {
	// chunk appends what c says.
	chunk(b []byte, c *chat.Chunk) []byte
	// end appends the end of a finished answer: reason is choice 0's
	// finish reason, u the usage (nil when none came).
	end(b []byte, reason chat.FinishReason, u *chat.Usage) []byte
	// fail appends a failure after the stream began.
	fail(b []byte, ce *chat.Error) []byte
}

// play streams req's answer to w in a dialect. The response is
// committed (status 200 and contentType) at the first chunk, the
// thinking's when the model thinks: a failure before it is answered by
// bad with a real status, one after it by the dialect's error event, and
// a truncation by ending the body without the dialect's end. What show
// does not show of the thinking is dropped: the model still thinks (and
// bills it).
func (p *Provider) play(w http.ResponseWriter, r *http.Request, req *chat.Request, show shown, contentType string, d streamDialect, bad func(http.ResponseWriter, *chat.Error)) {
	rc := http.NewResponseController(w)
	var buf []byte
	committed := false
	var usage *chat.Usage
	var reason chat.FinishReason
	commit := func() {
		committed = true
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
	}
	for ch, err := range p.Stream(r.Context(), req) {
		if err != nil {
			ce := chat.AsError(err)
			if !committed {
				bad(w, ce)
				return
			}
			if ce.Category == chat.CategoryProtocol {
				return
			}
			w.Write(d.fail(buf[:0], ce))
			rc.Flush()
			return
		}
		if !show.text {
			ch.Thinking = ""
		}
		if !show.signed {
			ch.Thought = nil
		}
		if !committed {
			commit()
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		if ch.Choice == 0 && ch.FinishReason != "" {
			reason = ch.FinishReason
		}
		buf = d.chunk(buf[:0], &ch)
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
	if !committed {
		commit()
	}
	w.Write(d.end(buf[:0], reason, usage))
	rc.Flush()
}

// collect gathers req's whole answer for a response that is not
// streamed; what show does not show of the thinking is dropped.
func (p *Provider) collect(r *http.Request, req *chat.Request, show shown) (*chat.Response, *chat.Error) {
	resp, err := chat.Collect(p.Stream(r.Context(), req))
	if err != nil {
		return nil, chat.AsError(err)
	}
	for i := range resp.Choices {
		c := &resp.Choices[i]
		if show == (shown{}) {
			c.Thinking = nil
		}
		for k := range c.Thinking {
			if !show.text {
				c.Thinking[k].Text = ""
			}
			if !show.signed {
				c.Thinking[k].Signature = ""
			}
		}
	}
	return resp, nil
}

// parsed is a request read in a dialect: whether its answer is streamed,
// what it shows of the thinking, and the writer of the answer.
type parsed struct {
	req    *chat.Request
	stream bool
	show   shown
	answer answerer
}

// answerer writes an answer in a dialect, streamed or whole.
type answerer interface {
	streamDialect
	// whole writes the answer not streamed.
	whole(w http.ResponseWriter, resp *chat.Response)
}

// serve answers a request in a dialect: parse reads it (and asks
// askThinking what it shows), bad answers a failure before the answer
// began, contentType is a stream's.
func (p *Provider) serve(w http.ResponseWriter, r *http.Request, contentType string, bad func(http.ResponseWriter, *chat.Error), parse func(body []byte) (*parsed, error)) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		bad(w, invalid(err))
		return
	}
	pr, err := parse(body)
	if err != nil {
		bad(w, invalid(err))
		return
	}
	pr.req.Hints.Sim = r.Header.Get("X-Firstword-Sim")
	if pr.stream {
		p.play(w, r, pr.req, pr.show, contentType, pr.answer, bad)
		return
	}
	resp, ce := p.collect(r, pr.req, pr.show)
	if ce != nil {
		bad(w, ce)
		return
	}
	pr.answer.whole(w, resp)
}

func (p *Provider) serveChat(w http.ResponseWriter, r *http.Request) {
	p.serve(w, r, "text/event-stream", writeError, func(body []byte) (*parsed, error) {
		pr, err := wire.ParseRequest(body)
		if err != nil {
			return nil, err
		}
		req := pr.Request
		enc := &chatStream{ChunkEncoder: wire.ChunkEncoder{ID: fmt.Sprintf("chatcmpl-sim%d", p.seq.Load()+1), Created: time.Now().Unix(), Model: req.Model, IncludeUsage: pr.IncludeUsage}}
		return &parsed{req, pr.Stream, askThinking(body, dialectChat, req), enc}, nil
	})
}

// chatStream is Chat Completions' stream: chunks, a usage chunk when the
// client asked for one, and [DONE].
type chatStream struct{ wire.ChunkEncoder }

func (e *chatStream) chunk(b []byte, c *chat.Chunk) []byte { return e.AppendChunk(b, c) }

func (e *chatStream) end(b []byte, _ chat.FinishReason, u *chat.Usage) []byte {
	if e.IncludeUsage && u != nil {
		b = e.AppendUsage(b, u)
	}
	return wire.AppendDone(b)
}

func (e *chatStream) fail(b []byte, ce *chat.Error) []byte {
	return wire.AppendErrorEvent(b, wire.ErrorFromChat(ce))
}

func (e *chatStream) whole(w http.ResponseWriter, resp *chat.Response) {
	writeJSON(w, http.StatusOK, wire.EncodeCompletion(e.ID, e.Created, e.Model, resp))
}

// toolCalls gathers streamed tool-call deltas into whole calls, for the
// dialects that send a call whole (Gemini, Ollama).
type toolCalls []chat.ToolCall

func (tc *toolCalls) add(ds []chat.ToolCallDelta) {
	for _, d := range ds {
		if d.Index < 0 || d.Index >= chat.MaxToolCalls {
			continue
		}
		for len(*tc) <= d.Index {
			*tc = append(*tc, chat.ToolCall{})
		}
		c := &(*tc)[d.Index]
		c.ID, c.Name = c.ID+d.ID, c.Name+d.Name
		c.Arguments += d.Arguments
	}
}

// appendArgs appends a call's arguments as the JSON object Gemini and
// Ollama send; arguments that are not one become {}.
func appendArgs(b []byte, args string) []byte {
	if strings.HasPrefix(args, "{") && json.Valid([]byte(args)) {
		return append(b, args...)
	}
	return append(b, "{}"...)
}
