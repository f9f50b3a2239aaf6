package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/responses"
)

// responsesAPIFor serves POST /v1/responses on s: OpenAI's Responses API
// (what the Vercel AI SDK's openai(model) and newer OpenAI SDK code call),
// with the same routing, deadlines, cancellation, metering and error
// contract as /v1/chat/completions: a failure after the first byte is a
// response.failed event, and so is an answer the deadline cut (a timeout
// error, with the output sent).
func responsesAPIFor(s *Server) *api {
	return &api{
		name: "responses", idPrefix: "resp_", dialect: dialectOpenAI,
		parse: func(r *http.Request, x *exchange, body []byte) (surface, error) {
			pr, err := responses.ParseRequest(body, s.itemResolver(r.Context(), x.tenant))
			if err != nil {
				e := invalid("", err.Error())
				var re *responses.RequestError
				if errors.As(err, &re) {
					e.Param = re.Param
				}
				return nil, e
			}
			x.req, x.stream, x.background = pr.Request, pr.Stream, pr.Background
			if x.background && s.opt.Journal == nil {
				return nil, invalid("background", "background mode is not available on this server (it keeps no journal of responses)")
			}
			return &responsesSurface{tenant: x.tenant, enc: responses.EventEncoder{ID: x.id, Model: x.req.Model, CreatedAt: x.start.Unix(), Background: x.background, Summary: pr.Summary, Encrypted: pr.Encrypted}}, nil
		},
		answered: func(r *http.Request, sf surface) {
			if sf, ok := sf.(*responsesSurface); ok {
				s.keepItems(r.Context(), sf.tenant, sf.enc.Messages())
			}
		},
	}
}

// itemTTL is how long the message items firstword sent can be referred to
// (item_reference) by later requests.
const itemTTL = time.Hour

func itemKey(tenant, id string) string { return "responses-item\x00" + tenant + "\x00" + id }

// keepItems remembers the message items sent, in the response cache (Redis
// when configured, so every replica can resolve them), for clients that
// refer to them instead of sending their text back.
func (s *Server) keepItems(ctx context.Context, tenant string, ms []responses.Message) {
	if s.opt.Items == nil {
		return
	}
	now := time.Now()
	for _, m := range ms {
		e := &cache.Entry{Alias: "responses-item", Chunks: []chat.Chunk{{Text: m.Text}}, Created: now, Expires: now.Add(itemTTL)}
		if err := s.opt.Items.Set(context.WithoutCancel(ctx), itemKey(tenant, m.ID), e); err != nil {
			s.log.Warn("keeping a response item", "id", m.ID, "err", err)
		}
	}
}

// itemResolver finds an item this tenant was sent.
func (s *Server) itemResolver(ctx context.Context, tenant string) responses.Resolver {
	if s.opt.Items == nil {
		return nil
	}
	return func(id string) (string, bool) {
		e, err := s.opt.Items.Get(ctx, itemKey(tenant, id))
		if err != nil || e == nil || len(e.Chunks) != 1 {
			return "", false
		}
		return e.Chunks[0].Text, true
	}
}

// responsesSurface renders the Responses API.
type responsesSurface struct {
	tenant string
	enc    responses.EventEncoder
}

func (o *responsesSurface) setModel(m string) { o.enc.Model = m }

func (o *responsesSurface) heartbeat() []byte { return commentHeartbeat }

func (o *responsesSurface) chunk(b []byte, c *chat.Chunk) []byte {
	// The finish and usage are written by end; thinking the client did
	// not ask for writes nothing, so it commits no 200 (a failure before
	// the answer is still a real status).
	if !c.Visible() && (!c.Thinks() || !o.enc.Summary && !o.enc.Encrypted) {
		return b
	}
	return o.enc.Chunk(b, c)
}

func (o *responsesSurface) end(b []byte, x *exchange) []byte {
	u := x.call.Usage(x.req)
	return o.enc.Finish(b, x.call.Tally().Finish, &u)
}

// errorEvent carries the usage of what was delivered before the failure,
// as metered.
func (o *responsesSurface) errorEvent(b []byte, x *exchange, e *chat.Error) []byte {
	u := x.call.Usage(x.req)
	return o.enc.Error(b, e, &u)
}

func (o *responsesSurface) response(x *exchange, model string, r *chat.Response) any {
	o.enc.Model = model
	return json.RawMessage(o.enc.Response(r))
}
