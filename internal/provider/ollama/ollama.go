// Package ollama is the provider adapter for Ollama's native chat API
// (POST /api/chat, an NDJSON stream). Ollama's OpenAI-compatible /v1 API
// can be reached with provider/openai instead.
package ollama

import (
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
type Provider struct{ provider.HTTPAdapter }

// New returns a Provider.
func New(cfg Config) *Provider {
	return &Provider{provider.NewHTTPAdapter(cfg.HTTPConfig, format{url: cfg.URL("/api/chat")})}
}

// format is /api/chat's wire format, a provider.Wire.
type format struct{ url string }

func (format) Encode(req *chat.Request) ([]byte, error) { return wire.EncodeRequest(req) }

func (f format) Post(c *provider.HTTPConfig, body []byte, _ *chat.Request) provider.Post {
	post := c.Post(f.url, body)
	post.Accept, post.Auth[0], post.Decode = "application/x-ndjson", provider.Bearer(c.APIKey), wire.DecodeError
	return post
}

func (format) Reader(c *provider.HTTPConfig, resp *http.Response, _ *chat.Request) (provider.ChunkReader, error) {
	return wire.NewStreamReader(resp.Body, c.MaxEventSize), nil
}
