package httpapi

import (
	"errors"
	"net/http"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/anthropic"
)

// anthropicAPI serves POST /v1/messages, Anthropic's Messages API, so
// clients using Anthropic's SDKs can use firstword and be routed to any
// provider, with the same deadlines, cancellation, metering and error
// contract as /v1/chat/completions (errors mid-stream are Anthropic's
// event: error).
var anthropicAPI = api{
	name: "anthropic", idPrefix: "msg_", dialect: dialectAnthropic,
	parse: func(_ *http.Request, x *exchange, body []byte) (surface, error) {
		pr, err := anthropic.ParseRequest(body)
		if err != nil {
			msg := err.Error()
			var re *anthropic.RequestError
			if errors.As(err, &re) && re.Param != "" {
				msg = re.Param + ": " + re.Message
			}
			return nil, invalid("", msg)
		}
		x.req, x.stream = pr.Request, pr.Stream
		return &anthropicSurface{enc: anthropic.EventEncoder{ID: x.id, Model: x.req.Model, InputTokens: chat.EstimateInputTokens(x.req), Thinking: pr.Thinking}}, nil
	},
}

// anthropicSurface renders Anthropic's Messages API.
type anthropicSurface struct {
	enc anthropic.EventEncoder
}

func (a *anthropicSurface) setModel(m string) { a.enc.Model = m }

// heartbeat is Anthropic's own keep-alive, which its SDKs skip.
func (a *anthropicSurface) heartbeat() []byte { return a.enc.Ping(nil) }

func (a *anthropicSurface) chunk(b []byte, c *chat.Chunk) []byte {
	// The finish and usage are written by end; thinking the client did
	// not ask for writes nothing, so it commits no 200 (a failure before
	// the answer is still a real status).
	if !c.Visible() && (!c.Thinks() || a.enc.Thinking == anthropic.ShowNone) {
		return b
	}
	return a.enc.Chunk(b, c)
}

// end closes the message. A cut answer never comes here: no Anthropic
// stop_reason says "cut by a deadline", and end_turn would tell the
// client the answer is whole, so it ends as Anthropic ends a broken
// stream, with an error event (timeout_error) after the text that was
// sent (exchange.go).
func (a *anthropicSurface) end(b []byte, x *exchange) []byte {
	u := x.call.Usage(x.req)
	return a.enc.Finish(b, x.call.Tally().Finish, &u)
}

func (a *anthropicSurface) errorEvent(b []byte, _ *exchange, e *chat.Error) []byte {
	return a.enc.Error(b, e)
}

func (a *anthropicSurface) response(x *exchange, model string, r *chat.Response) any {
	return anthropic.EncodeMessage(x.id, model, r, a.enc.Thinking)
}
