// Package provider defines the contract between firstword and the model
// providers it calls, and the HTTP plumbing the adapters share. Each wire
// format has its own subpackage; providertest holds the conformance suite
// every adapter runs.
package provider

import (
	"context"

	"github.com/firstword/firstword/internal/chat"
)

// Provider turns a normalised request into a response stream.
//
// Stream sends req and returns an iterator over the response chunks. Each
// pair is a chunk and a nil error, or a zero Chunk and a non-nil error
// (a *chat.Error for upstream failures); iteration ends after an error.
// Breaking out of the loop or cancelling ctx aborts the upstream request at
// once. The iterator is single-use. req.Model is the upstream model name.
type Provider interface {
	Stream(ctx context.Context, req *chat.Request) chat.Stream
}

// Puller is a Provider whose answers can also be read chunk by chunk. The
// router pulls from such a provider directly: a chunk is written to the
// client under every frame between the handler and the upstream read, and
// an iterator between them adds one.
type Puller interface {
	Provider
	// Pull sends req and returns the answer's reader; a failure to send
	// is the reader's first error.
	Pull(ctx context.Context, req *chat.Request) Reader
}

// Reader is an answer read chunk by chunk.
type Reader interface {
	// Next returns the next chunk, valid until the following call; io.EOF
	// after the last; or the error that ends the answer (as Stream's).
	Next() (*chat.Chunk, error)
	// Close releases the answer, aborting the upstream request if it is
	// unfinished.
	Close()
}

// Range is Stream for a Puller: the reader as an iterator.
func Range(r Reader) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		defer r.Close()
		chat.Pull(r.Next)(yield)
	}
}
