// Package openai is the provider adapter for OpenAI's Chat Completions API
// and every server that speaks it (vLLM, llama.cpp, Ollama's /v1, Groq,
// Together, LM Studio...).
package openai

import (
	"context"
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
type Provider struct {
	provider.HTTPAdapter // Stream and Pull, over Open
	cfg                  Config
	url                  string
}

// New returns a Provider.
func New(cfg Config) *Provider {
	p := &Provider{cfg: cfg, url: cfg.URL("/chat/completions")}
	p.HTTPAdapter = provider.NewHTTPAdapter(p, &p.cfg.HTTPConfig)
	return p
}

// Open implements provider.Opener.
func (p *Provider) Open(ctx context.Context, req *chat.Request) (*http.Response, provider.ChunkReader, error) {
	resp, whole, err := p.open(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if !whole {
		return resp, wire.NewStreamReader(resp.Body, p.cfg.MaxEventSize), nil
	}
	// A server that ignored stream:true and answered whole.
	cs, err := wire.CompletionChunks(resp.Body)
	if err != nil {
		resp.Body.Close()
		err = provider.Cause(ctx, err)
		if ce, ok := err.(*chat.Error); ok && ce.Provider == "" {
			ce.Provider = p.cfg.Name
		}
		return nil, nil, err
	}
	return resp, &chunkList{cs: cs}, nil
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

// open sends req and returns the response to read the answer from, and
// whether it is a whole completion (from a server that ignored
// stream:true), or the error that ends the request before any chunk.
func (p *Provider) open(ctx context.Context, req *chat.Request) (resp *http.Response, whole bool, err error) {
	body, err := wire.EncodeRequest(req, p.cfg.MaxTokensField)
	if err != nil {
		return nil, false, provider.EncodeError(p.cfg.Name, err)
	}
	post := p.cfg.Post(p.url, body)
	post.Auth[0], post.Decode = provider.Bearer(p.cfg.APIKey), wire.DecodeError
	if resp, err = post.Send(ctx); err != nil {
		return nil, false, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return resp, mt == "application/json", nil
}
