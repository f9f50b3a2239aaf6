// Package anthropic is the provider adapter for Anthropic's Messages API
// (api.anthropic.com, and gateways that speak it).
package anthropic

import (
	"context"
	"net/http"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	wire "github.com/firstword/firstword/internal/wire/anthropic"
)

// DefaultVersion is the anthropic-version header sent when Config sets
// none.
const DefaultVersion = "2023-06-01"

// Config configures a Provider.
type Config struct {
	// Name identifies the provider in errors and logs.
	Name string
	// BaseURL is the API root, e.g. https://api.anthropic.com/v1; requests
	// go to BaseURL + "/messages".
	BaseURL string
	// APIKey is sent as the x-api-key header when set. It and the values
	// of Headers are scrubbed from the errors the Provider returns (see
	// provider.Scrubber).
	APIKey string
	// Headers are added to every request (anthropic-beta, for one).
	Headers map[string]string
	// Client sends the requests; nil means a client on provider.NewTransport.
	Client *http.Client
	// MaxEventSize bounds one upstream event; 0 means 1 MiB.
	MaxEventSize int
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
	cfg.Client = provider.HTTPClient(cfg.Client)
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	p := &Provider{
		cfg:  cfg,
		url:  strings.TrimSuffix(cfg.BaseURL, "/") + "/messages",
		opts: wire.EncodeOptions{DefaultMaxTokens: cfg.DefaultMaxTokens, PromptCaching: cfg.PromptCaching},
	}
	p.HTTPAdapter = provider.NewHTTPAdapter(p, cfg.Name, cfg.APIKey, cfg.Headers)
	return p
}

// Open implements provider.Opener.
func (p *Provider) Open(ctx context.Context, req *chat.Request) (*http.Response, provider.ChunkReader, error) {
	body, err := wire.EncodeRequest(req, p.opts)
	if err != nil {
		return nil, nil, provider.EncodeError(p.cfg.Name, err)
	}
	post := provider.Post{Name: p.cfg.Name, Client: p.cfg.Client, URL: p.url, Body: body, Accept: "text/event-stream",
		Auth:    [2][2]string{{"Anthropic-Version", p.cfg.Version}, {"X-Api-Key", p.cfg.APIKey}},
		Headers: p.cfg.Headers, Decode: wire.DecodeError, JSONIsError: true}
	resp, err := post.Send(ctx)
	if err != nil {
		return nil, nil, err
	}
	return resp, wire.NewStreamReader(resp.Body, p.cfg.MaxEventSize), nil
}
