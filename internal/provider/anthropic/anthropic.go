// Package anthropic is the provider adapter for Anthropic's Messages API
// (api.anthropic.com, and gateways that speak it).
package anthropic

import (
	"net/http"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	wire "github.com/firstword/firstword/internal/wire/anthropic"
)

// DefaultVersion is the anthropic-version header sent when Config sets
// none.
const DefaultVersion = "2023-06-01"

// Config configures a Provider. BaseURL is the API root, e.g.
// https://api.anthropic.com/v1, and requests go to BaseURL + "/messages";
// the APIKey is sent as the x-api-key header; Headers may add
// anthropic-beta, for one.
type Config struct {
	provider.HTTPConfig
	// Version is the anthropic-version header; empty means DefaultVersion.
	Version string
	// DefaultMaxTokens is sent when a request sets no max_tokens, which
	// Anthropic requires; 0 means 4096.
	DefaultMaxTokens int
	// PromptCaching marks each request's cache breakpoints with
	// cache_control, so that Anthropic caches the stable prompt prefix.
	PromptCaching bool
}

// Provider calls the Messages API.
type Provider struct{ provider.HTTPAdapter }

// New returns a Provider.
func New(cfg Config) *Provider {
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	return &Provider{provider.NewHTTPAdapter(cfg.HTTPConfig, &format{
		url:     cfg.URL("/messages"),
		version: cfg.Version,
		opts:    wire.EncodeOptions{DefaultMaxTokens: cfg.DefaultMaxTokens, PromptCaching: cfg.PromptCaching},
	})}
}

// format is the Messages API's wire format, a provider.Wire.
type format struct {
	url     string
	version string
	opts    wire.EncodeOptions
}

func (f *format) Encode(req *chat.Request) ([]byte, error) { return wire.EncodeRequest(req, f.opts) }

func (f *format) Post(c *provider.HTTPConfig, body []byte, _ *chat.Request) provider.Post {
	post := c.Post(f.url, body)
	post.Auth = [2][2]string{{"Anthropic-Version", f.version}, {"X-Api-Key", c.APIKey}}
	post.Decode, post.JSONIsError = wire.DecodeError, true
	return post
}

func (*format) Reader(c *provider.HTTPConfig, resp *http.Response, _ *chat.Request) (provider.ChunkReader, error) {
	return wire.NewStreamReader(resp.Body, c.MaxEventSize), nil
}
