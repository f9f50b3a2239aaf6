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
	provider.HTTPAdapter // Stream and Pull, over Open
	cfg                  Config
	url                  string
}

// New returns a Provider.
func New(cfg Config) *Provider {
	cfg.Client = provider.HTTPClient(cfg.Client)
	p := &Provider{cfg: cfg, url: strings.TrimSuffix(cfg.BaseURL, "/") + "/api/chat"}
	p.HTTPAdapter = provider.NewHTTPAdapter(p, cfg.Name, "", cfg.Headers)
	return p
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
