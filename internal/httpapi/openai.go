package httpapi

import (
	"errors"
	"net/http"

	"github.com/firstword/firstword/internal/chat"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// openaiAPI serves POST /v1/chat/completions.
var openaiAPI = api{
	name: "openai", idPrefix: "chatcmpl-", dialect: dialectOpenAI,
	parse: func(_ *http.Request, x *exchange, body []byte) (surface, error) {
		pr, err := wire.ParseRequest(body)
		if err != nil {
			e := invalid("", err.Error())
			var re *wire.RequestError
			if errors.As(err, &re) {
				e.Param = re.Param
				if re.Param == "model" && re.Message == "required" {
					e.Code = "missing_model"
				}
			}
			return nil, e
		}
		x.req, x.stream = pr.Request, pr.Stream
		return &openaiSurface{enc: wire.ChunkEncoder{ID: x.id, Created: x.start.Unix(), Model: x.req.Model, IncludeUsage: pr.IncludeUsage}, includeUsage: pr.IncludeUsage}, nil
	},
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
		u := x.call.Usage(x.req)
		b = o.enc.AppendUsage(b, &u)
	}
	return wire.AppendDone(b)
}

func (o *openaiSurface) errorEvent(b []byte, _ *exchange, e *chat.Error) []byte {
	return wire.AppendErrorEvent(b, wire.ErrorFromChat(e))
}

func (o *openaiSurface) response(x *exchange, model string, r *chat.Response) any {
	return wire.EncodeCompletion(x.id, x.start.Unix(), model, r)
}
