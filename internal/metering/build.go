package metering

import (
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/router"
)

// Request is what a surface knows of a request, to meter it.
type Request struct {
	ID, Surface, Tenant, User string
	// KeyID is the API key the request was made with ("" in local mode).
	KeyID string
	// Alias is the model the client asked for.
	Alias  string
	Stream bool
	// Timings is the request's stage recorder, completed: its arrival,
	// time to first word and total are the record's. Not nil.
	Timings *budget.Recorder
	// TraceID identifies the request's trace (hex); TraceParent is the
	// client's traceparent header, if it sent one.
	TraceID, TraceParent string
}

// Ending is how a request ended, as its surface tells it: the status and,
// for a failure, the error's code and message.
type Ending struct {
	Status           Status
	ErrorCode, Error string
}

// Build returns the record of a request that ended: who asked what (q),
// what the levers and the router did (rep), what was delivered (t, whose
// usage u is, before any sharing: see Charge) and how it ended (e). It is
// the one place a record is made, for every surface.
func (p Prices) Build(q Request, rep *levers.Report, t *Tally, u chat.Usage, e Ending) *Record {
	start := q.Timings.Start()
	total := q.Timings.TTC()
	if total == 0 {
		total = time.Since(start)
	}
	r := &Record{
		RequestID: q.ID, Time: start, Surface: q.Surface, Tenant: q.Tenant, User: q.User, KeyID: q.KeyID,
		Alias: q.Alias, Deployment: rep.Deployment, Model: rep.Model, Stream: q.Stream,
		Status: e.Status, FinishReason: string(t.Finish), ErrorCode: e.ErrorCode, Error: e.Error,
		Cached: rep.Cached, Coalesced: rep.Coalesced, Rule: rep.Rule,
		TTFW: q.Timings.TTFW(), TTFThought: q.Timings.TTFThought(), Thinking: q.Timings.Thinking(), Total: total,
		Attempts: rep.Tries(), Fallbacks: rep.Fallbacks(), Hedged: rep.Hedged(), Retries: rep.Retries(), Continuations: rep.Continuations(),
		Gaps: &t.Gaps, Timings: q.Timings, TraceID: q.TraceID, TraceParent: q.TraceParent,
	}
	r.Fingerprint = rep.Fingerprint
	for i, at := range rep.Attempts {
		if i == 0 {
			r.CallStart = at.Start.Sub(start)
		}
		if at.Outcome == router.OutcomeFirstTokenTimeout {
			r.FirstTokenTimeouts++
		}
	}
	if t.Visible {
		r.StreamMs = float64(t.Last.Sub(t.First).Microseconds()) / 1000
	}
	if !rep.FirstToken.IsZero() {
		r.TTFT = rep.FirstToken.Sub(start)
	}
	if len(rep.Attempts) > 1 {
		r.Route = rep.Route()
	}
	if rep.Rule != "" {
		r.RoutedTo = rep.Alias
	}
	p.Charge(r, u, rep)
	// A complete answer without the provider's count (a cache hit has
	// none of its own) is flagged: its usage is an estimate.
	r.UsageMissing = e.Status == StatusComplete && t.Reported == nil && !rep.Cached
	return r
}
