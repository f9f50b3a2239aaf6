// Package openairesponses is the provider adapter for OpenAI's Responses
// API (POST /v1/responses), on which OpenAI serves its newer models and
// features, and for the servers that imitate it. Requests are sent with
// store false: the whole conversation goes in each request, as on every
// other upstream, and OpenAI keeps nothing for the gateway.
package openairesponses

import (
	"context"
	"net/http"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/wire/openai"
	wire "github.com/firstword/firstword/internal/wire/responses"
)

// Config configures a Provider. BaseURL is the API root, e.g.
// https://api.openai.com/v1, and requests go to BaseURL + "/responses";
// the APIKey is sent as a bearer token; Headers may add
// OpenAI-Organization, for one. MaxEventSize must hold a response's
// terminal event, which repeats its whole output.
type Config struct {
	provider.HTTPConfig
}

// Provider calls a Responses API. The usage comes with the response's
// terminal event.
type Provider struct {
	provider.HTTPAdapter // Stream and Pull, over Open
	cfg                  Config
	url                  string
}

// New returns a Provider.
func New(cfg Config) *Provider {
	p := &Provider{cfg: cfg, url: cfg.URL("/responses")}
	p.HTTPAdapter = provider.NewHTTPAdapter(p, &p.cfg.HTTPConfig)
	return p
}

// Open implements provider.Opener.
func (p *Provider) Open(ctx context.Context, req *chat.Request) (*http.Response, provider.ChunkReader, error) {
	body, err := wire.EncodeUpstreamRequest(req)
	if err != nil {
		return nil, nil, provider.EncodeError(p.cfg.Name, err)
	}
	// The Responses API answers errors with Chat Completions' error body
	// ({"error": {message, type, param, code}}), so openai.DecodeError
	// reads them; a 200 with such a body (from a proxy) is an error too.
	post := p.cfg.Post(p.url, body)
	post.Auth[0], post.Decode, post.JSONIsError = provider.Bearer(p.cfg.APIKey), openai.DecodeError, true
	return provider.OpenStream(ctx, &post, wire.NewUpstreamStreamReader, p.cfg.MaxEventSize)
}
