package provider

import (
	"context"
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
// event stream; the adapter's Wire adds its Auth and decoding.
func (c *HTTPConfig) Post(url string, body []byte) Post {
	return Post{Name: c.Name, Client: c.Client, URL: url, Body: body, Accept: "text/event-stream", Headers: c.Headers}
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

// Wire is an HTTP adapter's wire format: all an adapter writes besides
// its Config, given to NewHTTPAdapter.
type Wire interface {
	// Encode returns req's body, or the error that says why req cannot
	// be encoded. It is a method of its own, apart from Post, so that
	// encoding (encoding/json is deep) runs with as few frames above it
	// as the stream allows: a request is encoded from the stream's first
	// pull, under every frame of the stream, where the open stream's
	// goroutine must stay within its 8 KiB stack (TestOpenStreamStacks).
	Encode(req *chat.Request) ([]byte, error)
	// Post returns the Post that sends body, req encoded, as c configures
	// it: c.Post to the adapter's endpoint, with the adapter's Accept,
	// Auth and error decoding.
	Post(c *HTTPConfig, body []byte, req *chat.Request) Post
	// Reader returns the decoder of resp's body, the 2xx answer to req,
	// or the error that ends the request.
	Reader(c *HTTPConfig, resp *http.Response, req *chat.Request) (ChunkReader, error)
}

// HTTPAdapter is an HTTP adapter (provider/openai, anthropic, gemini,
// ollama, openairesponses) made of its configuration and its Wire: the
// Opener that sends a request as the Wire encodes it and reads the answer
// with its decoder, and the Provider and Puller methods, which send the
// request on the first Next through PullHTTP and scrub the adapter's
// secrets from every error. An adapter's Provider embeds it.
type HTTPAdapter struct {
	cfg   HTTPConfig
	wire  Wire
	scrub *Scrubber
}

// NewHTTPAdapter returns the HTTPAdapter that sends requests as c
// configures them, in w's wire format, and scrubs c's APIKey and header
// values from errors (see Scrubber). A nil c.Client means a client on
// NewTransport.
func NewHTTPAdapter(c HTTPConfig, w Wire) HTTPAdapter {
	if c.Client == nil {
		c.Client = &http.Client{Transport: NewTransport()}
	}
	return HTTPAdapter{cfg: c, wire: w, scrub: NewScrubber(c.Name, c.APIKey, c.Headers)}
}

// Open implements Opener. A request the Wire cannot encode is an invalid
// one (EncodeError); an error from its Reader is reported by its cause
// when ctx ended, and names the provider.
func (a *HTTPAdapter) Open(ctx context.Context, req *chat.Request) (*http.Response, ChunkReader, error) {
	body, err := a.wire.Encode(req)
	if err != nil {
		return nil, nil, EncodeError(a.cfg.Name, err)
	}
	post := a.wire.Post(&a.cfg, body, req)
	resp, err := post.Send(ctx)
	if err != nil {
		return nil, nil, err
	}
	cr, err := a.wire.Reader(&a.cfg, resp, req)
	if err != nil {
		resp.Body.Close()
		err = Cause(ctx, err)
		if ce, ok := err.(*chat.Error); ok && ce.Provider == "" {
			ce.Provider = a.cfg.Name
		}
		return nil, nil, err
	}
	return resp, cr, nil
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
	return PullHTTP(ctx, a.scrub, a, req)
}
