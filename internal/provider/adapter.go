package provider

import (
	"context"
	"net/http"

	"github.com/firstword/firstword/internal/chat"
)

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

// NewHTTPAdapter returns the HTTPAdapter of o, for the provider name
// whose apiKey and header values are scrubbed from errors (see
// Scrubber).
func NewHTTPAdapter(o Opener, name, apiKey string, headers map[string]string) HTTPAdapter {
	return HTTPAdapter{opener: o, scrub: NewScrubber(name, apiKey, headers)}
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

// HTTPClient returns c, or when c is nil a client on NewTransport: what
// an adapter's Config.Client means when it is not set.
func HTTPClient(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{Transport: NewTransport()}
	}
	return c
}
