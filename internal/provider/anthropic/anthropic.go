// Package anthropic is the provider adapter for Anthropic's Messages API
// (api.anthropic.com, and gateways that speak it).
package anthropic

import (
	"context"
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
type Provider struct {
	provider.HTTPAdapter // Stream and Pull, over Open
	cfg                  Config
	url                  string
	opts                 wire.EncodeOptions
}

// New returns a Provider.
func New(cfg Config) *Provider {
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	p := &Provider{
		cfg:  cfg,
		url:  cfg.URL("/messages"),
		opts: wire.EncodeOptions{DefaultMaxTokens: cfg.DefaultMaxTokens, PromptCaching: cfg.PromptCaching},
	}
	p.HTTPAdapter = provider.NewHTTPAdapter(p, &p.cfg.HTTPConfig)
	return p
}

// Open implements provider.Opener.
func (p *Provider) Open(ctx context.Context, req *chat.Request) (*http.Response, provider.ChunkReader, error) {
	body, err := wire.EncodeRequest(req, p.opts)
	if err != nil {
		return nil, nil, provider.EncodeError(p.cfg.Name, err)
	}
	post := p.cfg.Post(p.url, body)
	post.Auth = [2][2]string{{"Anthropic-Version", p.cfg.Version}, {"X-Api-Key", p.cfg.APIKey}}
	post.Decode, post.JSONIsError = wire.DecodeError, true
	return provider.OpenStream(ctx, &post, wire.NewStreamReader, p.cfg.MaxEventSize)
}
