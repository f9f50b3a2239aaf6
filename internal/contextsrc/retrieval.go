package contextsrc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultTopK is the number of passages Retrieval cites when TopK is 0.
const DefaultTopK = 3

// Retrieval is a Source that searches an Index for the question and cites
// the best passages.
type Retrieval struct {
	// Index is searched; it must not be nil.
	Index *Index
	// TopK is the number of passages cited (default 3).
	TopK int
	// SourceName is the source's name (default "retrieval").
	SourceName string
}

// Name returns SourceName, or "retrieval".
func (r Retrieval) Name() string {
	if r.SourceName == "" {
		return "retrieval"
	}
	return r.SourceName
}

// Fetch searches the index for q.Question. Text numbers the passages so the
// model can cite them, one per paragraph:
//
//	[1] (shipping.md) Standard shipping within Germany takes ...
//
//	[2] (returns.md) ...
//
// and Citations match the numbers. No match gives an empty Text and no
// error. The search is in memory and takes microseconds; Fetch checks ctx
// before it starts.
func (r Retrieval) Fetch(ctx context.Context, q Query) (Result, error) {
	res := Result{Source: r.Name()}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("%s: %w", res.Source, ctxErr(ctx))
	}
	if r.Index == nil {
		return res, fmt.Errorf("%s: %w", res.Source, errors.New("no index"))
	}
	k := r.TopK
	if k <= 0 {
		k = DefaultTopK
	}
	hits := r.Index.Search(q.Question, k)
	var b strings.Builder
	for i, h := range hits {
		if i > 0 {
			b.WriteString("\n\n")
		}
		n := i + 1
		b.WriteString("[" + strconv.Itoa(n) + "] (" + h.Doc + ") ")
		b.WriteString(h.Text)
		res.Citations = append(res.Citations, Citation{N: n, Doc: h.Doc, Passage: h.Passage})
	}
	res.Text = b.String()
	return res, nil
}
