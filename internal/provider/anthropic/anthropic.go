// Package anthropic is the provider adapter for Anthropic's Messages API
// (api.anthropic.com, and gateways that speak it).
package anthropic

import (
	"bytes"
	"context"
	"io"
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
// request is sent on the first Next.
func (p *Provider) Pull(ctx context.Context, req *chat.Request) provider.Reader {
	return &reader{p: p, ctx: ctx, req: req}
}

type reader struct {
	p    *Provider
	ctx  context.Context
	req  *chat.Request
	resp *http.Response
	sr   *wire.StreamReader
	err  error // the error that ended the answer, returned again
}

func (r *reader) Next() (*chat.Chunk, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.resp == nil {
		resp, err := r.p.open(r.ctx, r.req)
		if err != nil {
			r.err = err
			return nil, err
		}
		r.resp, r.sr = resp, wire.NewStreamReader(resp.Body, r.p.cfg.MaxEventSize)
	}
	c, err := r.sr.Next()
	switch {
	case err == io.EOF:
		// The reader stops at message_stop: read the rest of the body
		// so that the connection goes back to the pool.
		provider.Drain(r.resp.Body)
		r.err = io.EOF
		return nil, io.EOF
	case err != nil:
		err = provider.Cause(r.ctx, err)
		if ce, ok := err.(*chat.Error); ok && ce.Provider == "" {
			ce.Provider = r.p.cfg.Name
		}
		r.err = err
		return nil, err
	}
	return c, nil
}

func (r *reader) Close() {
	if r.resp != nil {
		r.resp.Body.Close()
	}
}

// open sends req and returns the response to read the answer from, or
// the error that ends the request before any chunk.
func (p *Provider) open(ctx context.Context, req *chat.Request) (*http.Response, error) {
	body, err := wire.EncodeRequest(req, p.opts)
	if err != nil {
		return nil, &chat.Error{Category: chat.CategoryInvalidRequest, Provider: p.cfg.Name, Message: err.Error()}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, &chat.Error{Category: chat.CategoryInternal, Provider: p.cfg.Name, Message: err.Error()}
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
		return nil, provider.TransportError(ctx, p.cfg.Name, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, provider.ReadError(p.cfg.Name, resp, wire.DecodeError)
	}
	if e := provider.Unexpected(p.cfg.Name, resp, true, wire.DecodeError); e != nil {
		resp.Body.Close()
		return nil, e
	}
	return resp, nil
}
