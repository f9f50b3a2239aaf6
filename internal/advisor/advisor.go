// Package advisor does the lesson's last rule for the operator: measure,
// then pull the lever with the largest number. It keeps a bounded sample
// of each alias's recent requests (timings, tokens, cost, the pre-call
// steps, and hashes of the request and of its stable prefix, never the
// texts) and replays them with each lever turned on, one at a time, to
// predict what the lever would save at p50 and p95 of the time to first
// word and the time to complete, and in cost. The formulas are in
// docs/LEVERS.md ("The advisor").
package advisor

import (
	"slices"
	"sync"
	"time"
)

// Sample is one finished request, as the advisor keeps it.
type Sample struct {
	Time                      time.Time
	Tenant, Alias, Deployment string
	// Complete: the answer ended normally (only those count for the
	// time to complete).
	Complete bool
	// TTFT is the model's first token, TTFW the client's first word,
	// Total the last byte, all from the request's arrival; Gen is the
	// time from the first visible token to the last.
	TTFT, TTFW, Total, Gen time.Duration
	// CallStart is when the model was first called (after the pre-call
	// steps): TTFT-CallStart is the model's own time to first token.
	CallStart time.Duration
	// Thinking is how long the model thought before its answer.
	Thinking time.Duration
	// Tokens: input (of which Cached were read from a prompt cache),
	// output (of which Reasoning were thinking).
	Input, Cached, Output, Reasoning int
	Cost                             float64
	// Steps are the pre-call context steps, from the request's arrival.
	Steps []Step
	// RepeatKey identifies the request's content (0: it could not be
	// cached: several choices, tools in flight...); CacheHit: it was
	// answered from the response cache.
	RepeatKey uint64
	CacheHit  bool
	// Coalesced: it shared another request's upstream stream (its tokens
	// are its share of that stream's).
	Coalesced bool
	// PrefixKey identifies its stable prefix (system prompt and tools; 0:
	// none) of about PrefixTokens tokens.
	PrefixKey    uint64
	PrefixTokens int
	// FirstTokenTimeouts counts its attempts abandoned at their
	// first-token timeout.
	FirstTokenTimeouts int
}

// Step is a pre-call step's span.
type Step struct {
	Name       string
	Start, End time.Duration
}

// Recorder keeps the last samples of each tenant's aliases. Safe for
// concurrent use.
type Recorder struct {
	width time.Duration
	keep  int

	mu   sync.Mutex
	per  map[key]*ring
	adds int
}

// sweepEvery is how many Adds pass between sweeps of the aliases whose
// every sample has left the window.
const sweepEvery = 4096

type key struct{ tenant, alias string }

type ring struct {
	s    []Sample
	next int
}

// NewRecorder keeps, per tenant and alias, the last keep samples of the
// last width (defaults: 2,000 and 15 minutes).
func NewRecorder(width time.Duration, keep int) *Recorder {
	if width <= 0 {
		width = 15 * time.Minute
	}
	if keep <= 0 {
		keep = 2000
	}
	return &Recorder{width: width, keep: keep, per: map[key]*ring{}}
}

// Add records a finished request.
func (r *Recorder) Add(s Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adds++; r.adds%sweepEvery == 0 {
		r.sweep(s.Time)
	}
	k := key{s.Tenant, s.Alias}
	g := r.per[k]
	if g == nil {
		g = &ring{}
		r.per[k] = g
	}
	if len(g.s) < r.keep {
		g.s = append(g.s, s)
		return
	}
	g.s[g.next] = s
	g.next = (g.next + 1) % r.keep
}

// Samples returns a tenant's ("" for every tenant's) samples of the last
// width at now, by alias, each in time order.
func (r *Recorder) Samples(now time.Time, tenant string) map[string][]Sample {
	out := map[string][]Sample{}
	r.mu.Lock()
	for k, g := range r.per {
		if tenant != "" && k.tenant != tenant {
			continue
		}
		for _, s := range g.s {
			if now.Sub(s.Time) <= r.width {
				out[k.alias] = append(out[k.alias], s)
			}
		}
	}
	r.mu.Unlock()
	for _, ss := range out {
		slices.SortFunc(ss, func(a, b Sample) int { return a.Time.Compare(b.Time) })
	}
	return out
}

// sweep forgets the tenants' aliases with no sample in the window at now,
// so that the recorder holds what the window does. Call with mu held.
func (r *Recorder) sweep(now time.Time) {
	for k, g := range r.per {
		live := false
		for i := range g.s {
			if now.Sub(g.s[i].Time) <= r.width {
				live = true
				break
			}
		}
		if !live {
			delete(r.per, k)
		}
	}
}
