// Package openairesponses is the provider adapter for OpenAI's Responses
// API (POST /v1/responses), on which OpenAI serves its newer models and
// features, and for the servers that imitate it. Requests are sent with
// store false: the whole conversation goes in each request, as on every
// other upstream, and OpenAI keeps nothing for the gateway.
package openairesponses

import (
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
type Provider struct{ provider.HTTPAdapter }

// New returns a Provider.
func New(cfg Config) *Provider {
	return &Provider{provider.NewHTTPAdapter(cfg.HTTPConfig, format{url: cfg.URL("/responses")})}
}

// format is the Responses API's wire format, a provider.Wire.
type format struct{ url string }

func (format) Encode(req *chat.Request) ([]byte, error) { return wire.EncodeUpstreamRequest(req) }

func (f format) Post(c *provider.HTTPConfig, body []byte, _ *chat.Request) provider.Post {
	// The Responses API answers errors with Chat Completions' error body
	// ({"error": {message, type, param, code}}), so openai.DecodeError
	// reads them; a 200 with such a body (from a proxy) is an error too.
	post := c.Post(f.url, body)
	post.Auth[0], post.Decode, post.JSONIsError = provider.Bearer(c.APIKey), openai.DecodeError, true
	return post
}

func (format) Reader(c *provider.HTTPConfig, resp *http.Response, _ *chat.Request) (provider.ChunkReader, error) {
	return wire.NewUpstreamStreamReader(resp.Body, c.MaxEventSize), nil
}
