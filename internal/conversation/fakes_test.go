package conversation

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store"
)

// TestMain fails the package's tests if any leaves a goroutine behind: a
// turn's guard, its context sources and its checkpointer all end with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// step is one thing the fake router's stream does.
type step struct {
	// after is how long the step waits first (fake time inside a
	// synctest bubble); the stream ends early if its ctx does.
	after time.Duration
	chunk chat.Chunk
	err   error
	// hang waits for the stream's ctx to end.
	hang bool
	// failover ends the attempt with an error, the upstream having
	// billed it spent, and starts another.
	failover *chat.Usage
}

// fakeRouter answers every request with the same script, filling the
// report as the router and the levers do: an attempt at deployment "dep",
// the deployment once the first token came, a bill share of 1. When the
// stream's ctx ends it ends as the router does: cut with FinishTimeout
// when the deadline passed after the first token, a timeout error when it
// passed before, else the ctx's cause.
type fakeRouter struct {
	script []step
	// timeout is every alias's timeout; unknown names an alias it has not.
	timeout time.Duration
	unknown string
	// levers sets what the levers in front of the router report (a
	// cache hit, a shared stream, a routing rule).
	levers func(*levers.Report)

	mu     sync.Mutex
	reqs   []*chat.Request
	causes []error // context.Cause of each stream's ctx as it ended
}

func (r *fakeRouter) Timeout(alias string) (time.Duration, error) {
	if alias == r.unknown {
		return 0, router.ErrUnknownModel
	}
	if r.timeout == 0 {
		return time.Minute, nil
	}
	return r.timeout, nil
}

// newCall resolves the call of request req_1 of t1/u1 for alias chat
// through r, timed by rec, metered by m (nil: not), with the client's
// timeout client (0: none).
func newCall(t *testing.T, r *fakeRouter, rec *budget.Recorder, m metering.Meter, client time.Duration) *call.Call {
	t.Helper()
	c, err := call.New(call.Options{Routes: r, Prices: prices, Meter: m}).Resolve(
		metering.Request{ID: "req_1", Surface: "chat", Tenant: "t1", User: "u1", Alias: "chat", Stream: true, Timings: rec}, client)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return c
}

// Plan plans nothing: the request goes to the fake router as it is.
func (r *fakeRouter) Plan(req *chat.Request, rep *levers.Report) levers.Planned {
	return fakePlan{r: r, req: req, rep: rep}
}

type fakePlan struct {
	r   *fakeRouter
	req *chat.Request
	rep *levers.Report
}

func (p fakePlan) Alias() string { return p.req.Model }

func (p fakePlan) Stream(ctx context.Context) chat.Stream { return p.r.StreamReport(ctx, p.req, p.rep) }

func (r *fakeRouter) StreamReport(ctx context.Context, req *chat.Request, rep *levers.Report) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req)
		r.mu.Unlock()
		rep.Alias, rep.BillShare = req.Model, 1
		if r.levers != nil {
			r.levers(rep)
		}
		rep.Attempts = append(rep.Attempts, router.Attempt{Deployment: "dep", Start: time.Now()})
		a := &rep.Attempts[len(rep.Attempts)-1]
		outcome := router.OutcomeOK
		defer func() {
			a.End, a.Outcome = time.Now(), outcome
			r.mu.Lock()
			r.causes = append(r.causes, context.Cause(ctx))
			r.mu.Unlock()
		}()
		started := false
		// ended ends a stream whose ctx is done, as the router does.
		ended := func() {
			cause := context.Cause(ctx)
			switch {
			case errors.Is(cause, chat.ErrDeadline) && started:
				outcome = router.OutcomeDeadline
				yield(chat.Chunk{FinishReason: chat.FinishTimeout}, nil)
			case errors.Is(cause, chat.ErrDeadline):
				outcome = router.OutcomeDeadline
				yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryTimeout, Message: "no deployment answered before the request's deadline", Err: chat.ErrDeadline})
			default:
				outcome = router.OutcomeCancelled
				yield(chat.Chunk{}, cause)
			}
		}
		for _, s := range r.script {
			if s.after > 0 {
				t := time.NewTimer(s.after)
				select {
				case <-ctx.Done():
					t.Stop()
					ended()
					return
				case <-t.C:
				}
			}
			if s.hang {
				<-ctx.Done()
				ended()
				return
			}
			if s.failover != nil {
				a.End, a.Outcome, a.Usage = time.Now(), router.OutcomeError, s.failover
				rep.Attempts = append(rep.Attempts, router.Attempt{Deployment: "dep", Start: time.Now()})
				a = &rep.Attempts[len(rep.Attempts)-1]
				continue
			}
			if s.err != nil {
				outcome = router.OutcomeError
				if started {
					outcome = router.OutcomeMidStreamError
				}
				yield(chat.Chunk{}, s.err)
				return
			}
			if !started && s.chunk.Visible() {
				started = true
				now := time.Now()
				a.FirstToken, rep.FirstToken = now, now
				rep.Deployment, rep.Model = "dep", "model"
			}
			if !yield(s.chunk, nil) {
				outcome = router.OutcomeCancelled
				return
			}
		}
	}
}

// calls returns the requests the router was sent and the causes their
// streams ended with.
func (r *fakeRouter) calls() ([]*chat.Request, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs), slices.Clone(r.causes)
}

// fakeGuard passes or blocks every message. Check takes after (or until
// its ctx ends, returning the ctx's error).
type fakeGuard struct {
	local  Verdict
	remote Verdict
	err    error
	after  time.Duration

	mu      sync.Mutex
	checked []string
}

func (g *fakeGuard) CheckLocal(string) Verdict { return g.local }

func (g *fakeGuard) Check(ctx context.Context, text, user string) (Verdict, error) {
	g.mu.Lock()
	g.checked = append(g.checked, user+": "+text)
	g.mu.Unlock()
	t := time.NewTimer(g.after)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return Verdict{}, ctx.Err()
	case <-t.C:
	}
	return g.remote, g.err
}

// checkpoint is one CheckpointMessage call.
type checkpoint struct {
	ID       string
	Content  string
	Tokens   int
	At       time.Time
	Thinking string
}

// fakeStore keeps conversations and messages in memory, with failures to
// inject. The methods the pipeline does not use are the nil embedded
// interface's: calling one panics.
type fakeStore struct {
	store.Store

	// Failures to inject, by method.
	errCreate, errGet, errAdd, errLast, errFinish, errCheckpoint error
	// lastDelay is how long LastMessages takes (or until its ctx ends).
	lastDelay time.Duration
	// createGate, when set, holds CreateConversation until it is closed.
	createGate chan struct{}
	// landLate makes a failing CreateConversation or AddMessages store
	// its rows all the same (a write whose answer was lost);
	// deleteFailures is how many deletes fail before one goes through.
	landLate       bool
	deleteFailures int
	// finishFailures is how many FinishMessage calls fail as a stalled
	// database does (store.ErrUnavailable) before one goes through.
	finishFailures int
	deletes        int // delete calls

	mu          sync.Mutex
	convs       map[string]store.Conversation
	msgs        []*store.Message
	checkpoints []checkpoint
	finished    []store.Message
}

func newFakeStore() *fakeStore { return &fakeStore{convs: map[string]store.Conversation{}} }

func (s *fakeStore) CreateConversation(_ context.Context, c *store.Conversation, first ...*store.Message) error {
	if s.createGate != nil {
		<-s.createGate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errCreate != nil && !s.landLate {
		return s.errCreate
	}
	s.convs[c.ID] = *c
	s.appendLocked(first)
	return s.errCreate
}

func (s *fakeStore) DeleteConversation(_ context.Context, tenantID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deletes++; s.deletes <= s.deleteFailures {
		return store.ErrUnavailable
	}
	c, ok := s.convs[id]
	if !ok || c.TenantID != tenantID {
		return store.ErrNotFound
	}
	delete(s.convs, id)
	s.msgs = slices.DeleteFunc(s.msgs, func(m *store.Message) bool { return m.ConversationID == id })
	return nil
}

func (s *fakeStore) DeleteMessages(_ context.Context, tenantID string, ids ...string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deletes++; s.deletes <= s.deleteFailures {
		return 0, store.ErrUnavailable
	}
	n := len(s.msgs)
	s.msgs = slices.DeleteFunc(s.msgs, func(m *store.Message) bool { return m.TenantID == tenantID && slices.Contains(ids, m.ID) })
	return n - len(s.msgs), nil
}

func (s *fakeStore) GetConversation(_ context.Context, tenantID, id string) (*store.Conversation, error) {
	if s.errGet != nil {
		return nil, s.errGet
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	if !ok || c.TenantID != tenantID {
		return nil, store.ErrNotFound
	}
	return &c, nil
}

func (s *fakeStore) AddMessages(_ context.Context, ms ...*store.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errAdd != nil && !s.landLate {
		return s.errAdd
	}
	if c, ok := s.convs[ms[0].ConversationID]; !ok || c.TenantID != ms[0].TenantID {
		return store.ErrNotFound
	}
	s.appendLocked(ms)
	return s.errAdd
}

// appendLocked numbers ms after their conversation's last message and
// keeps copies.
func (s *fakeStore) appendLocked(ms []*store.Message) {
	for _, m := range ms {
		seq := 1
		for _, o := range s.msgs {
			if o.ConversationID == m.ConversationID {
				seq = o.Seq + 1
			}
		}
		m.Seq = seq
		c := *m
		s.msgs = append(s.msgs, &c)
	}
}

func (s *fakeStore) LastMessages(ctx context.Context, tenantID, conversationID string, n int) ([]store.Message, error) {
	if s.lastDelay > 0 {
		t := time.NewTimer(s.lastDelay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if s.errLast != nil {
		return nil, s.errLast
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Message
	for _, m := range s.msgs {
		if m.TenantID == tenantID && m.ConversationID == conversationID {
			out = append(out, *m)
		}
	}
	return out[max(len(out)-n, 0):], nil
}

func (s *fakeStore) ListMessages(ctx context.Context, tenantID, conversationID string) ([]store.Message, error) {
	return s.LastMessages(ctx, tenantID, conversationID, 1<<30)
}

func (s *fakeStore) CheckpointMessage(_ context.Context, id, content string, thinking []byte, tokens int, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpoints = append(s.checkpoints, checkpoint{id, content, tokens, at, string(thinking)})
	if s.errCheckpoint != nil {
		return s.errCheckpoint
	}
	for _, m := range s.msgs {
		if m.ID == id && m.Status == store.StatusStreaming {
			m.Content, m.Thinking, m.OutputTokens, m.UpdatedAt = content, thinking, tokens, at
		}
	}
	return nil
}

func (s *fakeStore) FinishMessage(_ context.Context, m *store.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = append(s.finished, *m)
	if s.errFinish != nil {
		return s.errFinish
	}
	if s.finishFailures > 0 {
		s.finishFailures--
		return store.ErrUnavailable
	}
	for i, o := range s.msgs {
		if o.ID == m.ID {
			c := *m
			c.Seq = o.Seq
			s.msgs[i] = &c
		}
	}
	return nil
}

// saved returns the messages FinishMessage was called with and the
// checkpoints, in order.
func (s *fakeStore) saved() ([]store.Message, []checkpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.finished), slices.Clone(s.checkpoints)
}

// fakeMeter keeps the records.
type fakeMeter struct {
	mu      sync.Mutex
	records []metering.Record
}

func (m *fakeMeter) Record(_ context.Context, r *metering.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records = append(m.records, *r)
}

func (m *fakeMeter) all() []metering.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.records)
}
