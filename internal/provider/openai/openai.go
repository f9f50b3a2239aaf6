// Package openai is the provider adapter for OpenAI's Chat Completions API
// and every server that speaks it (vLLM, llama.cpp, Ollama's /v1, Groq,
// Together, LM Studio...).
package openai

import (
	"bytes"
	"context"
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
	// APIKey is sent as a bearer token when set.
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

// Provider calls an OpenAI-compatible API.
type Provider struct {
	cfg Config
	url string
}

// New returns a Provider.
func New(cfg Config) *Provider {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: provider.NewTransport()}
	}
	return &Provider{cfg: cfg, url: strings.TrimSuffix(cfg.BaseURL, "/") + "/chat/completions"}
}

// Stream implements provider.Provider. It always streams from the upstream
// and always asks for usage, whatever the client asked, so that every
// request can be metered and timed to its first token.
func (p *Provider) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		body, err := wire.EncodeRequest(req, p.cfg.MaxTokensField)
		if err != nil {
			yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryInvalidRequest, Provider: p.cfg.Name, Message: err.Error()})
			return
		}
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
		if err != nil {
			yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryInternal, Provider: p.cfg.Name, Message: err.Error()})
			return
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "text/event-stream")
		if p.cfg.APIKey != "" {
			hreq.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
		}
		for k, v := range p.cfg.Headers {
			hreq.Header.Set(k, v)
		}
		resp, err := provider.Do(p.cfg.Client, hreq)
		if err != nil {
			yield(chat.Chunk{}, provider.TransportError(ctx, p.cfg.Name, err))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			yield(chat.Chunk{}, provider.ReadError(p.cfg.Name, resp, wire.DecodeError))
			return
		}
		stream := wire.ReadStream(resp.Body, p.cfg.MaxEventSize)
		switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
		case "application/json":
			// A server that ignored stream:true and answered whole.
			stream = wire.ReadCompletion(resp.Body)
		}
		if e := provider.Unexpected(p.cfg.Name, resp, false, nil); e != nil {
			yield(chat.Chunk{}, e)
			return
		}
		for ch, err := range stream {
			if err != nil {
				err = provider.Cause(ctx, err)
				if ce, ok := err.(*chat.Error); ok && ce.Provider == "" {
					ce.Provider = p.cfg.Name
				}
				yield(chat.Chunk{}, err)
				return
			}
			if !yield(ch, nil) {
				return
			}
		}
		provider.Drain(resp.Body)
	}
}
