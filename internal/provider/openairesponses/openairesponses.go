// Package openairesponses is the provider adapter for OpenAI's Responses
// API (POST /v1/responses), on which OpenAI serves its newer models and
// features, and for the servers that imitate it. Requests are sent with
// store false: the whole conversation goes in each request, as on every
// other upstream, and OpenAI keeps nothing for the gateway.
package openairesponses

import (
	"context"
	"net/http"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/wire/openai"
	wire "github.com/firstword/firstword/internal/wire/responses"
)

// Config configures a Provider.
type Config struct {
	// Name identifies the provider in errors and logs.
	Name string
	// BaseURL is the API root, e.g. https://api.openai.com/v1; requests
	// go to BaseURL + "/responses".
	BaseURL string
	// APIKey is sent as a bearer token when set. It and the values of
	// Headers are scrubbed from the errors the Provider returns (see
	// provider.Scrubber).
	APIKey string
	// Headers are added to every request (OpenAI-Organization, for one).
	Headers map[string]string
	// Client sends the requests; nil means a client on provider.NewTransport.
	Client *http.Client
	// MaxEventSize bounds one upstream event; 0 means 1 MiB. A
	// response's terminal event repeats its whole output.
	MaxEventSize int
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
	cfg.Client = provider.HTTPClient(cfg.Client)
	p := &Provider{cfg: cfg, url: strings.TrimSuffix(cfg.BaseURL, "/") + "/responses"}
	p.HTTPAdapter = provider.NewHTTPAdapter(p, cfg.Name, cfg.APIKey, cfg.Headers)
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
	post := provider.Post{Name: p.cfg.Name, Client: p.cfg.Client, URL: p.url, Body: body, Accept: "text/event-stream",
		Headers: p.cfg.Headers, Decode: openai.DecodeError, JSONIsError: true}
	if p.cfg.APIKey != "" {
		post.Auth[0] = [2]string{"Authorization", "Bearer " + p.cfg.APIKey}
	}
	resp, err := post.Send(ctx)
	if err != nil {
		return nil, nil, err
	}
	return resp, wire.NewUpstreamStreamReader(resp.Body, p.cfg.MaxEventSize), nil
}
