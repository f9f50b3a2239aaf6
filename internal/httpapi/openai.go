package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/firstword/firstword/internal/chat"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	x := newExchange(w, r, "openai", "chatcmpl-")
	p, ok := s.authenticate(w, r, x.rec)
	if !ok {
		return
	}
	x.tenant = p.TenantID
	endParse := x.rec.Begin("parse")
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	pr, err := wire.ParseRequest(body)
	endParse("")
	if err != nil {
		var re *wire.RequestError
		errors.As(err, &re)
		code := "invalid_request"
		if re != nil && re.Param == "model" {
			code = "missing_model"
		}
		param := ""
		if re != nil {
			param = re.Param
		}
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", code, param, err.Error())
		return
	}
	x.req, x.stream = pr.Request, pr.Stream
	ctx, cancel, ok := s.begin(w, r, x, func(msg string) {
		writeOpenAIError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "model", msg)
	})
	if !ok {
		return
	}
	defer cancel(nil)
	if s.opt.Streams != nil {
		defer s.opt.Streams.Open("openai")()
	}
	x.routeAt = time.Now()
	seq := s.opt.Router.StreamReport(ctx, x.req, &x.rep)
	sf := &openaiSurface{enc: wire.ChunkEncoder{ID: x.id, Created: x.start.Unix(), Model: x.req.Model, IncludeUsage: pr.IncludeUsage}, includeUsage: pr.IncludeUsage}
	if pr.Stream {
		s.stream(w, r, x, seq, sf)
	} else {
		s.complete(w, r, x, seq, sf)
	}
	s.finish(r, x)
}

// openaiSurface renders OpenAI's Chat Completions format.
type openaiSurface struct {
	enc          wire.ChunkEncoder
	includeUsage bool
}

func (o *openaiSurface) setModel(m string) { o.enc.Model = m }

func (o *openaiSurface) heartbeat() []byte { return commentHeartbeat }

func (o *openaiSurface) chunk(b []byte, c *chat.Chunk) []byte { return o.enc.AppendChunk(b, c) }

func (o *openaiSurface) end(b []byte, x *exchange) []byte {
	if o.includeUsage {
		u := x.tally.Usage(x.req)
		b = o.enc.AppendUsage(b, &u)
	}
	return wire.AppendDone(b)
}

func (o *openaiSurface) errorEvent(b []byte, e *chat.Error) []byte {
	return wire.AppendErrorEvent(b, wire.ErrorFromChat(e))
}

func (o *openaiSurface) writeError(w http.ResponseWriter, e *chat.Error) { writeChatError(w, e) }

func (o *openaiSurface) response(x *exchange, model string, r *chat.Response) any {
	return wire.EncodeCompletion(x.id, x.start.Unix(), model, r)
}
