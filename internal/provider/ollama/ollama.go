// Package ollama is the provider adapter for Ollama's native chat API
// (POST /api/chat, an NDJSON stream). Ollama's OpenAI-compatible /v1 API
// can be reached with provider/openai instead.
package ollama

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	wire "github.com/firstword/firstword/internal/wire/ollama"
)

// Config configures a Provider.
type Config struct {
	// Name identifies the provider in errors and logs.
	Name string
	// BaseURL is the server's root, e.g. http://127.0.0.1:11434.
	BaseURL string
	// Headers are added to every request (e.g. Authorization for a proxy
	// in front of Ollama).
	Headers map[string]string
	// Client sends the requests; nil means a client on provider.NewTransport.
	Client *http.Client
	// MaxLineSize bounds one line of the response; 0 means 1 MiB.
	MaxLineSize int
}

// Provider calls an Ollama server.
type Provider struct {
	cfg Config
	url string
}

// New returns a Provider.
func New(cfg Config) *Provider {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: provider.NewTransport()}
	}
	return &Provider{cfg: cfg, url: strings.TrimSuffix(cfg.BaseURL, "/") + "/api/chat"}
}

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return provider.Range(p.Pull(ctx, req))
}

// Pull implements provider.Puller: Stream's answer as a reader. The
// request is sent on the first Next.
func (p *Provider) Pull(ctx context.Context, req *chat.Request) provider.Reader {
	return provider.PullHTTP(ctx, p.cfg.Name, p, req)
}

// Open implements provider.Opener.
func (p *Provider) Open(ctx context.Context, req *chat.Request) (*http.Response, provider.ChunkReader, error) {
	body, err := wire.EncodeRequest(req)
	if err != nil {
		return nil, nil, &chat.Error{Category: chat.CategoryInvalidRequest, Provider: p.cfg.Name, Message: err.Error()}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, &chat.Error{Category: chat.CategoryInternal, Provider: p.cfg.Name, Message: err.Error()}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/x-ndjson")
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
	if e := provider.Unexpected(p.cfg.Name, resp, false, nil); e != nil {
		resp.Body.Close()
		return nil, nil, e
	}
	return resp, wire.NewStreamReader(resp.Body, p.cfg.MaxLineSize), nil
}
