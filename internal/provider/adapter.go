package provider

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/firstword/firstword/internal/chat"
)

// HTTPConfig is the part of an HTTP adapter's Config that every adapter
// has, embedded there: which upstream, how to reach it and how to
// authenticate. Each adapter's Config says what its BaseURL looks like
// and how its API takes the APIKey.
type HTTPConfig struct {
	// Name identifies the provider in errors and logs.
	Name string
	// BaseURL is the API root; the adapter adds its endpoint's path.
	BaseURL string
	// APIKey authenticates the requests when set, sent as the upstream's
	// API expects. It and the values of Headers are scrubbed from the
	// errors the Provider returns (see Scrubber).
	APIKey string
	// Headers are added to every request, after the adapter's own (so
	// that one of them may replace the adapter's Authorization).
	Headers map[string]string
	// Client sends the requests; nil means a client on NewTransport.
	Client *http.Client
	// MaxEventSize bounds one upstream event (one line of an NDJSON
	// stream); 0 means 1 MiB.
	MaxEventSize int
}

// URL returns the address of the endpoint at path (with its leading
// slash) below BaseURL.
func (c *HTTPConfig) URL(path string) string {
	return strings.TrimSuffix(c.BaseURL, "/") + path
}

// Post returns the Post of body to url as c configures it, asking for an
// event stream; the adapter adds its Auth and decoding.
func (c *HTTPConfig) Post(url string, body []byte) Post {
	return Post{Name: c.Name, Client: c.Client, URL: url, Body: body, Accept: "text/event-stream", Headers: c.Headers}
}

// OpenStream sends post and returns what an Opener's Open does: the
// response, with newReader's reader of its body (events of at most
// maxEventSize bytes), or the error that ends the request.
func OpenStream[R ChunkReader](ctx context.Context, post *Post, newReader func(io.Reader, int) R, maxEventSize int) (*http.Response, ChunkReader, error) {
	resp, err := post.Send(ctx)
	if err != nil {
		return nil, nil, err
	}
	return resp, newReader(resp.Body, maxEventSize), nil
}

// Bearer returns the Authorization header (for Post.Auth) that sends
// apiKey as a bearer token, with an empty value (not sent) when apiKey is
// empty.
func Bearer(apiKey string) [2]string {
	if apiKey == "" {
		return [2]string{"Authorization", ""}
	}
	return [2]string{"Authorization", "Bearer " + apiKey}
}

// HTTPAdapter is what every HTTP adapter (provider/openai, anthropic,
// gemini, ollama, openairesponses) is besides its Opener: the Provider
// and Puller methods, which send the request on the first Next through
// PullHTTP and scrub the adapter's secrets from every error. An adapter
// embeds it, made by NewHTTPAdapter with the adapter itself as the
// Opener, and writes only Open, the part that differs.
type HTTPAdapter struct {
	opener Opener
	scrub  *Scrubber
}

// NewHTTPAdapter returns the HTTPAdapter of o, configured with c, whose
// APIKey and header values it scrubs from errors (see Scrubber). It sets
// a nil c.Client to a client on NewTransport, for o's requests too: call
// it with the configuration o keeps.
func NewHTTPAdapter(o Opener, c *HTTPConfig) HTTPAdapter {
	if c.Client == nil {
		c.Client = &http.Client{Transport: NewTransport()}
	}
	return HTTPAdapter{opener: o, scrub: NewScrubber(c.Name, c.APIKey, c.Headers)}
}

// Stream implements Provider. The adapters always stream from the
// upstream, whatever the client asked, so that every request can be
// metered and timed to its first token. Cancelling ctx aborts the
// upstream request at once, and the stream then yields
// context.Cause(ctx).
func (a *HTTPAdapter) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return Range(a.Pull(ctx, req))
}

// Pull implements Puller: Stream's answer as a reader. The request is
// sent on the first Next. The wire readers stop where their stream's
// answer ends (an end marker, a terminal event, the done line); the rest
// of the body is drained so that the connection goes back to the pool.
func (a *HTTPAdapter) Pull(ctx context.Context, req *chat.Request) Reader {
	return PullHTTP(ctx, a.scrub, a.opener, req)
}
