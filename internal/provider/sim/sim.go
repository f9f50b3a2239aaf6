package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/chat"
)

// Config configures a Provider.
type Config struct {
	// Name identifies the provider in errors.
	Name string
	// Seed makes a run repeatable: the same seed gives the same sequence
	// of timings, and the same seed and prompt give the same text.
	Seed uint64
	// Fault applies to every request unless a directive overrides it.
	Fault Fault
	// Tiers overrides or extends the built-in tiers by name.
	Tiers map[string]Tier
}

// Stats counts what the sim has seen, so that tests can check what reached
// the "provider": for example that a client's disconnect cancelled it.
type Stats struct {
	Started   int64 `json:"started"`
	Completed int64 `json:"completed"`
	// Cancelled counts streams that ended early because their context
	// ended or their reader stopped: the disconnects the sim saw.
	Cancelled int64 `json:"cancelled"`
	Failed    int64 `json:"failed"`
	TokensOut int64 `json:"tokens_out"`
}

// Provider is the simulated provider. It is safe for concurrent use.
type Provider struct {
	cfg      Config
	seq      atomic.Uint64
	prefixes prefixCache

	started, completed, cancelled, failed, tokens atomic.Int64
}

// New returns a Provider.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "sim"
	}
	return &Provider{cfg: cfg, prefixes: prefixCache{seen: map[uint64]time.Time{}}}
}

// Stats returns a snapshot of the counters.
func (p *Provider) Stats() Stats {
	return Stats{Started: p.started.Load(), Completed: p.completed.Load(), Cancelled: p.cancelled.Load(), Failed: p.failed.Load(), TokensOut: p.tokens.Load()}
}

func (p *Provider) tier(model string) (Tier, bool) {
	name := strings.TrimPrefix(model, "sim-")
	if t, ok := p.cfg.Tiers[name]; ok {
		return t, true
	}
	return LookupTier(name)
}

// plan is everything decided about one request before it starts.
type plan struct {
	choices   [][]string // tokens per choice
	tool      string
	toolArgs  []string
	ttft      time.Duration
	gaps      func() time.Duration
	fault     Fault
	usage     chat.Usage
	finish    chat.FinishReason
	rateLimit bool
}

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		pl, err := p.plan(req)
		if err != nil {
			yield(chat.Chunk{}, err)
			return
		}
		p.started.Add(1)
		outcome := p.run(ctx, req, pl, yield)
		switch outcome {
		case outcomeDone:
			p.completed.Add(1)
		case outcomeCancelled, outcomeStopped:
			// A consumer that stops reading is, over HTTP, a closed
			// connection: the provider sees a cancellation.
			p.cancelled.Add(1)
		case outcomeFailed:
			p.failed.Add(1)
		}
	}
}

type outcome int

const (
	outcomeDone outcome = iota
	outcomeCancelled
	outcomeFailed
	outcomeStopped // the consumer stopped iterating
)

func (p *Provider) run(ctx context.Context, req *chat.Request, pl *plan, yield func(chat.Chunk, error) bool) outcome {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wait := func(d time.Duration) bool {
		if d <= 0 {
			return ctx.Err() == nil
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	cancelled := func() outcome {
		yield(chat.Chunk{}, context.Cause(ctx))
		return outcomeCancelled
	}
	f := pl.fault
	switch f.Mode {
	case Fault429, Fault500, Fault503:
		// Failures come back fast, as real ones do.
		if !wait(pl.ttft / 20) {
			return cancelled()
		}
		status := map[string]int{Fault429: 429, Fault500: 500, Fault503: 503}[f.Mode]
		cat, retry := chat.CategoryForStatus(status)
		yield(chat.Chunk{}, &chat.Error{Category: cat, Status: status, Retryable: retry, RetryAfter: f.RetryAfter, Provider: p.cfg.Name, Message: fmt.Sprintf("simulated %d", status)})
		return outcomeFailed
	case FaultHang:
		<-ctx.Done()
		return cancelled()
	}
	if !wait(pl.ttft) {
		return cancelled()
	}
	model := req.Model
	sent := 0
	first := true
	emit := func(c chat.Chunk) bool {
		if first {
			c.Model = model
			first = false
		}
		return yield(c, nil)
	}
	total := 0
	for _, toks := range pl.choices {
		total = max(total, len(toks))
	}
	total = max(total, len(pl.toolArgs))
	for i := 0; i < total; i++ {
		if i > 0 && !wait(pl.gaps()) {
			return cancelled()
		}
		if f.Mode != FaultNone && i == f.After {
			switch f.Mode {
			case FaultErrorMid:
				yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryUpstreamUnavailable, Provider: p.cfg.Name, Message: fmt.Sprintf("simulated error after %d tokens", sent), Retryable: true})
				return outcomeFailed
			case FaultStallMid:
				<-ctx.Done()
				return cancelled()
			case FaultTruncateMid:
				yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryProtocol, Provider: p.cfg.Name, Message: fmt.Sprintf("%v: simulated truncation after %d tokens", chat.ErrTruncated, sent), Retryable: true, Err: chat.ErrTruncated})
				return outcomeFailed
			}
		}
		if pl.tool != "" {
			c := chat.Chunk{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: pl.toolArgs[i]}}}
			if i == 0 {
				c.ToolCalls[0].ID = fmt.Sprintf("call_sim%06d", p.seq.Load())
				c.ToolCalls[0].Name = pl.tool
			}
			if !emit(c) {
				return outcomeStopped
			}
			sent++
			p.tokens.Add(1)
			continue
		}
		for ci, toks := range pl.choices {
			if i >= len(toks) {
				continue
			}
			if !emit(chat.Chunk{Choice: ci, Text: toks[i]}) {
				return outcomeStopped
			}
			sent++
			p.tokens.Add(1)
		}
	}
	if ctx.Err() != nil {
		return cancelled()
	}
	n := max(1, len(pl.choices))
	for ci := range n {
		c := chat.Chunk{Choice: ci, FinishReason: pl.finish}
		if ci == n-1 {
			u := pl.usage
			c.Usage = &u
		}
		if !emit(c) {
			return outcomeStopped
		}
	}
	return outcomeDone
}

func (p *Provider) plan(req *chat.Request) (*plan, error) {
	tier, ok := p.tier(req.Model)
	if !ok {
		return nil, &chat.Error{Category: chat.CategoryNotFound, Provider: p.cfg.Name, Message: fmt.Sprintf("the sim has no model %q (tiers: small, medium, large)", req.Model)}
	}
	var user string
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == chat.RoleUser {
			user = req.Messages[i].Content
			break
		}
	}
	var d Directive
	var err error
	if h := req.Meta["sim"]; h != "" {
		d, err = ParseDirective(h)
	} else if tag, rest, ok := extractTag(user); ok {
		d, err = ParseDirective(tag)
		user = rest
	}
	if err != nil {
		return nil, &chat.Error{Category: chat.CategoryInvalidRequest, Provider: p.cfg.Name, Message: err.Error()}
	}
	seq := p.seq.Add(1)
	timing := rand.New(rand.NewPCG(p.cfg.Seed, seq))
	h := fnv64(user)
	for _, m := range req.Messages {
		h = h*1099511628211 ^ fnv64(m.Content)
	}
	text := rand.New(rand.NewPCG(p.cfg.Seed, h))

	pl := &plan{fault: p.cfg.Fault, finish: chat.FinishStop}
	if d.Fault.Mode != "" {
		pl.fault = d.Fault
	}
	if pl.fault.Probability > 0 && timing.Float64() >= pl.fault.Probability {
		pl.fault = Fault{}
	}
	slow := 1.0
	if pl.fault.Mode == FaultSlow {
		slow = pl.fault.Factor
		if slow <= 0 {
			slow = 5
		}
	}
	jitter := func(d time.Duration) time.Duration {
		if tier.Jitter <= 0 {
			return d
		}
		return time.Duration(float64(d) * math.Exp(timing.NormFloat64()*tier.Jitter))
	}
	if d.TTFT != nil {
		pl.ttft = *d.TTFT
	} else {
		pl.ttft = time.Duration(float64(jitter(tier.TTFT)) * slow)
		if tier.TailProbability > 0 && timing.Float64() < tier.TailProbability {
			f := tier.TailFactor
			if f <= 0 {
				f = 10
			}
			pl.ttft = time.Duration(float64(pl.ttft) * f)
		}
	}
	if d.Gap != nil {
		g := *d.Gap
		pl.gaps = func() time.Duration { return g }
	} else {
		mean := time.Duration(float64(time.Second) / tier.TokensPerSecond * slow)
		pl.gaps = func() time.Duration { return jitter(mean) }
	}

	input := chat.EstimateInputTokens(req)
	pl.usage.InputTokens = input
	if prefix, n := prefixKey(req); n > 0 {
		if p.prefixes.hit(prefix, time.Now()) {
			pl.usage.CachedInputTokens = n
			if tier.CachedPrefixSpeedup > 1 && d.TTFT == nil {
				pl.ttft = time.Duration(float64(pl.ttft) / tier.CachedPrefixSpeedup)
			}
		}
	}

	want := d.Tokens
	if want == 0 {
		base := tier.AnswerTokens
		if base <= 0 {
			base = 200
		}
		want = base/2 + text.IntN(base+1)
	}
	limit := req.MaxTokens
	tool := d.Tool
	if tool == "" && req.ToolChoice != nil && req.ToolChoice.Mode == "tool" {
		tool = req.ToolChoice.Name
	}
	if tool == "" && req.ToolChoice != nil && req.ToolChoice.Mode == "required" && len(req.Tools) > 0 {
		tool = req.Tools[0].Name
	}
	if tool != "" {
		args, _ := json.Marshal(map[string]string{"query": user})
		pl.tool = tool
		pl.toolArgs = splitArgs(string(args))
		pl.finish = chat.FinishToolCalls
		pl.usage.OutputTokens = len(pl.toolArgs)
		return pl, nil
	}
	for c := 0; c < req.Choices(); c++ {
		var body string
		if d.Echo {
			body = user
		} else {
			body = answer(text, want)
		}
		toks := tokenize(body)
		if d.Tokens > 0 && len(toks) > d.Tokens {
			toks = toks[:d.Tokens]
		}
		if limit > 0 && len(toks) > limit {
			toks = toks[:limit]
			pl.finish = chat.FinishLength
		}
		pl.choices = append(pl.choices, toks)
		pl.usage.OutputTokens += len(toks)
	}
	return pl, nil
}

// splitArgs cuts a JSON argument string into small pieces, as providers
// stream tool-call arguments.
func splitArgs(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(len(s), 6)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// prefixKey hashes the stable prompt prefix: the messages up to the last
// cache breakpoint, or all but the last message. It returns the prefix's
// estimated token count, 0 when there is no prefix worth caching.
func prefixKey(req *chat.Request) (uint64, int) {
	end := len(req.Messages) - 1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].CacheBreakpoint {
			end = i + 1
			break
		}
	}
	if end <= 0 {
		return 0, 0
	}
	h := uint64(14695981039346656037)
	n := 0
	for _, m := range req.Messages[:end] {
		h = h*1099511628211 ^ fnv64(string(m.Role)+"\x00"+m.Content)
		n += chat.EstimateTokens(m.Content) + 4
	}
	if n < 64 {
		return 0, 0 // providers do not cache short prefixes
	}
	return h, n
}

// prefixCache remembers recently seen prompt prefixes for five minutes, as
// provider prompt caches do.
type prefixCache struct {
	mu   sync.Mutex
	seen map[uint64]time.Time
}

const prefixTTL = 5 * time.Minute

func (c *prefixCache) hit(key uint64, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.seen[key]
	c.seen[key] = now
	if len(c.seen) > 10000 {
		for k, v := range c.seen {
			if now.Sub(v) > prefixTTL {
				delete(c.seen, k)
			}
		}
	}
	return ok && now.Sub(t) < prefixTTL
}
