package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
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
	choices  [][]string // tokens per choice
	tool     string
	toolArgs []string
	ttft     time.Duration
	gaps     func() time.Duration
	// thinking is played before the answer, one token every thinkGap
	// from the first at ttft, then thought (its signature) ends the
	// block; the first answer token comes one thinkGap later. A thought
	// faster than a token a millisecond is sent in deltas of a
	// millisecond's tokens, as providers batch it.
	thinking  []string
	thinkText string // the thinking tokens joined
	thinkOff  []int  // where each token starts in thinkText, and its end
	thinkGap  time.Duration
	thought   *chat.Thought
	fault     Fault
	usage     chat.Usage
	finish    chat.FinishReason
	rateLimit bool
	// induced: the fault came from the request's directive, not the
	// config; its failures are the client's doing (chat.Error.ClientInduced).
	induced bool
}

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return provider.Range(p.Pull(ctx, req))
}

// Pull implements provider.Puller: the answer is played as it is read,
// each chunk at its time.
func (p *Provider) Pull(ctx context.Context, req *chat.Request) provider.Reader {
	return &reader{p: p, ctx: ctx, req: req}
}

type outcome int

const (
	outcomeDone outcome = iota
	outcomeCancelled
	outcomeFailed
)

// reader is one simulated answer being played.
type reader struct {
	p     *Provider
	ctx   context.Context
	req   *chat.Request
	pl    *plan
	timer *time.Timer

	state   int // stateNew, stateThinking, stateTokens, stateFinish
	ti      int // the next thinking token (len(thinking): the signature)
	total   int // tokens in the longest choice (or the tool call)
	i, ci   int // the token being played and the next choice to send it for
	atToken bool
	fin     int  // the next choice to finish
	sent    int  // visible chunks taken by the consumer
	unsent  bool // the chunk handed out last is visible and not counted yet
	model   bool
	settled bool  // the outcome was counted
	err     error // what ended the answer, returned again
	c       chat.Chunk
}

const (
	stateNew = iota
	stateThinking
	stateTokens
	stateFinish
)

func (r *reader) Next() (*chat.Chunk, error) {
	// The chunk handed out last was taken: count it now, as the consumer
	// asks for the next.
	r.countSent()
	if r.err != nil {
		return nil, r.err
	}
	if r.state == stateNew {
		if err := r.begin(); err != nil {
			return nil, err
		}
		r.state = stateTokens
		if len(r.pl.thinking) > 0 {
			r.state = stateThinking
		}
	}
	if r.state == stateThinking {
		if err := r.think(); err != nil {
			return nil, err
		}
		return r.emit(), nil
	}
	for r.state == stateTokens {
		if r.i >= r.total {
			if r.ctx.Err() != nil {
				return nil, r.cancelled()
			}
			r.state = stateFinish
			break
		}
		if !r.atToken {
			if err := r.token(); err != nil {
				return nil, err
			}
		}
		if r.pl.tool != "" {
			r.toolChunk()
			r.i, r.atToken = r.i+1, false
			return r.emit(), nil
		}
		for r.ci < len(r.pl.choices) {
			ci := r.ci
			r.ci++
			if toks := r.pl.choices[ci]; r.i < len(toks) {
				r.c = chat.Chunk{Choice: ci, Text: toks[r.i]}
				return r.emit(), nil
			}
		}
		r.i, r.ci, r.atToken = r.i+1, 0, false
	}
	n := max(1, len(r.pl.choices))
	if r.fin < n {
		r.finishChunk(r.fin, r.fin == n-1)
		r.fin++
		return r.emit(), nil
	}
	r.settle(outcomeDone)
	r.err = io.EOF
	return nil, io.EOF
}

// Close stops the answer; one stopped before its end counts as
// cancelled: over HTTP, a consumer that stops reading is a closed
// connection.
func (r *reader) Close() {
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.pl != nil {
		r.settle(outcomeCancelled)
	}
	if r.err == nil {
		r.err = errClosed
	}
}

var errClosed = errors.New("sim: answer closed")

func (r *reader) settle(o outcome) {
	if r.settled {
		return
	}
	r.settled = true
	switch o {
	case outcomeDone:
		r.p.completed.Add(1)
	case outcomeCancelled:
		r.p.cancelled.Add(1)
	case outcomeFailed:
		r.p.failed.Add(1)
	}
}

// begin plans the answer, plays the faults that strike before the first
// token and waits for it.
func (r *reader) begin() error {
	pl, err := r.p.plan(r.req)
	if err != nil {
		// A request the sim refuses never started: counted nowhere.
		r.settled, r.err = true, err
		return err
	}
	r.p.started.Add(1)
	r.pl, r.timer = pl, time.NewTimer(time.Hour)
	for _, toks := range pl.choices {
		r.total = max(r.total, len(toks))
	}
	r.total = max(r.total, len(pl.toolArgs))
	f := pl.fault
	switch f.Mode {
	case FaultHang:
		<-r.ctx.Done()
		return r.cancelled()
	case Fault429, Fault500, Fault503:
		// Failures come back fast, as real ones do.
		if !r.wait(pl.ttft / 20) {
			return r.cancelled()
		}
		status := map[string]int{Fault429: 429, Fault500: 500, Fault503: 503}[f.Mode]
		cat, retry := chat.CategoryForStatus(status)
		return r.fail(&chat.Error{Category: cat, Status: status, Retryable: retry, RetryAfter: f.RetryAfter, Provider: r.p.cfg.Name, Message: fmt.Sprintf("simulated %d", status)})
	}
	if !r.wait(pl.ttft) {
		return r.cancelled()
	}
	return nil
}

// think sets r.c to the next piece of thinking at its time: a thinking
// token, or the signature that ends the block (and the thinking) at once
// after the last. A fault due then is played instead.
func (r *reader) think() error {
	pl := r.pl
	step := 1
	if pl.thinkGap > 0 && pl.thinkGap < time.Millisecond {
		step = int(time.Millisecond / pl.thinkGap)
	}
	if r.ti > 0 && r.ti < len(pl.thinking) && !r.wait(pl.thinkGap*time.Duration(step)) {
		return r.cancelled()
	}
	f := pl.fault
	if f.Mode == FaultErrorThinking && r.ti == min(f.After, len(pl.thinking)) {
		return r.fail(r.thinkingError())
	}
	if r.ti < len(pl.thinking) {
		end := min(r.ti+step, len(pl.thinking))
		if f.Mode == FaultErrorThinking && r.ti < f.After {
			end = min(end, f.After)
		}
		r.c = chat.Chunk{Thinking: pl.thinkText[pl.thinkOff[r.ti]:pl.thinkOff[end]]}
		r.ti = end
		return nil
	}
	r.c = chat.Chunk{Thought: pl.thought}
	r.state = stateTokens
	return nil
}

func (r *reader) thinkingError() *chat.Error {
	return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Provider: r.p.cfg.Name, Message: fmt.Sprintf("simulated error after %d thinking tokens", r.ti), Retryable: true}
}

// token waits for token i's time and plays a fault due then.
func (r *reader) token() error {
	r.atToken = true
	if r.i > 0 || r.pl.thought != nil {
		gap := r.pl.thinkGap // after the last of the thinking
		if r.i > 0 {
			gap = r.pl.gaps()
		}
		if !r.wait(gap) {
			return r.cancelled()
		}
	}
	f := r.pl.fault
	if f.Mode == FaultErrorThinking && r.i == 0 && r.pl.thought == nil {
		// A model that does not think fails before its first token.
		return r.fail(r.thinkingError())
	}
	if f.Mode == FaultNone || r.i != f.After {
		return nil
	}
	switch f.Mode {
	case FaultErrorMid:
		return r.fail(&chat.Error{Category: chat.CategoryUpstreamUnavailable, Provider: r.p.cfg.Name, Message: fmt.Sprintf("simulated error after %d tokens", r.sent), Retryable: true})
	case FaultStallMid:
		<-r.ctx.Done()
		return r.cancelled()
	case FaultTruncateMid:
		return r.fail(&chat.Error{Category: chat.CategoryProtocol, Provider: r.p.cfg.Name, Message: fmt.Sprintf("%v: simulated truncation after %d tokens", chat.ErrTruncated, r.sent), Retryable: true, Err: chat.ErrTruncated})
	}
	return nil
}

func (r *reader) wait(d time.Duration) bool {
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	r.timer.Reset(d)
	select {
	case <-r.ctx.Done():
		return false
	case <-r.timer.C:
		return true
	}
}

// emit returns r.c, with the model on the first chunk; it counts tokens.
func (r *reader) emit() *chat.Chunk {
	if !r.model {
		r.c.Model = r.req.Model
		r.model = true
	}
	r.unsent = r.c.Visible()
	return &r.c
}

// countSent counts the visible chunk handed out last.
func (r *reader) countSent() {
	if r.unsent {
		r.unsent = false
		r.sent++
		r.p.tokens.Add(1)
	}
}

// toolChunk sets r.c to the current piece of the tool call.
func (r *reader) toolChunk() {
	r.c = chat.Chunk{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: r.pl.toolArgs[r.i]}}}
	if r.i == 0 {
		r.c.ToolCalls[0].ID = fmt.Sprintf("call_sim%06d", r.p.seq.Load())
		r.c.ToolCalls[0].Name = r.pl.tool
	}
}

// finishChunk sets r.c to choice ci's ending; the last carries the usage.
func (r *reader) finishChunk(ci int, last bool) {
	r.c = chat.Chunk{Choice: ci, FinishReason: r.pl.finish}
	if last {
		u := r.pl.usage
		r.c.Usage = &u
	}
}

func (r *reader) cancelled() error {
	r.settle(outcomeCancelled)
	r.err = context.Cause(r.ctx)
	if f := r.pl.fault; r.pl.induced && (f.Mode == FaultHang || f.Mode == FaultStallMid || f.Mode == FaultSlow) {
		// The wait that ran out was asked for: say so, or a first-token
		// timeout would count against the deployment.
		r.err = &chat.Error{Category: chat.CategoryTimeout, Provider: r.p.cfg.Name, Message: "simulated " + f.Mode + ": " + r.err.Error(),
			Retryable: true, ClientInduced: true, Err: r.err}
	}
	return r.err
}

func (r *reader) fail(err *chat.Error) error {
	r.settle(outcomeFailed)
	err.ClientInduced = r.pl.induced
	r.err = err
	return err
}

func (p *Provider) plan(req *chat.Request) (*plan, error) {
	tier, ok := p.tier(req.Model)
	if !ok {
		return nil, &chat.Error{Category: chat.CategoryNotFound, Provider: p.cfg.Name, Message: fmt.Sprintf("the sim has no model %q (tiers: small, medium, large, reasoner)", req.Model)}
	}
	if err := checkThinking(req); err != nil {
		return nil, &chat.Error{Category: chat.CategoryInvalidRequest, Status: 400, Provider: p.cfg.Name, Message: err.Error(), ClientInduced: true}
	}
	// A request to continue a broken answer is answered with the rest of
	// the answer first asked for: its words come from that request.
	asked, delivered := continuationOf(req.Messages)
	var user string
	for i := len(asked) - 1; i >= 0; i-- {
		if asked[i].Role == chat.RoleUser {
			user = asked[i].Content
			break
		}
	}
	var d Directive
	var err error
	if h := req.Hints.Sim; h != "" {
		d, err = ParseDirective(h)
	} else if tag, rest, ok := extractTag(user); ok {
		d, err = ParseDirective(tag)
		user = rest
	}
	if err != nil {
		return nil, &chat.Error{Category: chat.CategoryInvalidRequest, Provider: p.cfg.Name, Message: err.Error(), ClientInduced: true}
	}
	seq := p.seq.Add(1)
	timing := rand.New(rand.NewPCG(p.cfg.Seed, seq))
	h := fnv64(user)
	for _, m := range asked {
		h = h*1099511628211 ^ fnv64(m.Content)
	}
	text := rand.New(rand.NewPCG(p.cfg.Seed, h))

	pl := &plan{fault: p.cfg.Fault, finish: chat.FinishStop}
	if d.Fault.Mode != "" {
		pl.fault, pl.induced = d.Fault, true
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
	read, written := p.prefixes.use(req, time.Now())
	pl.usage.CachedInputTokens, pl.usage.CacheWriteTokens = min(read, input), min(written, input-read)
	if tier.PrefillTokensPerSecond > 0 && d.TTFT == nil {
		// The prompt is read after the queue: uncached tokens at the
		// prefill rate, cached ones CachedPrefixSpeedup times faster.
		cached := float64(pl.usage.CachedInputTokens)
		if tier.CachedPrefixSpeedup > 1 {
			cached /= tier.CachedPrefixSpeedup
		}
		pl.ttft += time.Duration((float64(input-pl.usage.CachedInputTokens) + cached) / tier.PrefillTokensPerSecond * slow * float64(time.Second))
	} else if read > 0 && tier.CachedPrefixSpeedup > 1 && d.TTFT == nil {
		// The cached share of the prompt is read CachedPrefixSpeedup
		// times faster.
		f := float64(read) / float64(input)
		pl.ttft = time.Duration(float64(pl.ttft) * (1 - f + f/tier.CachedPrefixSpeedup))
	}

	p.planThinking(pl, req, &tier, &d, timing, jitter, slow, h)

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
		pl.usage.OutputTokens += len(pl.toolArgs)
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
		if c == 0 && delivered != "" {
			toks = rest(toks, delivered)
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

// maxThinkingTokens bounds one answer's thinking, whatever its time.
const maxThinkingTokens = 1 << 16

// planThinking decides the thinking: the tier's time, scaled by the
// request's effort ("none" turns it off) and jittered, or a directive's
// exact time; at the tier's rate (or the directive's), capped by the
// request's budget. The text is drawn from the prompt's hash, apart from
// the answer's, so thinking does not change the answer.
func (p *Provider) planThinking(pl *plan, req *chat.Request, tier *Tier, d *Directive, timing *rand.Rand, jitter func(time.Duration) time.Duration, slow float64, h uint64) {
	think, rate := tier.ThinkingTime, tier.ThinkingRate()
	if d.ThinkTPS > 0 {
		rate = d.ThinkTPS
	}
	if d.Think != nil {
		think = *d.Think
	} else if think > 0 {
		think = time.Duration(float64(jitter(effortTime(think, req.Thinking))) * slow)
	}
	if think <= 0 {
		return
	}
	n := int(math.Min(think.Seconds()*rate+0.5, maxThinkingTokens))
	if req.Thinking != nil && req.Thinking.BudgetTokens > 0 && req.Thinking.BudgetTokens < n {
		// A budget stops the thought early, at the same rate.
		think = think * time.Duration(req.Thinking.BudgetTokens) / time.Duration(n)
		n = req.Thinking.BudgetTokens
	}
	n = max(n, 1)
	pl.thinkGap = think / time.Duration(n)
	pl.thinking = thinking(rand.New(rand.NewPCG(p.cfg.Seed^thinkingSeed, h)), n)
	pl.thinkText = strings.Join(pl.thinking, "")
	pl.thinkOff = make([]int, len(pl.thinking)+1)
	for i, tok := range pl.thinking {
		pl.thinkOff[i+1] = pl.thinkOff[i] + len(tok)
	}
	pl.thought = &chat.Thought{Signature: Signature(pl.thinkText), Format: chat.ThinkingAnthropic}
	pl.usage.OutputTokens += len(pl.thinking)
	pl.usage.ReasoningTokens = len(pl.thinking)
}

// thinkingSeed sets the thinking text's generator apart from the answer's.
const thinkingSeed = 0x7468696e6b696e67

// effortTime scales a tier's thinking time by the effort asked: none is
// no thinking, minimal a quarter, low half, high twice; medium, none
// given, or a budget alone, the tier's time.
func effortTime(t time.Duration, ask *chat.ThinkingAsk) time.Duration {
	if ask == nil {
		return t
	}
	switch ask.Effort {
	case "none":
		return 0
	case "minimal":
		return t / 4
	case "low":
		return t / 2
	case "high", "xhigh":
		return 2 * t
	}
	return t
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

// The simulated prompt cache is Anthropic's, at the grain of messages
// rather than content blocks: only a prefix that ends at a cache
// breakpoint (chat.Message.CacheBreakpoint) is written, and a breakpoint
// reads the longest prefix written before that ends at it or at one of the
// lookback message boundaries before it. An entry lives prefixTTL from its
// last write or read, and prefixes under minCachedPrefix tokens are not
// cached. A request without breakpoints is never cached. The tools begin
// every prefix; their own mark (the Anthropic adapter's) is not modelled.
const (
	prefixTTL       = 5 * time.Minute
	lookback        = 20
	minCachedPrefix = 64
	maxPrefixes     = 10000
)

// prefixCache remembers the prompt prefixes written, by hash.
type prefixCache struct {
	mu   sync.Mutex
	seen map[uint64]time.Time
}

// use looks req's marked prefixes up and writes them: the tokens read from
// the cache and written to it, as a provider reports them.
func (c *prefixCache) use(req *chat.Request, now time.Time) (read, written int) {
	// hash[k] and tokens[k] describe the prefix of the first k messages,
	// counted as chat.EstimateInputTokens counts the whole prompt.
	hash := make([]uint64, len(req.Messages)+1)
	tokens := make([]int, len(req.Messages)+1)
	hash[0], tokens[0] = fnv64("tools"), 3
	for _, t := range req.Tools {
		hash[0] = hash[0]*1099511628211 ^ fnv64(t.Name+"\x00"+t.Description+"\x00"+string(t.Parameters))
		tokens[0] += chat.EstimateTokens(t.Name) + chat.EstimateTokens(t.Description) + chat.EstimateTokens(string(t.Parameters))
	}
	var marks []int
	for i := range req.Messages {
		m := &req.Messages[i]
		h := fnv64(string(m.Role) + "\x00" + m.ToolCallID + "\x00" + m.Content)
		n := 4 + chat.EstimateTokens(m.Content)
		for _, tc := range m.ToolCalls {
			h = h*1099511628211 ^ fnv64(tc.ID+"\x00"+tc.Name+"\x00"+tc.Arguments)
			n += chat.EstimateTokens(tc.Name) + chat.EstimateTokens(tc.Arguments)
		}
		hash[i+1], tokens[i+1] = hash[i]*1099511628211^h, tokens[i]+n
		if m.CacheBreakpoint && tokens[i+1] >= minCachedPrefix {
			marks = append(marks, i+1)
		}
	}
	if len(marks) == 0 {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := func(k int) bool {
		t, ok := c.seen[hash[k]]
		return ok && now.Sub(t) < prefixTTL
	}
	hit := 0 // the longest prefix read, in messages
	for _, k := range marks {
		for j := k; j >= max(k-lookback, 1) && j > hit; j-- {
			if tokens[j] >= minCachedPrefix && fresh(j) {
				hit = j
				break
			}
		}
	}
	if hit > 0 {
		read = tokens[hit]
		c.seen[hash[hit]] = now
	}
	for _, k := range marks {
		if k > hit {
			written = tokens[k] - read
		}
		c.seen[hash[k]] = now
	}
	if len(c.seen) > maxPrefixes {
		for k, t := range c.seen {
			if now.Sub(t) >= prefixTTL {
				delete(c.seen, k)
			}
		}
	}
	return read, written
}
