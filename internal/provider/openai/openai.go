// Package openai is the provider adapter for OpenAI's Chat Completions API
// and every server that speaks it (vLLM, llama.cpp, Ollama's /v1, Groq,
// Together, LM Studio...).
package openai

import (
	"context"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// Config configures a Provider.
type Config struct {
	// Name identifies the provider in errors and logs.
	Name string
	// BaseURL is the API root, e.g. https://api.openai.com/v1.
	BaseURL string
	// APIKey is sent as a bearer token when set. It and the values of
	// Headers are scrubbed from the errors the Provider returns (see
	// provider.Scrubber).
	APIKey string
	// Headers are added to every request.
	Headers map[string]string
	// Client sends the requests; nil means a client on provider.NewTransport.
	Client *http.Client
	// MaxEventSize bounds one upstream event; 0 means 1 MiB.
	MaxEventSize int
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
	cfg.Client = provider.HTTPClient(cfg.Client)
	p := &Provider{cfg: cfg, url: strings.TrimSuffix(cfg.BaseURL, "/") + "/chat/completions"}
	p.HTTPAdapter = provider.NewHTTPAdapter(p, cfg.Name, cfg.APIKey, cfg.Headers)
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
	post := provider.Post{Name: p.cfg.Name, Client: p.cfg.Client, URL: p.url, Body: body, Accept: "text/event-stream",
		Headers: p.cfg.Headers, Decode: wire.DecodeError}
	if p.cfg.APIKey != "" {
		post.Auth[0] = [2]string{"Authorization", "Bearer " + p.cfg.APIKey}
	}
	if resp, err = post.Send(ctx); err != nil {
		return nil, false, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return resp, mt == "application/json", nil
}
