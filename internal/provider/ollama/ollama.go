// Package ollama is the provider adapter for Ollama's native chat API
// (POST /api/chat, an NDJSON stream). Ollama's OpenAI-compatible /v1 API
// can be reached with provider/openai instead.
package ollama

import (
	"context"
	"net/http"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	wire "github.com/firstword/firstword/internal/wire/ollama"
)

// Config configures a Provider. BaseURL is the server's root, e.g.
// http://127.0.0.1:11434; the APIKey, for Ollama's hosted API or a proxy
// in front of a server, is sent as a bearer token; MaxEventSize bounds
// one line of the response.
type Config struct {
	provider.HTTPConfig
}

// Provider calls an Ollama server.
type Provider struct {
	provider.HTTPAdapter // Stream and Pull, over Open
	cfg                  Config
	url                  string
}

// New returns a Provider.
func New(cfg Config) *Provider {
	p := &Provider{cfg: cfg, url: cfg.URL("/api/chat")}
	p.HTTPAdapter = provider.NewHTTPAdapter(p, &p.cfg.HTTPConfig)
	return p
}

// Open implements provider.Opener.
func (p *Provider) Open(ctx context.Context, req *chat.Request) (*http.Response, provider.ChunkReader, error) {
	body, err := wire.EncodeRequest(req)
	if err != nil {
		return nil, nil, provider.EncodeError(p.cfg.Name, err)
	}
	post := p.cfg.Post(p.url, body)
	post.Accept, post.Auth[0], post.Decode = "application/x-ndjson", provider.Bearer(p.cfg.APIKey), wire.DecodeError
	return provider.OpenStream(ctx, &post, wire.NewStreamReader, p.cfg.MaxEventSize)
}
