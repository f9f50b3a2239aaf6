// Package gemini is the provider adapter for the Gemini API
// (generativelanguage.googleapis.com): it streams models.streamGenerateContent
// as server-sent events.
package gemini

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	wire "github.com/firstword/firstword/internal/wire/gemini"
)

// Config configures a Provider. BaseURL is the API root, e.g.
// https://generativelanguage.googleapis.com/v1beta; the APIKey is sent in
// the x-goog-api-key header (never in the URL, where logs and proxies
// would keep it).
type Config struct {
	provider.HTTPConfig
}

// Provider calls the Gemini API. A request's Model is the model's name,
// e.g. gemini-2.5-flash (a "models/" prefix is accepted too): it is part
// of the URL.
type Provider struct{ provider.HTTPAdapter }

// New returns a Provider.
func New(cfg Config) *Provider {
	return &Provider{provider.NewHTTPAdapter(cfg.HTTPConfig, format{})}
}

// format is streamGenerateContent's wire format, a provider.Wire.
type format struct{}

func (format) Encode(req *chat.Request) ([]byte, error) { return wire.EncodeRequest(req) }

func (format) Post(c *provider.HTTPConfig, body []byte, req *chat.Request) provider.Post {
	post := c.Post(c.URL("/models/"+url.PathEscape(strings.TrimPrefix(req.Model, "models/"))+":streamGenerateContent?alt=sse"), body)
	post.Auth[0] = [2]string{"x-goog-api-key", c.APIKey}
	post.Decode, post.JSONIsError = wire.DecodeError, true
	post.ReadError = func(resp *http.Response) *chat.Error { return readError(c.Name, resp) }
	return post
}

func (format) Reader(c *provider.HTTPConfig, resp *http.Response, req *chat.Request) (provider.ChunkReader, error) {
	sr := wire.NewStreamReader(resp.Body, c.MaxEventSize)
	sr.Candidates = req.N
	return sr, nil
}

// readError classifies a non-2xx response. Gemini states its retry delay
// in the body (a RetryInfo detail) more often than in a Retry-After
// header; the header wins when both are there.
func readError(name string, resp *http.Response) *chat.Error {
	var fromBody time.Duration
	e := provider.ReadError(name, resp, func(status int, body []byte) *chat.Error {
		ce := wire.DecodeError(status, body)
		fromBody = ce.RetryAfter
		return ce
	})
	if e.RetryAfter == 0 {
		e.RetryAfter = fromBody
	}
	return e
}
