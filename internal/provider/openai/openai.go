// Package openai is the provider adapter for OpenAI's Chat Completions API
// and every server that speaks it (vLLM, llama.cpp, Ollama's /v1, Groq,
// Together, LM Studio...).
package openai

import (
	"io"
	"mime"
	"net/http"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// Config configures a Provider. BaseURL is the API root, e.g.
// https://api.openai.com/v1; the APIKey is sent as a bearer token.
type Config struct {
	provider.HTTPConfig
	// MaxTokensField is "max_tokens" (default) or "max_completion_tokens".
	MaxTokensField string
}

// Provider calls an OpenAI-compatible API. Its requests always ask for
// the usage (stream_options.include_usage), whatever the client asked, so
// that every request can be metered.
type Provider struct{ provider.HTTPAdapter }

// New returns a Provider.
func New(cfg Config) *Provider {
	return &Provider{provider.NewHTTPAdapter(cfg.HTTPConfig, &format{url: cfg.URL("/chat/completions"), maxTokensField: cfg.MaxTokensField})}
}

// format is the Chat Completions wire format, a provider.Wire.
type format struct {
	url            string
	maxTokensField string
}

func (f *format) Encode(req *chat.Request) ([]byte, error) {
	return wire.EncodeRequest(req, f.maxTokensField)
}

func (f *format) Post(c *provider.HTTPConfig, body []byte, _ *chat.Request) provider.Post {
	post := c.Post(f.url, body)
	post.Auth[0], post.Decode = provider.Bearer(c.APIKey), wire.DecodeError
	return post
}

// Reader reads the event stream, or the whole completion of a server that
// ignored stream:true and answered whole.
func (*format) Reader(c *provider.HTTPConfig, resp *http.Response, _ *chat.Request) (provider.ChunkReader, error) {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return wire.NewStreamReader(resp.Body, c.MaxEventSize), nil
	}
	cs, err := wire.CompletionChunks(resp.Body)
	if err != nil {
		return nil, err
	}
	return &chunkList{cs: cs}, nil
}

// chunkList reads a whole completion's chunks.
type chunkList struct {
	cs []chat.Chunk
	c  chat.Chunk
}

func (l *chunkList) Next() (*chat.Chunk, error) {
	if len(l.cs) == 0 {
		return nil, io.EOF
	}
	l.c, l.cs = l.cs[0], l.cs[1:]
	return &l.c, nil
}
