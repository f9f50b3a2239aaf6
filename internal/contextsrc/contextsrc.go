// Package contextsrc provides the context sources of a chat prompt: a
// built-in BM25 index over a folder of documents (Retrieval) and configured
// HTTP calls (Lookup). The caller runs sources in parallel and applies
// per-source timeouts and the optional-source policy; every Fetch here
// returns as soon as its ctx ends.
package contextsrc

import (
	"context"
	"fmt"
)

// Query is what a source is asked about.
type Query struct {
	TenantID, UserID, ConversationID, Question string
}

// Result is what a source contributes to the prompt.
type Result struct {
	// Source is the source's name.
	Source string
	// Text goes into the prompt; empty means the source has nothing to add.
	Text string
	// Citations are the numbered references in Text, if any.
	Citations []Citation
}

// Citation is a numbered passage in a Result's Text.
type Citation struct {
	// N is the number written in Text as "[N]", from 1.
	N int
	// Doc is the document's path relative to the indexed folder, with
	// forward slashes.
	Doc string
	// Passage is the passage's index within Doc, from 0.
	Passage int
}

// Source is a context source.
type Source interface {
	// Name identifies the source in results, logs and configuration.
	Name() string
	// Fetch returns the source's context for q. It returns promptly when
	// ctx ends, with an error wrapping ctx's error.
	Fetch(ctx context.Context, q Query) (Result, error)
}

// ctxErr is ctx's error, and its cause when that differs, so that callers
// can test for either.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}
