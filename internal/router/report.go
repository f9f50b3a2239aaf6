package router

import (
	"strconv"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
)

// Outcome says how an attempt ended.
type Outcome string

const (
	OutcomeOK                Outcome = "ok"                  // served the answer
	OutcomeFirstTokenTimeout Outcome = "first_token_timeout" // no token in time
	OutcomeError             Outcome = "error"               // failed before the first token
	OutcomeMidStreamError    Outcome = "mid_stream_error"    // failed after it
	OutcomeCircuitOpen       Outcome = "circuit_open"        // skipped: breaker open
	OutcomeRetryAfter        Outcome = "retry_after"         // skipped: Retry-After beyond the deadline
	OutcomeCancelled         Outcome = "cancelled"           // the client left
	OutcomeDeadline          Outcome = "deadline"            // the request's deadline passed
	OutcomeHedgeLost         Outcome = "hedge_lost"          // another attempt produced a token first
	OutcomeRetryBudget       Outcome = "retry_budget"        // skipped: retry budget spent
)

// Attempt is one try at a deployment.
type Attempt struct {
	Deployment        string        `json:"deployment"`
	Start             time.Time     `json:"start"`
	FirstToken        time.Time     `json:"first_token,omitzero"`
	End               time.Time     `json:"end"`
	FirstTokenTimeout time.Duration `json:"first_token_timeout"`
	Outcome           Outcome       `json:"outcome"`
	Error             string        `json:"error,omitempty"`
	Status            int           `json:"status,omitempty"`
	Hedge             bool          `json:"hedge,omitempty"`
	Retry             bool          `json:"retry,omitempty"`
	// Fallback: made for the alias fallen back to (see Report.Fallback).
	Fallback bool `json:"fallback,omitempty"`
	// Continued: made to continue an answer whose attempt broke after its
	// first token (see Alias.OnStreamFailure).
	Continued bool `json:"continued,omitempty"`
	// Usage is what an attempt that did not give the answer cost at the
	// provider: a hedge that lost, an attempt abandoned at its first-token
	// timeout or by a client that left, one that failed after the
	// upstream took it. It is the usage the provider reported (its final
	// count, or what it said before it stopped, plus an estimate of the
	// text after), else an estimate of the prompt and of the text it
	// produced, marked Estimated. Nil for the attempt that gave the
	// answer (the answer's usage is metered from what was delivered), for
	// one the upstream refused or never answered (an error status, no
	// connection: providers do not bill those) and for one never sent.
	Usage *chat.Usage `json:"usage,omitempty"`
}

// FellBackTo joins a routing rule's alias and the alias fallen back to in
// Report.Alias: "fast, fell back to chat".
const FellBackTo = ", fell back to "

// Report is what the router did for one request.
type Report struct {
	// Alias is the alias routed to. When the request fell back from a
	// routing rule's alias to the one asked for (Router.StreamFallback),
	// it reads "RULE'S, fell back to ASKED" (see RuleTarget), as the
	// X-Firstword-Rule header and the log's routed_to show it.
	Alias string
	// Fallback is the alias fallen back to ("" if none).
	Fallback string
	// Deployment served the answer (empty if none did).
	Deployment string
	// Model is the upstream model that served.
	Model      string
	Deadline   time.Time
	FirstToken time.Time
	Attempts   []Attempt
}

// Tries counts attempts that reached a provider.
func (r *Report) Tries() int {
	return r.count(func(a *Attempt) bool {
		switch a.Outcome {
		case OutcomeCircuitOpen, OutcomeRetryAfter, OutcomeRetryBudget:
			return false
		}
		return true
	})
}

// Fallbacks counts attempts that failed before another was made.
func (r *Report) Fallbacks() int {
	return r.count(func(a *Attempt) bool {
		switch a.Outcome {
		case OutcomeFirstTokenTimeout, OutcomeError, OutcomeCircuitOpen, OutcomeRetryAfter:
			return true
		}
		return false
	})
}

// Retries counts attempts that retried a deployment already tried.
func (r *Report) Retries() int { return r.count(func(a *Attempt) bool { return a.Retry }) }

// count counts the attempts that match.
func (r *Report) count(match func(*Attempt) bool) int {
	n := 0
	for i := range r.Attempts {
		if match(&r.Attempts[i]) {
			n++
		}
	}
	return n
}

// Continuations counts attempts made to continue a broken answer.
func (r *Report) Continuations() int { return r.count(func(a *Attempt) bool { return a.Continued }) }

// Continued reports whether a continuation served part of the answer.
func (r *Report) Continued() bool {
	return r.count(func(a *Attempt) bool { return a.Continued && !a.FirstToken.IsZero() }) > 0
}

// Hedged reports whether a hedge attempt was started.
func (r *Report) Hedged() bool { return r.count(func(a *Attempt) bool { return a.Hedge }) > 0 }

// RuleTarget splits a Report.Alias (or a record's routed_to): the alias
// routed to and whether the request fell back from it.
func RuleTarget(alias string) (to string, fellBack bool) {
	to, _, fellBack = strings.Cut(alias, FellBackTo)
	return to, fellBack
}

// Route renders the attempts for a header: "dep=outcome, dep=outcome",
// with the alias fallen back to before its first attempt:
// "local/small=error(502), fell back to chat: openai/gpt-4o=ok", and a
// continuation after a broken answer:
// "a/m=mid_stream_error, continued on b/m2=ok".
func (r *Report) Route() string {
	var b strings.Builder
	fellBack := false
	for i, a := range r.Attempts {
		if i > 0 {
			b.WriteString(", ")
		}
		if a.Fallback && !fellBack {
			fellBack = true
			b.WriteString(strings.TrimPrefix(FellBackTo, ", "))
			b.WriteString(r.Fallback)
			b.WriteString(": ")
		}
		if a.Continued {
			b.WriteString("continued on ")
		}
		b.WriteString(a.Deployment)
		b.WriteByte('=')
		b.WriteString(string(a.Outcome))
		if a.Status != 0 {
			b.WriteByte('(')
			b.WriteString(strconv.Itoa(a.Status))
			b.WriteByte(')')
		}
	}
	return b.String()
}

// AddStages adds the router's work to a request's stages: routing (until
// the first attempt started), each attempt as a group containing its time
// to first token and, for the one that served, the generation. routeStart
// is when the request was handed to the router; end closes attempts still
// open. A nil rec records nothing.
func (r *Report) AddStages(rec *budget.Recorder, routeStart, end time.Time) {
	if rec == nil {
		return
	}
	if len(r.Attempts) == 0 {
		rec.Add("route", routeStart, end, "")
		return
	}
	rec.Add("route", routeStart, r.Attempts[0].Start, "")
	for _, a := range r.Attempts {
		aend := a.End
		if aend.IsZero() {
			aend = end
		}
		rec.AddGroup("upstream "+a.Deployment, a.Start, aend, string(a.Outcome))
		if a.FirstToken.IsZero() {
			rec.Add("wait "+a.Deployment, a.Start, aend, string(a.Outcome))
			continue
		}
		rec.Add("ttft", a.Start, a.FirstToken, a.Deployment)
		rec.Add("generation", a.FirstToken, aend, a.Deployment)
	}
}

// add appends an attempt and returns its index. Callers keep the index,
// never a pointer: a later append may move the slice, and a pointer would
// then update a stale copy.
func (r *Report) add(a Attempt) int {
	r.Attempts = append(r.Attempts, a)
	return len(r.Attempts) - 1
}
