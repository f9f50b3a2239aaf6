// Package anthropic is the provider adapter for Anthropic's Messages API
// (api.anthropic.com, and gateways that speak it).
package anthropic

import (
	"bytes"
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
	// APIKey is sent as the x-api-key header when set.
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
	cfg  Config
	url  string
	opts wire.EncodeOptions
}

// New returns a Provider.
func New(cfg Config) *Provider {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: provider.NewTransport()}
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	return &Provider{
		cfg:  cfg,
		url:  strings.TrimSuffix(cfg.BaseURL, "/") + "/messages",
		opts: wire.EncodeOptions{DefaultMaxTokens: cfg.DefaultMaxTokens, PromptCaching: cfg.PromptCaching},
	}
}

// Stream implements provider.Provider. It always streams from the
// upstream, whatever the client asked, so that every request can be
// metered and timed to its first token. Cancelling ctx aborts the upstream
// request at once, and the stream then yields context.Cause(ctx).
func (p *Provider) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return provider.Range(p.Pull(ctx, req))
}

// Pull implements provider.Puller: Stream's answer as a reader. The
// request is sent on the first Next. The wire reader stops at
// message_stop; the rest of the body is drained so that the connection
// goes back to the pool.
func (p *Provider) Pull(ctx context.Context, req *chat.Request) provider.Reader {
	return provider.PullHTTP(ctx, p.cfg.Name, p, req)
}

// Open implements provider.Opener.
func (p *Provider) Open(ctx context.Context, req *chat.Request) (*http.Response, provider.ChunkReader, error) {
	body, err := wire.EncodeRequest(req, p.opts)
	if err != nil {
		return nil, nil, &chat.Error{Category: chat.CategoryInvalidRequest, Provider: p.cfg.Name, Message: err.Error()}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, &chat.Error{Category: chat.CategoryInternal, Provider: p.cfg.Name, Message: err.Error()}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("Anthropic-Version", p.cfg.Version)
	if p.cfg.APIKey != "" {
		hreq.Header.Set("X-Api-Key", p.cfg.APIKey)
	}
	for k, v := range p.cfg.Headers {
		hreq.Header.Set(k, v)
	}
	resp, err := provider.Do(p.cfg.Client, hreq)
	if err != nil {
		return nil, nil, provider.TransportError(ctx, p.cfg.Name, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, nil, provider.ReadError(p.cfg.Name, resp, wire.DecodeError)
	}
	if e := provider.Unexpected(p.cfg.Name, resp, true, wire.DecodeError); e != nil {
		resp.Body.Close()
		return nil, nil, e
	}
	return resp, wire.NewStreamReader(resp.Body, p.cfg.MaxEventSize), nil
}
