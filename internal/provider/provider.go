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

// Func adapts a function to the Provider interface.
type Func func(ctx context.Context, req *chat.Request) chat.Stream

// Stream calls f.
func (f Func) Stream(ctx context.Context, req *chat.Request) chat.Stream { return f(ctx, req) }
