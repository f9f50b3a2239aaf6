// Package levers applies the lesson's levers between the surfaces and the
// router: ask for less (answer caps, a brevity instruction, the thinking
// asked for and its budget's cap), use a
// smaller model where it is good enough (routing rules), cache (replay a
// complete answer as a stream), share identical requests in flight (one
// upstream stream, many subscribers), and mark the stable prompt prefix for
// provider prompt caching. A request is planned (Plan: which alias, which
// request, cached or shared), then streamed (Stream), with a report of its
// own (Report) that holds the router's.
package levers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/router"
)

// Inner is the router the levers sit in front of.
type Inner interface {
	StreamReport(ctx context.Context, req *chat.Request, rep *router.Report) chat.Stream
	// StreamFallback routes req, and fallback if req's alias fails before
	// the first token (see router.Router.StreamFallback).
	StreamFallback(ctx context.Context, req, fallback *chat.Request, rep *router.Report) chat.Stream
	// Timeout is router.Router.Timeout: its error says the alias is not
	// served.
	Timeout(alias string) (time.Duration, error)
}

// Alias is an alias's levers.
type Alias struct {
	// MaxTokens caps every request's answer; DefaultMaxTokens applies when
	// the client sets none. Clients may ask for less, never more.
	MaxTokens, DefaultMaxTokens int
	// Brevity is appended to the system prompt.
	Brevity string
	// PromptCaching marks the stable prompt prefix as cache breakpoints
	// for providers that need them (see markPrefix); without it no
	// breakpoint is sent, not even a client's own.
	PromptCaching bool
	// Cache: Enabled for deterministic requests (temperature 0);
	// Nondeterministic caches the others too. TTL bounds an entry's life.
	Cache struct {
		Enabled, Nondeterministic bool
		TTL                       time.Duration
	}
	// Coalesce shares identical cacheable requests in flight.
	Coalesce bool
	// Rules pick another alias (a smaller tier) for some requests; the
	// first that matches wins.
	Rules []Rule
	// Thinking is the alias's policy for a model's thinking.
	Thinking Thinking
}

// Thinking is an alias's thinking policy (config.Thinking).
type Thinking struct {
	// Effort is asked when the client asks for none ("": the upstream's
	// default).
	Effort string
	// MaxBudgetTokens caps the thinking budget (0: no cap): a larger
	// budget is lowered to it, and so is an effort that would buy more
	// (chat.EffortBudget), which is then asked as this budget.
	MaxBudgetTokens int
	// Hide: the thinking is not shown to clients (show: false); it is
	// still measured and billed (see Report.HideThinking).
	Hide bool
}

// Rule routes a request to another alias when all its set conditions hold.
type Rule struct {
	Name string
	// MaxInputTokens matches prompts of at most this many (estimated)
	// tokens.
	MaxInputTokens int
	// Keywords match the last user message (case-insensitive words).
	Keywords []string
	// Hint matches the client's X-Firstword-Hint; Route its
	// X-Firstword-Route-Tag.
	Hint, Route string
	// Use is the alias to route to.
	Use string
}

// Options configures Levers.
type Options struct {
	Inner Inner
	// Aliases are the aliases' levers. A name the router serves that is
	// not listed (a PROVIDER/MODEL name, see router.Passthrough) gets
	// Unlisted's.
	Aliases map[string]Alias
	// Unlisted are the levers of names the router serves that Aliases
	// does not list (nil: those of an alias whose config sets none: the
	// response cache for deterministic requests, coalescing, no cap but
	// the client's).
	Unlisted *Alias
	// Cache stores answers (nil: no response cache).
	Cache cache.Cache
	// ReplayTokensPerSecond paces cache hits for UIs that want the typing
	// feel (0: as fast as the client reads).
	ReplayTokensPerSecond float64
	// CacheWrites bounds the cache writes in flight (default 64). Answers
	// are written after they ended, in the background; a write that
	// finds CacheWrites in flight is dropped, so a slow cache cannot pile
	// them up.
	CacheWrites int
	Log         *slog.Logger
}

// writeTimeout bounds one cache write, for a cache without a timeout of
// its own (cache.Guarded has a much shorter one).
const writeTimeout = 2 * time.Second

// Levers wraps a router. Safe for concurrent use.
type Levers struct {
	opt Options

	// writes is a semaphore: save takes a slot without waiting (or drops the
	// write), the write's goroutine gives it back, and Flush takes them all.
	writes  chan struct{} // a slot per cache write in flight
	dropped atomic.Uint64

	mu      sync.Mutex
	flights map[string]*flight
	pending map[string]*cache.Entry // answers being written, hits meanwhile
}

// New returns Levers.
func New(opt Options) *Levers {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.CacheWrites <= 0 {
		opt.CacheWrites = 64
	}
	if opt.Unlisted == nil {
		a := Alias{Coalesce: true}
		a.Cache.Enabled = true
		opt.Unlisted = &a
	}
	return &Levers{opt: opt, writes: make(chan struct{}, opt.CacheWrites), flights: map[string]*flight{}, pending: map[string]*cache.Entry{}}
}

// Stats are the levers' counters.
type Stats struct {
	// CacheWrites is the number of cache writes in flight.
	CacheWrites int
	// CacheWritesDropped counts the answers not written because
	// Options.CacheWrites writes were in flight.
	CacheWritesDropped uint64
}

// Stats returns the counters.
func (l *Levers) Stats() Stats {
	return Stats{CacheWrites: len(l.writes), CacheWritesDropped: l.dropped.Load()}
}

// Flush waits until the cache writes in flight are done (each ends within
// its timeout), or ctx ends. Writes that start meanwhile are dropped: it
// is for shutdown, once no request is served, and for tests.
func (l *Levers) Flush(ctx context.Context) error {
	held := 0
	defer func() {
		for range held {
			<-l.writes
		}
	}()
	for held < cap(l.writes) {
		select {
		case l.writes <- struct{}{}:
			held++
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Timeout is the router's Timeout: how long a request for alias may
// take, or why it is not served.
func (l *Levers) Timeout(alias string) (time.Duration, error) { return l.opt.Inner.Timeout(alias) }

// Planned is a request the levers planned (Levers.Plan): the alias it is
// routed to first, and its stream.
type Planned interface {
	// Alias is the alias the request is routed to first: a routing
	// rule's, or the one asked for.
	Alias() string
	// Stream routes the request through the levers to the router, filling
	// the report Plan was given with what both did. The iterator is
	// single-use; breaking out of it or cancelling ctx aborts the
	// upstream at once.
	Stream(ctx context.Context) chat.Stream
}

// plan is what the levers decided for a request.
type plan struct {
	l   *Levers
	rep *Report
	req *chat.Request // rewritten by the alias's rules and shaping
	// fallback is the request shaped for the alias asked for, when a rule
	// chose another: routed if the rule's alias fails before the first
	// token.
	fallback *chat.Request
	alias    Alias
	key      string // the cache key, when cacheable
	cached   bool   // look the answer up in the cache (and save it)
	coalesce bool   // join identical requests in flight
}

func (p *plan) Alias() string { return p.req.Model }

// Stream implements Planned. A request the levers leave alone gets the
// router's stream itself, so the levers add no frame to the path of its
// chunks.
func (p *plan) Stream(ctx context.Context) chat.Stream {
	l, rep := p.l, p.rep
	if !p.cached && !p.coalesce {
		return l.route(ctx, p, &rep.Report)
	}
	return func(yield func(chat.Chunk, error) bool) {
		store := false
		if p.cached {
			policy := p.req.Hints.Cache
			if policy != chat.CacheBypass {
				if e := l.lookup(ctx, p.key); e != nil {
					l.replay(ctx, e, rep, yield)
					return
				}
			}
			store = policy != chat.CacheNoStore
		}
		switch {
		case p.coalesce:
			l.coalesce(ctx, p, rep, store, yield)
		case store:
			l.forwardAndSave(ctx, p, &rep.Report, yield)
		default:
			l.forward(ctx, p, &rep.Report, yield)
		}
	}
}

// Plan applies the routing rules and shaping of req's alias and decides
// whether its answer is cached or coalesced. rep (nil: none wanted)
// receives the rule that chose another alias now, and what the levers
// and the router did as the plan's stream runs. req's alias is one the
// router serves (the request's call resolved it); a name the levers do
// not list gets the levers of Options.Unlisted.
func (l *Levers) Plan(req *chat.Request, rep *Report) Planned {
	if rep == nil {
		rep = &Report{}
	}
	// Billed in full unless a cache hit or a shared stream says otherwise
	// (see replay, follow).
	rep.BillShare = 1
	a, ok := l.opt.Aliases[req.Model]
	if !ok {
		a = *l.opt.Unlisted
	}
	var fallback *chat.Request
	if to, rule := l.pick(req, a); to != "" {
		rep.Rule, rep.Requested = rule, req.Model
		// The fallback is shaped by the levers of the alias asked for, the
		// request routed by those of the rule's alias.
		fallback = shape(req, a)
		req = req.Clone()
		req.Model = to
		a = l.opt.Aliases[to]
	}
	req = shape(req, a)
	rep.HideThinking = a.Thinking.Hide
	f := &rep.Fingerprint
	f.Repeat, f.Prefix, f.PrefixTokens = fingerprint(req)
	key, cacheable := l.key(req, a)
	// The rest of an answer is not an answer of its own.
	cacheable = cacheable && req.Hints.Continues == ""
	return &plan{l: l, rep: rep, req: req, fallback: fallback, alias: a, key: key, cached: cacheable && l.opt.Cache != nil, coalesce: cacheable && a.Coalesce}
}

// route hands a planned request to the router.
func (l *Levers) route(ctx context.Context, p *plan, rep *router.Report) chat.Stream {
	if p.fallback != nil {
		return l.opt.Inner.StreamFallback(ctx, p.req, p.fallback, rep)
	}
	return l.opt.Inner.StreamReport(ctx, p.req, rep)
}

// forwardAndSave streams from the router and saves a complete answer in
// the cache.
func (l *Levers) forwardAndSave(ctx context.Context, p *plan, rep *router.Report, yield func(chat.Chunk, error) bool) {
	var kept []chat.Chunk
	for c, err := range l.route(ctx, p, rep) {
		if err != nil {
			yield(chat.Chunk{}, err)
			return
		}
		kept = append(kept, c)
		if !yield(c, nil) {
			return
		}
	}
	// Reached only when the stream ended by itself: after an error or a
	// client that left, the answer is incomplete and is not saved.
	l.save(ctx, p.key, p.req.Model, p.alias, rep, kept)
}

func (l *Levers) forward(ctx context.Context, p *plan, rep *router.Report, yield func(chat.Chunk, error) bool) {
	for c, err := range l.route(ctx, p, rep) {
		if !yield(c, err) || err != nil {
			return
		}
	}
}

// pick applies an alias's routing rules.
func (l *Levers) pick(req *chat.Request, a Alias) (alias, rule string) {
	for i, r := range a.Rules {
		if _, ok := l.opt.Aliases[r.Use]; !ok || !r.matches(req) {
			continue
		}
		name := r.Name
		if name == "" {
			name = "rule" + strconv.Itoa(i+1)
		}
		return r.Use, name
	}
	return "", ""
}

func (r *Rule) matches(req *chat.Request) bool {
	if r.MaxInputTokens > 0 && chat.EstimateInputTokens(req) > r.MaxInputTokens {
		return false
	}
	if r.Hint != "" && req.Hints.Hint != r.Hint {
		return false
	}
	if r.Route != "" && req.Hints.RouteTag != r.Route {
		return false
	}
	if len(r.Keywords) > 0 {
		words := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(lastUser(req)), func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) }) {
			words[w] = true
		}
		hit := false
		for _, k := range r.Keywords {
			hit = hit || words[strings.ToLower(k)]
		}
		if !hit {
			return false
		}
	}
	return true
}

func lastUser(req *chat.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == chat.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

// shape applies the answer cap, the brevity instruction, the thinking
// policy (think) and the prompt cache breakpoints, on a copy. With prompt
// caching the breakpoints the request carries (a client's own, or the
// /v1/chat system prompt's) are kept and markPrefix's are added; without
// it none is sent.
func shape(req *chat.Request, a Alias) *chat.Request {
	cap := a.MaxTokens
	want := req.MaxTokens
	if want == 0 {
		want = a.DefaultMaxTokens
	}
	if cap > 0 && (want == 0 || want > cap) {
		want = cap
	}
	marked := false
	for _, m := range req.Messages {
		marked = marked || m.CacheBreakpoint
	}
	settled := !marked // the marks need no change
	if a.PromptCaching {
		settled = len(markPrefix(req.Messages, len(req.Tools) > 0)) == 0
	}
	ask := think(req.Thinking, a.Thinking)
	if want == req.MaxTokens && a.Brevity == "" && settled && ask == req.Thinking {
		return req
	}
	req = req.Clone()
	req.MaxTokens = want
	req.Thinking = ask
	if a.Brevity != "" {
		i := 0
		for i < len(req.Messages) && req.Messages[i].Role == chat.RoleSystem {
			i++
		}
		if i > 0 {
			m := req.Messages[i-1]
			m.Content = strings.TrimSpace(m.Content + "\n\n" + a.Brevity)
			m.Parts = nil
			req.Messages[i-1] = m
		} else {
			req.Messages = slices.Insert(req.Messages, 0, chat.Message{Role: chat.RoleSystem, Content: a.Brevity})
		}
	}
	if !a.PromptCaching {
		for i := range req.Messages {
			req.Messages[i].CacheBreakpoint = false
		}
		return req
	}
	for _, i := range markPrefix(req.Messages, len(req.Tools) > 0) {
		req.Messages[i].CacheBreakpoint = true
	}
	return req
}

// think applies an alias's thinking policy to what a request asks of the
// thinking: ask itself when it has nothing to change, else a new ask. A
// request that asks neither an effort nor a budget gets the alias's
// effort (keeping whether it shows the thinking); then the cap lowers a
// budget over it, and an effort that would buy more than it becomes the
// cap as a budget. "none" asks for no thinking: nothing to cap.
func think(ask *chat.ThinkingAsk, p Thinking) *chat.ThinkingAsk {
	t := chat.ThinkingAsk{}
	if ask != nil {
		t = *ask
	}
	if t.Effort == "" && t.BudgetTokens == 0 {
		t.Effort = p.Effort
	}
	if limit := p.MaxBudgetTokens; limit > 0 && t.Effort != "none" {
		t.BudgetTokens = min(t.BudgetTokens, limit)
		if chat.EffortBudget(t.Effort) > limit {
			if t.BudgetTokens == 0 {
				t.BudgetTokens = limit
			}
			t.Effort = ""
		}
	}
	switch {
	case ask != nil && t == *ask, ask == nil && t == chat.ThinkingAsk{}:
		return ask
	}
	return &t
}

// maxBreakpoints is how many cache breakpoints a request may carry:
// Anthropic's limit, the only provider that takes explicit ones.
const maxBreakpoints = 4

// markPrefix returns the messages to mark as cache breakpoints besides
// those already marked, most valuable first, so that the marks never
// exceed maxBreakpoints; one is kept for the last tool definition, which
// the Anthropic adapter marks when a request has tools and any mark.
//
// Unless a message of the conversation (after the leading system
// messages) is marked already, by a client of /v1/messages or by the
// /v1/chat prompt, which then said where its stable prefix ends:
//
//  1. the last message (an assistant prefill left out). The next request
//     repeats it, so its prefix, written now, is read then: a rolling
//     breakpoint, Anthropic's pattern for conversations and tool loops;
//  2. the previous request's last message: the one before the assistant
//     messages that answered it. Its prefix was written by that request's
//     mark 1, and is read here at once, even when the newest exchange is
//     longer than the 20 blocks Anthropic looks back from a mark (a tool
//     loop with many calls).
//
// And the end of the leading system messages, which every conversation
// with the same system prompt (and tools) shares, ranked between the two.
//
// Short prefixes are marked too: a mark costs nothing, and Anthropic
// skips prefixes under the model's minimum (1024 tokens on most models,
// more on some), which depends on the deployment the router picks after
// the levers.
func markPrefix(msgs []chat.Message, tools bool) []int {
	free := maxBreakpoints
	if tools {
		free--
	}
	system := -1
	for i := 0; i < len(msgs) && msgs[i].Role == chat.RoleSystem; i++ {
		system = i
	}
	conversation := false
	for i, m := range msgs {
		if m.CacheBreakpoint {
			free--
			conversation = conversation || i > system
		}
	}
	var out []int
	add := func(i int) {
		if i >= 0 && free > 0 && !msgs[i].CacheBreakpoint && !slices.Contains(out, i) {
			out = append(out, i)
			free--
		}
	}
	last, prev := -1, -1
	if !conversation {
		last, prev = lastTurns(msgs)
	}
	add(last)
	add(system)
	add(prev)
	return out
}

// lastTurns returns the index of the last message, leaving out an
// assistant prefill (it is not repeated as such: the answer continues it),
// and that of the previous request's last message: the one before the
// assistant messages that answered it. -1 stands for none.
func lastTurns(msgs []chat.Message) (last, prev int) {
	i := len(msgs) - 1
	for i >= 0 && msgs[i].Role == chat.RoleAssistant {
		i--
	}
	last = i
	for i >= 0 && msgs[i].Role != chat.RoleAssistant {
		i--
	}
	for i >= 0 && msgs[i].Role == chat.RoleAssistant {
		i--
	}
	return last, i
}

// key is the cache and coalescing key of a request, and whether it may be
// cached at all: deterministic (temperature 0, n 1) unless the alias or the
// client opted in.
func (l *Levers) key(req *chat.Request, a Alias) (string, bool) {
	if !a.Cache.Enabled && req.Hints.Cache != chat.CacheOn {
		return "", false
	}
	deterministic := req.Temperature != nil && *req.Temperature == 0
	if !deterministic && !a.Cache.Nondeterministic && req.Hints.Cache != chat.CacheOn {
		return "", false
	}
	if req.Choices() > 1 {
		return "", false
	}
	// Everything that changes the answer, and the tenant.
	k := struct {
		Tenant, Model     string
		Messages          []chat.Message
		Tools             []chat.Tool
		ToolChoice        *chat.ToolChoice
		MaxTokens         int
		Temperature, TopP *float64
		Stop              []string
		Seed              *int64
		ParallelToolCalls *bool
		ResponseFormat    json.RawMessage
		Extra             map[string]json.RawMessage
		Sim               string
		Thinking          *chat.ThinkingAsk `json:",omitempty"`
	}{req.Hints.Tenant, req.Model, req.Messages, req.Tools, req.ToolChoice, req.MaxTokens, req.Temperature, req.TopP,
		req.Stop, req.Seed, req.ParallelToolCalls, req.ResponseFormat, req.Extra, req.Hints.Sim, req.Thinking}
	b, err := json.Marshal(k)
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}

// lookup finds a cached answer: one still being written, or the cache's.
func (l *Levers) lookup(ctx context.Context, key string) *cache.Entry {
	l.mu.Lock()
	e := l.pending[key]
	l.mu.Unlock()
	// An answer still being written is served from memory: the cache may
	// not have it yet.
	if e != nil && time.Now().Before(e.Expires) {
		return e
	}
	e, err := l.opt.Cache.Get(ctx, key)
	if err != nil {
		l.opt.Log.Warn("cache read", "err", err)
		return nil
	}
	return e
}

// save stores a complete, successful answer, in the background: the
// answer's ending never waits on the cache. Until the write is done the
// entry is served from memory, so a request that follows a finished one
// on this replica finds it. A partial, errored, cancelled or cut answer is
// never stored, nor one continued after its attempt broke (its seam is
// the router's best guess, not an answer the model gave in one piece). What is stored is the whole stream, thinking and all, but
// for the thinking of attempts that failed: what came before the last
// restart (chat.Thought.Restart).
func (l *Levers) save(ctx context.Context, key, alias string, a Alias, rep *router.Report, chunks []chat.Chunk) {
	chunks = afterRestart(chunks)
	finished := false
	for _, c := range chunks {
		switch c.FinishReason {
		case chat.FinishStop, chat.FinishLength, chat.FinishToolCalls:
			finished = true
		case "":
		default:
			return // timeout, content_filter...
		}
	}
	if !finished || rep.Deployment == "" || rep.Continuations() > 0 {
		return
	}
	ttl := a.Cache.TTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	now := time.Now()
	e := &cache.Entry{Alias: alias, Model: rep.Model, Deployment: rep.Deployment, Chunks: slices.Clone(chunks), Created: now, Expires: now.Add(ttl)}
	for i := range e.Chunks {
		e.Chunks[i].More = false
	}
	select {
	case l.writes <- struct{}{}:
	default:
		l.dropped.Add(1)
		return
	}
	l.mu.Lock()
	// Visible before the write starts, so a hit is possible at once.
	l.pending[key] = e
	l.mu.Unlock()
	go func() {
		defer func() { <-l.writes }()
		// The write outlives the request, within its own bound.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		if err := l.opt.Cache.Set(wctx, key, e); err != nil {
			l.opt.Log.Warn("cache write", "err", err)
		}
		l.mu.Lock()
		// A later answer for the same key may have replaced e meanwhile: only
		// one's own entry is removed.
		if l.pending[key] == e {
			delete(l.pending, key)
		}
		l.mu.Unlock()
	}()
}

// afterRestart returns the chunks after the last restart: those of the
// attempt that served.
func afterRestart(chunks []chat.Chunk) []chat.Chunk {
	for i := len(chunks) - 1; i >= 0; i-- {
		if th := chunks[i].Thought; th != nil && th.Restart {
			return chunks[i+1:]
		}
	}
	return chunks
}

// replay streams a cached answer, its thinking too: immediately, or
// paced at ReplayTokensPerSecond (a gap before each chunk of text or
// thinking after the first). It costs no upstream tokens.
func (l *Levers) replay(ctx context.Context, e *cache.Entry, rep *Report, yield func(chat.Chunk, error) bool) {
	now := time.Now()
	rep.Cached = true
	rep.Deployment, rep.Model, rep.FirstToken, rep.BillShare = e.Deployment, e.Model, now, 0
	var gap time.Duration
	if l.opt.ReplayTokensPerSecond > 0 {
		gap = time.Duration(float64(time.Second) / l.opt.ReplayTokensPerSecond)
	}
	var t *time.Timer
	var sent delivered
	for i, c := range e.Chunks {
		if gap > 0 && i > 0 && (c.Visible() || c.Thinking != "") {
			if t == nil {
				t = time.NewTimer(gap)
				defer t.Stop()
			} else {
				t.Reset(gap)
			}
			select {
			case <-ctx.Done():
				sent.end(ctx, yield)
				return
			case <-t.C:
			}
		}
		// Unpaced, the whole answer is at hand: the writer may batch chunks.
		c.More = gap == 0 && i < len(e.Chunks)-1
		sent.add(&c)
		if !yield(c, nil) {
			return
		}
	}
}
