// Package metering records what each request cost and how it ended: tokens,
// model, deployment, status and timings. A Meter receives one Record per
// request; Memory keeps recent records and totals in memory, and the store
// backs it with SQL.
package metering

import (
	"context"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/store"
)

// Status is how a request ended.
type Status string

const (
	StatusComplete  Status = "complete"
	StatusCancelled Status = "cancelled" // the client left
	StatusError     Status = "error"
	StatusTimeout   Status = "timeout" // the overall timeout cut it
	// StatusInterrupted: the server shut down (or crashed) under it.
	StatusInterrupted Status = "interrupted"
)

// Record is one request's metering.
type Record struct {
	// Fingerprint, CallStart and FirstTokenTimeouts are for the lever
	// advisor: the request's content hashes, when its first attempt
	// started (from the request's arrival) and how many attempts were
	// abandoned at their first-token timeout.
	Fingerprint        levers.Fingerprint `json:"-"`
	CallStart          time.Duration      `json:"-"`
	FirstTokenTimeouts int                `json:"-"`

	RequestID string    `json:"request_id"`
	Time      time.Time `json:"time"`
	Surface   string    `json:"surface"`
	Tenant    string    `json:"tenant,omitempty"`
	User      string    `json:"user,omitempty"`
	// KeyID is the API key's ID ("" in local mode).
	KeyID        string `json:"key_id,omitempty"`
	Alias        string `json:"alias"`
	Deployment   string `json:"deployment,omitempty"`
	Model        string `json:"model,omitempty"`
	Stream       bool   `json:"stream"`
	Status       Status `json:"status"`
	FinishReason string `json:"finish_reason,omitempty"`
	// Usage and Cost are the answer's: what the attempt that served the
	// request cost (none when no deployment answered); see Charge.
	Usage        chat.Usage `json:"usage"`
	UsageMissing bool       `json:"usage_missing,omitempty"`
	Cost         float64    `json:"cost,omitempty"`
	Cached       bool       `json:"cached,omitempty"`
	// Coalesced: shared another identical request's upstream stream.
	Coalesced bool `json:"coalesced,omitempty"`
	// Rule is the routing rule that sent the request from Alias (the
	// client's) to alias RoutedTo ("" if none).
	Rule      string        `json:"rule,omitempty"`
	RoutedTo  string        `json:"routed_to,omitempty"`
	TTFT      time.Duration `json:"ttft"`
	TTFW      time.Duration `json:"ttfw"`
	Total     time.Duration `json:"total"`
	Attempts  int           `json:"attempts"`
	Fallbacks int           `json:"fallbacks,omitempty"`
	Route     string        `json:"route,omitempty"`

	// TTFThought and Thinking are the time to the model's first thought
	// and how long it thought before its first answer token (0: it did
	// not think; see budget.Recorder.Thought).
	TTFThought time.Duration `json:"ttfthought,omitempty"`
	Thinking   time.Duration `json:"thinking,omitempty"`

	// Spent are the upstream attempts that were sent and did not give the
	// answer (a hedge that lost, one abandoned at its first-token timeout,
	// one that failed after the upstream took it), each billed as the
	// answer is: shared when coalesced, nothing for a cache hit. Their
	// sums are AttemptsTotal.
	Spent     []Spent `json:"spent,omitempty"`
	ErrorCode string  `json:"error_code,omitempty"`
	Error     string  `json:"error,omitempty"`
	// Hedged, Retries: what the router did beyond the first attempt.
	Hedged  bool `json:"hedged,omitempty"`
	Retries int  `json:"retries,omitempty"`
	// Continuations counts attempts made to continue the answer after an
	// attempt broke mid-stream (see docs/continuation.md).
	Continuations int `json:"continuations,omitempty"`
	// Gaps are the delays between the visible chunks delivered, and
	// StreamMs the time from the first to the last one.
	Gaps     *Gaps   `json:"-"`
	StreamMs float64 `json:"-"`
	// Timings is the request's stage recorder (nil if none).
	Timings *budget.Recorder `json:"-"`
	// TraceID identifies the request's trace (hex); TraceParent is the
	// client's W3C traceparent header, if it sent one.
	TraceID     string `json:"trace_id,omitempty"`
	TraceParent string `json:"-"`
}

// Spent is what one upstream attempt that did not give the answer is
// billed (see router.Attempt.Usage).
type Spent struct {
	Deployment string     `json:"deployment"`
	Usage      chat.Usage `json:"usage"`
	Cost       float64    `json:"cost,omitempty"`
}

// AttemptsTotal sums what the attempts that did not give the answer are
// billed: their usage (Estimated if any one's was) and cost.
func (r *Record) AttemptsTotal() (chat.Usage, float64) {
	var u chat.Usage
	cost := 0.0
	for i := range r.Spent {
		s := &r.Spent[i]
		u.InputTokens += s.Usage.InputTokens
		u.OutputTokens += s.Usage.OutputTokens
		u.CachedInputTokens += s.Usage.CachedInputTokens
		u.CacheWriteTokens += s.Usage.CacheWriteTokens
		u.ReasoningTokens += s.Usage.ReasoningTokens
		u.Estimated = u.Estimated || s.Usage.Estimated
		cost += s.Cost
	}
	return u, cost
}

// GapBuckets are the upper bounds, in seconds, of the inter-token gap
// histogram.
var GapBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Gaps is a histogram of inter-token gaps, cheap to fill per chunk.
type Gaps struct {
	Counts [14]uint32 // one per GapBuckets bound, then +Inf
	Sum    float64
	N      uint32
}

// Add counts one gap.
func (g *Gaps) Add(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(GapBuckets) && s > GapBuckets[i] {
		i++
	}
	g.Counts[i]++
	g.Sum += s
	g.N++
}

// Meter receives records. Record must not block for long: it runs at the
// end of every request.
type Meter interface {
	Record(ctx context.Context, r *Record)
}

// Tally follows a stream as it is delivered, to meter it: what chat.Tally
// counts (the usage, reported or estimated, the finish), and when the
// visible chunks came.
type Tally struct {
	chat.Tally
	// First and Last are when the first and last visible chunks were
	// counted; Gaps the delays between visible chunks.
	First, Last time.Time
	Gaps        Gaps
}

// Add counts a chunk that was delivered to the client.
func (t *Tally) Add(c *chat.Chunk) {
	// Only visible chunks time the stream: a usage or role chunk is no gap
	// the reader saw. Visible is read before chat.Tally.Add sets it, so the
	// first visible chunk starts the stream instead of closing a gap.
	if c.Visible() {
		now := time.Now()
		if t.Visible {
			t.Gaps.Add(now.Sub(t.Last))
		} else {
			t.First = now
		}
		t.Last = now
	}
	t.Tally.Add(c)
}

// Memory keeps the last records and running totals. Safe for concurrent
// use.
type Memory struct {
	mu     sync.Mutex
	recent []Record
	next   int
	size   int
	totals map[string]*Totals
}

// Totals sums records for one alias.
type Totals struct {
	// The attempts' sums are of those that did not give the answer (see
	// Record.Spent).
	store.Sums
	ByStatus     map[Status]int64 `json:"by_status"`
	UsageMissing int64            `json:"usage_missing"`
	Estimated    int64            `json:"estimated"`
}

// NewMemory returns a Memory keeping the last size records.
func NewMemory(size int) *Memory {
	if size <= 0 {
		size = 1000
	}
	return &Memory{size: size, totals: map[string]*Totals{}}
}

// Record implements Meter.
func (m *Memory) Record(_ context.Context, r *Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.recent) < m.size {
		// A ring of the last size records: next is the oldest once it is full.
		m.recent = append(m.recent, *r)
	} else {
		m.recent[m.next] = *r
		m.next = (m.next + 1) % m.size
	}
	t := m.totals[r.Alias]
	if t == nil {
		t = &Totals{ByStatus: map[Status]int64{}}
		m.totals[r.Alias] = t
	}
	t.Requests++
	t.InputTokens += int64(r.Usage.InputTokens)
	t.OutputTokens += int64(r.Usage.OutputTokens)
	t.CachedTokens += int64(r.Usage.CachedInputTokens)
	t.Cost += r.Cost
	au, ac := r.AttemptsTotal()
	t.AttemptsInputTokens += int64(au.InputTokens)
	t.AttemptsOutputTokens += int64(au.OutputTokens)
	t.AttemptsCost += ac
	t.ByStatus[r.Status]++
	if r.UsageMissing {
		t.UsageMissing++
	}
	if r.Usage.Estimated {
		t.Estimated++
	}
}

// Recent returns the recorded records, oldest first.
func (m *Memory) Recent() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Record, 0, len(m.recent))
	out = append(out, m.recent[m.next:]...)
	out = append(out, m.recent[:m.next]...)
	return out
}

// Find returns the record of a request, if it is still kept.
func (m *Memory) Find(requestID string) (Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.recent {
		if m.recent[i].RequestID == requestID {
			return m.recent[i], true
		}
	}
	return Record{}, false
}

// Totals returns a copy of the totals by alias.
func (m *Memory) Totals() map[string]Totals {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Totals, len(m.totals))
	for k, v := range m.totals {
		c := *v
		c.ByStatus = make(map[Status]int64, len(v.ByStatus))
		for s, n := range v.ByStatus {
			c.ByStatus[s] = n
		}
		out[k] = c
	}
	return out
}

// Multi fans a record out to several meters.
type Multi []Meter

// Record implements Meter.
func (m Multi) Record(ctx context.Context, r *Record) {
	for _, mt := range m {
		mt.Record(ctx, r)
	}
}

// Billed is the upstream usage a request is billed for: none for a cache
// hit; for a stream shared by n identical requests (part = [i, n]) its i-th
// of n parts, which add up exactly to the whole; none for a sharer that
// left early (share 0); else all of it.
func Billed(u chat.Usage, cached bool, share float64, part [2]int) chat.Usage {
	if cached || share == 0 {
		return chat.Usage{Estimated: u.Estimated}
	}
	i, n := part[0], part[1]
	if n <= 1 || i < 0 || i >= n {
		return u
	}
	p := func(x int) int { return x*(i+1)/n - x*i/n }
	return chat.Usage{
		InputTokens: p(u.InputTokens), OutputTokens: p(u.OutputTokens),
		CachedInputTokens: p(u.CachedInputTokens), CacheWriteTokens: p(u.CacheWriteTokens),
		ReasoningTokens: p(u.ReasoningTokens), Estimated: u.Estimated,
	}
}

// Charge sets what r is billed, shared as rep says (see Billed): the
// answer (Usage, Cost), u being the usage of what was delivered, priced
// at the deployment that served it; and the attempts of rep that did not
// give the answer (Spent), each priced at its own deployment. A request
// no deployment answered has no answer: what it cost is its attempts'.
func (p Prices) Charge(r *Record, u chat.Usage, rep *levers.Report) {
	// Nothing was delivered from an answer: any usage tallied (an estimate
	// of the prompt, say) was spent by the attempts, which are billed below.
	if rep.Deployment == "" {
		u = chat.Usage{}
	}
	r.Usage = Billed(u, rep.Cached, rep.BillShare, rep.BillPart)
	r.Cost = p.Cost(rep.Deployment, r.Usage)
	r.Spent = nil
	for _, a := range rep.Attempts {
		if a.Usage == nil {
			continue
		}
		// Shared as the answer is: subscribers of one shared stream split its
		// spent attempts too, so each attempt is billed once in all.
		b := Billed(*a.Usage, rep.Cached, rep.BillShare, rep.BillPart)
		r.Spent = append(r.Spent, Spent{Deployment: a.Deployment, Usage: b, Cost: p.Cost(a.Deployment, b)})
	}
}
