// Package ollama is the provider adapter for Ollama's native chat API
// (POST /api/chat, an NDJSON stream). Ollama's OpenAI-compatible /v1 API
// can be reached with provider/openai instead.
package ollama

import (
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
	// in front of Ollama). Their values are scrubbed from the errors the
	// Provider returns (see provider.Scrubber).
	Headers map[string]string
	// Client sends the requests; nil means a client on provider.NewTransport.
	Client *http.Client
	// MaxLineSize bounds one line of the response; 0 means 1 MiB.
	MaxLineSize int
}

// Provider calls an Ollama server.
type Provider struct {
	cfg   Config
	url   string
	scrub *provider.Scrubber
}

// New returns a Provider.
func New(cfg Config) *Provider {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: provider.NewTransport()}
	}
	return &Provider{cfg: cfg, url: strings.TrimSuffix(cfg.BaseURL, "/") + "/api/chat", scrub: provider.NewScrubber(cfg.Name, "", cfg.Headers)}
}

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return provider.Range(p.Pull(ctx, req))
}

// Pull implements provider.Puller: Stream's answer as a reader. The
// request is sent on the first Next.
func (p *Provider) Pull(ctx context.Context, req *chat.Request) provider.Reader {
	return provider.PullHTTP(ctx, p.scrub, p, req)
}

// Open implements provider.Opener.
func (p *Provider) Open(ctx context.Context, req *chat.Request) (*http.Response, provider.ChunkReader, error) {
	body, err := wire.EncodeRequest(req)
	if err != nil {
		return nil, nil, provider.EncodeError(p.cfg.Name, err)
	}
	post := provider.Post{Name: p.cfg.Name, Client: p.cfg.Client, URL: p.url, Body: body, Accept: "application/x-ndjson",
		Headers: p.cfg.Headers, Decode: wire.DecodeError}
	resp, err := post.Send(ctx)
	if err != nil {
		return nil, nil, err
	}
	return resp, wire.NewStreamReader(resp.Body, p.cfg.MaxLineSize), nil
}
