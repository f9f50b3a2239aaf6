package levers

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/router"
)

// tick is one step of a scripted answer.
type tick struct {
	// after is how long the step waits first (fake time in a synctest
	// bubble); a ctx that ends meanwhile ends the stream with its cause.
	after time.Duration
	chunk chat.Chunk
	err   error
}

// hello is an answer in two deltas, 100ms apart, with its usage.
var hello = []tick{
	{after: 100 * time.Millisecond, chunk: chat.Chunk{Text: "Hel"}},
	{after: 100 * time.Millisecond, chunk: chat.Chunk{Text: "lo"}},
	{chunk: chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 10, OutputTokens: 2}}},
}

// scripted is a router that answers every request with its script. Like
// the router it reports the deployment ("dep") and the first token once
// one came. It serves every alias but "unknown".
type scripted struct {
	script []tick

	mu        sync.Mutex
	reqs      []*chat.Request
	deadlines []time.Time // of each stream's ctx (zero: none)
	causes    []error     // context.Cause of each stream's ctx as it ended
}

func (s *scripted) StreamReport(ctx context.Context, req *chat.Request, rep *router.Report) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		d, _ := ctx.Deadline()
		s.mu.Lock()
		s.reqs, s.deadlines = append(s.reqs, req), append(s.deadlines, d)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.causes = append(s.causes, context.Cause(ctx))
			s.mu.Unlock()
		}()
		rep.Alias = req.Model
		rep.Attempts = append(rep.Attempts, router.Attempt{Deployment: "dep", Start: time.Now()})
		for _, tk := range s.script {
			if tk.after > 0 {
				t := time.NewTimer(tk.after)
				select {
				case <-ctx.Done():
					t.Stop()
					yield(chat.Chunk{}, context.Cause(ctx))
					return
				case <-t.C:
				}
			}
			if tk.err != nil {
				yield(chat.Chunk{}, tk.err)
				return
			}
			if tk.chunk.Visible() && rep.FirstToken.IsZero() {
				now := time.Now()
				rep.FirstToken, rep.Attempts[0].FirstToken = now, now
				rep.Deployment, rep.Model = "dep", "model"
			}
			if !yield(tk.chunk, nil) {
				return
			}
		}
	}
}

// StreamFallback routes req alone: the fallback is the router's business.
func (s *scripted) StreamFallback(ctx context.Context, req, _ *chat.Request, rep *router.Report) chat.Stream {
	return s.StreamReport(ctx, req, rep)
}

func (s *scripted) Timeout(alias string) (time.Duration, error) {
	if alias == "unknown" {
		return 0, router.ErrUnknownModel
	}
	return time.Minute, nil
}

// streamReport plans req and streams it, as a request's call does.
func streamReport(l *Levers, ctx context.Context, req *chat.Request, rep *Report) chat.Stream {
	if rep == nil {
		rep = &Report{}
	}
	return l.Plan(req, rep).Stream(ctx)
}

// calls returns the requests the router was sent, their contexts'
// deadlines and the causes their streams ended with.
func (s *scripted) calls() ([]*chat.Request, []time.Time, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs), slices.Clone(s.deadlines), slices.Clone(s.causes)
}

// mapCache is a cache in a map, with failures to inject.
type mapCache struct {
	getErr, setErr error

	mu   sync.Mutex
	m    map[string]*cache.Entry
	sets int
}

func (c *mapCache) Get(_ context.Context, key string) (*cache.Entry, error) {
	if c.getErr != nil {
		return nil, c.getErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key], nil
}

func (c *mapCache) Set(_ context.Context, key string, e *cache.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets++
	if c.setErr != nil {
		return c.setErr
	}
	if c.m == nil {
		c.m = map[string]*cache.Entry{}
	}
	c.m[key] = e
	return nil
}

func (c *mapCache) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sets
}

// read streams req through l to its end, or until the client leaves
// after leaveAfter chunks (0: never): the chunks, each delivered with the
// time it took since the start, and the error.
func read(ctx context.Context, l *Levers, req *chat.Request, rep *Report, leaveAfter int) ([]chat.Chunk, []time.Duration, error) {
	start := time.Now()
	var chunks []chat.Chunk
	var at []time.Duration
	for c, err := range streamReport(l, ctx, req, rep) {
		if err != nil {
			return chunks, at, err
		}
		chunks, at = append(chunks, c), append(at, time.Since(start))
		if len(chunks) == leaveAfter {
			break
		}
	}
	return chunks, at, nil
}

// question is a deterministic (so cacheable) request for alias.
func question(alias, text string) *chat.Request {
	return &chat.Request{Model: alias, Temperature: new(0.0), Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}}
}

// texts are the chunks' texts.
func texts(chunks []chat.Chunk) []string {
	var out []string
	for _, c := range chunks {
		out = append(out, c.Text)
	}
	return out
}
