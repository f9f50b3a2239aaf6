package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/store"
)

// prices make costs easy to read: each input token costs 1, each output
// token 2.
var prices = metering.Prices{"dep": {Input: 1e6, Output: 2e6}}

// setup is one turn's world: the fakes, the service's options, and what
// the client does.
type setup struct {
	router      *fakeRouter
	guard       *fakeGuard // nil: no guard
	remote      bool       // the guard's Check runs (in parallel)
	guardBefore bool
	sources     []Source
	store       *fakeStore // nil: a new one
	// existing continues conversation "conv_1" (see seed) rather than
	// starting one; seeded, one the test seeded in store.
	existing, seeded bool
	timeout          time.Duration // the client's deadline (Input.Timeout)
	// leaveAt is the delta (1-based) the client does not receive: it left.
	leaveAt int
	// leaveAtEvent is the event (1-based, of any kind) the client does
	// not receive.
	leaveAtEvent int
	// cancelAfter cancels the request's ctx with cancelCause (the
	// client's connection closing, the server shutting down).
	cancelAfter time.Duration
	cancelCause error
	system      string       // the system prompt
	log         *slog.Logger // nil: discarded
}

// played is what one turn did.
type played struct {
	meta    Meta
	events  []Event // as yielded; the one the client did not receive last
	saved   []store.Message
	cps     []checkpoint
	records []metering.Record
	reqs    []*chat.Request
	causes  []error
	start   time.Time
	// timings are the last event's.
	timings budget.Timings
}

// seed stores conversation conv_1 of t1/u1 with one exchange.
func seed(s *fakeStore) {
	now := time.Now().UTC()
	s.CreateConversation(context.Background(), &store.Conversation{ID: "conv_1", TenantID: "t1", UserID: "u1", Title: "Earlier", Model: "chat", CreatedAt: now, UpdatedAt: now},
		&store.Message{ID: "msg_a", ConversationID: "conv_1", TenantID: "t1", Role: "user", Content: "Earlier question", Status: store.StatusComplete},
		&store.Message{ID: "msg_b", ConversationID: "conv_1", TenantID: "t1", Role: "assistant", Content: "Earlier answer", Status: store.StatusComplete})
}

// play prepares and runs the turn "Hi" of t1/u1 on alias chat. Call it in
// a synctest bubble: the timings are then exact.
func play(t *testing.T, su setup) played {
	t.Helper()
	st := su.store
	if st == nil {
		st = newFakeStore()
	}
	if su.existing {
		seed(st)
	}
	m := &fakeMeter{}
	opt := Options{Store: st, Sources: su.sources, GuardBefore: su.guardBefore, RemoteGuard: su.remote, Log: su.log,
		SystemPrompt: func(string) string { return su.system }}
	if su.guard != nil {
		opt.Guard = su.guard
	}
	s := New(opt)
	p := played{start: time.Now()}
	rec := budget.New(p.start)
	c := newCall(t, su.router, rec, m, su.timeout)
	in := Input{RequestID: "req_1", TenantID: "t1", UserID: "u1", Model: "chat", Message: "Hi", Call: c}
	if su.existing || su.seeded {
		in.ConversationID = "conv_1"
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	if su.cancelAfter > 0 {
		timer := time.AfterFunc(su.cancelAfter, func() { cancel(su.cancelCause) })
		defer timer.Stop()
	}
	turn, err := s.Prepare(ctx, in)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	p.meta = turn.Meta()
	deltas := 0
	cctx, release := c.Context(ctx)
	defer release(nil)
	turn.Run(cctx, func(ev Event) bool {
		p.events = append(p.events, ev)
		if len(p.events) == su.leaveAtEvent {
			return false
		}
		if ev.Kind == "delta" {
			deltas++
			return deltas != su.leaveAt
		}
		return true
	})
	// Metering runs after the last event; the turn's goroutines end
	// with Run.
	synctest.Wait()
	for _, ev := range p.events {
		// The message ID is the one meta announced; timings are
		// checked apart.
		switch {
		case ev.Done != nil:
			if ev.Done.MessageID != p.meta.MessageID {
				t.Errorf("done for message %q, meta announced %q", ev.Done.MessageID, p.meta.MessageID)
			}
			p.timings = ev.Done.Timings
			ev.Done.MessageID, ev.Done.Timings = "", budget.Timings{}
		case ev.Error != nil:
			if ev.Error.MessageID != p.meta.MessageID {
				t.Errorf("error for message %q, meta announced %q", ev.Error.MessageID, p.meta.MessageID)
			}
			p.timings = ev.Error.Timings
			ev.Error.MessageID, ev.Error.Timings = "", budget.Timings{}
		}
	}
	p.saved, p.cps = st.saved()
	for _, m := range p.saved {
		if m.ID != p.meta.MessageID {
			t.Errorf("saved message %q, meta announced %q", m.ID, p.meta.MessageID)
		}
	}
	p.records = m.all()
	p.reqs, p.causes = su.router.calls()
	return p
}

func delta(s string) Event { return Event{Kind: "delta", Text: s} }

// done is the done event of a turn answered by deployment dep, changed by
// f.
func done(f func(*Done)) Event {
	d := &Done{Status: store.StatusComplete, FinishReason: "stop", Model: "chat", Deployment: "dep", Attempts: 1, Route: "dep=ok"}
	f(d)
	return Event{Kind: "done", Done: d}
}

func failed(e ErrorEvent) Event { return Event{Kind: "error", Error: &e} }

// saved is the answer's final state as stored, changed by f.
func saved(f func(*store.Message)) store.Message {
	m := store.Message{TenantID: "t1", Role: "assistant", Model: "chat"}
	f(&m)
	return m
}

// ignoreIdentity leaves out what a stored message's test does not fix:
// its identity, its times, and the JSON checked apart.
var ignoreIdentity = cmpopts.IgnoreFields(store.Message{}, "ID", "ConversationID", "Seq", "CreatedAt", "UpdatedAt", "Timings", "Meta")

// record is the metering record of request req_1, changed by f. A turn
// no deployment answered is billed no usage (see metering.Prices.Charge).
func record(start time.Time, f func(*metering.Record)) metering.Record {
	r := metering.Record{RequestID: "req_1", Time: start, Surface: "chat", Tenant: "t1", User: "u1", Alias: "chat", Stream: true, Attempts: 1}
	f(&r)
	return r
}

// estimatedInput is the estimate of the prompt "Hi", alone.
var estimatedInput = chat.EstimateInputTokens(&chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}})

// answer is the router's script for "Hello": two deltas 100ms apart, the
// usage reported.
var answer = []step{
	{after: 100 * time.Millisecond, chunk: chat.Chunk{Text: "Hel"}},
	{after: 100 * time.Millisecond, chunk: chat.Chunk{Text: "lo"}},
	{chunk: chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 10, OutputTokens: 2}}},
}

const blockReason = "That topic is off limits."

var blocked = Verdict{Blocked: true, Code: "blocklist", Reason: blockReason}

// TestRunEndings plays every way a turn ends and checks the three things
// each must get right: the events the client is sent, the message as
// saved (its content exactly the text sent) and the metering record.
func TestRunEndings(t *testing.T) {
	ms := time.Millisecond
	in := estimatedInput
	blockedEvent := failed(ErrorEvent{Code: "guardrail_blocked", Message: blockReason, Status: store.StatusError, Usage: chat.Usage{InputTokens: in, Estimated: true}})
	blockedSaved := saved(func(m *store.Message) {
		m.Status, m.InputTokens, m.Estimated, m.ErrorCode, m.ErrorMessage = store.StatusError, in, true, "guardrail_blocked", blockReason
	})
	blockedRecord := func(total time.Duration, attempts int) func(r *metering.Record) {
		return func(r *metering.Record) {
			r.Status, r.Usage, r.ErrorCode, r.Error, r.Total, r.Attempts = metering.StatusError, chat.Usage{}, "guardrail_blocked", blockReason, total, attempts
		}
	}
	slowDocs := func(optional bool, timeout time.Duration) Source {
		return Source{Name: "docs", Timeout: timeout, Optional: optional, Fetch: func(ctx context.Context, q Query) (string, []Citation, error) {
			select {
			case <-ctx.Done():
				return "", nil, ctx.Err()
			case <-time.After(100 * ms):
				return "returns.md", nil, nil
			}
		}}
	}
	brokenDocs := func(optional bool) Source {
		return Source{Name: "docs", Timeout: time.Second, Optional: optional, Fetch: func(ctx context.Context, q Query) (string, []Citation, error) {
			time.Sleep(40 * ms)
			return "", nil, errors.New("index offline")
		}}
	}
	tests := []struct {
		name   string
		setup  setup
		events []Event
		saved  store.Message
		record func(*metering.Record)
		// calls is how many requests the router was sent; causes how
		// their streams' contexts ended (nil: normally).
		calls  int
		causes []error
	}{
		{
			name:   "done",
			setup:  setup{router: &fakeRouter{script: answer}},
			events: []Event{delta("Hel"), delta("lo"), done(func(d *Done) { d.Usage, d.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14 })},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens, m.Cost = store.StatusComplete, "Hello", "stop", "dep", 10, 2, 14
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusComplete, "stop"
				r.Usage, r.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 100*ms, 100*ms, 200*ms, 100
			},
			calls: 1, causes: []error{nil},
		},
		{
			// No usage came: the record says so, and the estimate counts
			// the text that was sent.
			name: "done, usage estimated",
			setup: setup{router: &fakeRouter{script: []step{
				{after: 100 * ms, chunk: chat.Chunk{Text: "Hello"}}, {chunk: chat.Chunk{FinishReason: chat.FinishStop}},
			}}},
			events: []Event{delta("Hello"), done(func(d *Done) {
				d.Usage, d.Cost = chat.Usage{InputTokens: in, OutputTokens: 2, Estimated: true}, float64(in+4)
			})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment = store.StatusComplete, "Hello", "stop", "dep"
				m.InputTokens, m.OutputTokens, m.Estimated, m.Cost = in, 2, true, float64(in+4)
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusComplete, "stop"
				r.Usage, r.Cost, r.UsageMissing = chat.Usage{InputTokens: in, OutputTokens: 2, Estimated: true}, float64(in+4), true
				r.TTFT, r.TTFW, r.Total = 100*ms, 100*ms, 100*ms
			},
			calls: 1, causes: []error{nil},
		},
		{
			// The record names the route when the router tried more than
			// one deployment, and bills the attempt that failed apart.
			name:  "done after a fallback",
			setup: setup{router: &fakeRouter{script: append([]step{{after: 50 * ms, failover: &chat.Usage{InputTokens: 5}}}, answer...)}},
			events: []Event{delta("Hel"), delta("lo"), done(func(d *Done) {
				d.Usage, d.Cost, d.Attempts, d.Fallback, d.Route = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14, 2, true, "dep=error, dep=ok"
			})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens, m.Cost = store.StatusComplete, "Hello", "stop", "dep", 10, 2, 14
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusComplete, "stop"
				r.Usage, r.Cost, r.Spent = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14, []metering.Spent{{Deployment: "dep", Usage: chat.Usage{InputTokens: 5}, Cost: 5}}
				r.Attempts, r.Fallbacks, r.Route = 2, 1, "dep=error, dep=ok"
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 150*ms, 150*ms, 250*ms, 100
			},
			calls: 1, causes: []error{nil},
		},
		{
			// A cache hit costs nothing; the client still sees the
			// answer's usage.
			name:   "done from the cache",
			setup:  setup{router: &fakeRouter{script: answer, levers: func(rep *levers.Report) { rep.Cached, rep.BillShare = true, 0 }}},
			events: []Event{delta("Hel"), delta("lo"), done(func(d *Done) { d.Usage, d.Cached = chat.Usage{InputTokens: 10, OutputTokens: 2}, true })},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens = store.StatusComplete, "Hello", "stop", "dep", 10, 2
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason, r.Cached = "dep", "model", metering.StatusComplete, "stop", true
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 100*ms, 100*ms, 200*ms, 100
			},
			calls: 1, causes: []error{nil},
		},
		{
			// A stream shared by two requests, routed by a rule: each is
			// billed its half.
			name: "done, shared and routed by a rule",
			setup: setup{router: &fakeRouter{script: answer, levers: func(rep *levers.Report) {
				rep.Coalesced, rep.BillShare, rep.BillPart = true, 0.5, [2]int{0, 2}
				rep.Rule, rep.Requested, rep.Alias = "short", "chat", "chat-small"
			}}},
			events: []Event{delta("Hel"), delta("lo"), done(func(d *Done) {
				d.Usage, d.Cost, d.Coalesced, d.Rule = chat.Usage{InputTokens: 10, OutputTokens: 2}, 7, true, "short"
			})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens, m.Cost = store.StatusComplete, "Hello", "stop", "dep", 10, 2, 7
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusComplete, "stop"
				r.Usage, r.Cost, r.Coalesced, r.Rule, r.RoutedTo = chat.Usage{InputTokens: 5, OutputTokens: 1}, 7, true, "short", "chat-small"
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 100*ms, 100*ms, 200*ms, 100
			},
			calls: 1, causes: []error{nil},
		},
		{
			name: "error before the model",
			setup: setup{router: &fakeRouter{script: []step{
				{after: 50 * ms, err: &chat.Error{Category: chat.CategoryOverloaded, Message: "every deployment is busy", Retryable: true}},
			}}},
			events: []Event{failed(ErrorEvent{Code: "overloaded", Message: "every deployment is busy", Retryable: true, Status: store.StatusError, Usage: chat.Usage{InputTokens: in, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated, m.ErrorCode, m.ErrorMessage = store.StatusError, in, true, "overloaded", "every deployment is busy"
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.ErrorCode, r.Error = metering.StatusError, chat.Usage{}, "overloaded", "every deployment is busy"
				r.Total, r.Fallbacks = 50*ms, 1
			},
			calls: 1, causes: []error{nil},
		},
		{
			name: "error mid-stream",
			setup: setup{router: &fakeRouter{script: []step{
				{after: 100 * ms, chunk: chat.Chunk{Text: "Hel"}}, {after: 100 * ms, err: chat.ProtocolError(errors.New("bad frame"))},
			}}},
			events: []Event{delta("Hel"), failed(ErrorEvent{Code: "protocol", Message: "bad frame", Retryable: true, Status: store.StatusError, Usage: chat.Usage{InputTokens: in, OutputTokens: 1, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.Deployment, m.ErrorCode, m.ErrorMessage = store.StatusError, "Hel", "dep", "protocol", "bad frame"
				m.InputTokens, m.OutputTokens, m.Estimated, m.Cost = in, 1, true, float64(in+2)
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.ErrorCode, r.Error = "dep", "model", metering.StatusError, "protocol", "bad frame"
				r.Usage, r.Cost = chat.Usage{InputTokens: in, OutputTokens: 1, Estimated: true}, float64(in+2)
				r.TTFT, r.TTFW, r.Total = 100*ms, 100*ms, 200*ms
			},
			calls: 1, causes: []error{nil},
		},
		{
			name: "timeout error",
			setup: setup{router: &fakeRouter{script: []step{
				{after: 50 * ms, err: &chat.Error{Category: chat.CategoryTimeout, Message: "no first token within 50ms", Retryable: true, Err: chat.ErrFirstTokenTimeout}},
			}}},
			events: []Event{failed(ErrorEvent{Code: "timeout", Message: "no first token within 50ms", Retryable: true, Status: store.StatusTimeout, Usage: chat.Usage{InputTokens: in, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated, m.ErrorCode, m.ErrorMessage = store.StatusTimeout, in, true, "timeout", "no first token within 50ms"
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.ErrorCode, r.Error = metering.StatusTimeout, chat.Usage{}, "timeout", "no first token within 50ms"
				r.Total, r.Fallbacks = 50*ms, 1
			},
			calls: 1, causes: []error{nil},
		},
		{
			name:   "deadline before the first token",
			setup:  setup{router: &fakeRouter{script: []step{{hang: true}}}, timeout: time.Second},
			events: []Event{failed(ErrorEvent{Code: "timeout", Message: "no deployment answered before the request's deadline", Retryable: true, Status: store.StatusTimeout, Usage: chat.Usage{InputTokens: in, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated = store.StatusTimeout, in, true
				m.ErrorCode, m.ErrorMessage = "timeout", "no deployment answered before the request's deadline"
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.ErrorCode, r.Error = metering.StatusTimeout, chat.Usage{}, "timeout", "no deployment answered before the request's deadline"
				r.Total = time.Second
			},
			calls: 1, causes: []error{chat.ErrDeadline},
		},
		{
			// The deadline cuts an answer that has begun: it is done,
			// with what was sent.
			name:  "deadline cut after text",
			setup: setup{router: &fakeRouter{script: []step{{after: 100 * ms, chunk: chat.Chunk{Text: "Hel"}}, {hang: true}}}, timeout: time.Second},
			events: []Event{delta("Hel"), done(func(d *Done) {
				d.Status, d.FinishReason, d.Route = store.StatusTimeout, "timeout", "dep=deadline"
				d.Usage, d.Cost = chat.Usage{InputTokens: in, OutputTokens: 1, Estimated: true}, float64(in+2)
			})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment = store.StatusTimeout, "Hel", "timeout", "dep"
				m.InputTokens, m.OutputTokens, m.Estimated, m.Cost = in, 1, true, float64(in+2)
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusTimeout, "timeout"
				r.Usage, r.Cost = chat.Usage{InputTokens: in, OutputTokens: 1, Estimated: true}, float64(in+2)
				r.TTFT, r.TTFW, r.Total = 100*ms, 100*ms, time.Second
			},
			calls: 1, causes: []error{chat.ErrDeadline},
		},
		{
			// The client does not take the second delta: the message
			// keeps the first, and nothing more is sent.
			name: "client gone",
			setup: setup{router: &fakeRouter{script: []step{
				{after: 100 * ms, chunk: chat.Chunk{Text: "Hel"}}, {after: 100 * ms, chunk: chat.Chunk{Text: "lo"}}, {after: 100 * ms, chunk: chat.Chunk{Text: "!"}},
			}}, leaveAt: 2},
			events: []Event{delta("Hel"), delta("lo")},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.Deployment = store.StatusCancelled, "Hel", "dep"
				m.InputTokens, m.OutputTokens, m.Estimated, m.Cost = in, 1, true, float64(in+2)
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status = "dep", "model", metering.StatusCancelled
				r.Usage, r.Cost = chat.Usage{InputTokens: in, OutputTokens: 1, Estimated: true}, float64(in+2)
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 100*ms, 100*ms, 200*ms, 100
			},
			calls: 1, causes: []error{chat.ErrClientGone},
		},
		{
			// The request's ctx ends (the connection closed) before any
			// text: no event, the message cancelled.
			name:   "client gone before the first token",
			setup:  setup{router: &fakeRouter{script: answer}, cancelAfter: 50 * ms, cancelCause: context.Canceled},
			events: nil,
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated = store.StatusCancelled, in, true
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.Total = metering.StatusCancelled, chat.Usage{}, 50*ms
			},
			calls: 1, causes: []error{context.Canceled},
		},
		{
			name:  "shutdown",
			setup: setup{router: &fakeRouter{script: answer}, cancelAfter: 150 * ms, cancelCause: chat.ErrShutdown},
			events: []Event{delta("Hel"), failed(ErrorEvent{
				Code: "server_shutting_down", Message: "the server is shutting down; the answer so far is saved, send the message again to continue",
				Retryable: true, Status: store.StatusInterrupted, Usage: chat.Usage{InputTokens: in, OutputTokens: 1, Estimated: true},
			})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.Deployment = store.StatusInterrupted, "Hel", "dep"
				m.InputTokens, m.OutputTokens, m.Estimated, m.Cost = in, 1, true, float64(in+2)
				m.ErrorCode, m.ErrorMessage = "server_shutting_down", "the server is shutting down; the answer so far is saved, send the message again to continue"
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status = "dep", "model", metering.StatusInterrupted
				r.ErrorCode, r.Error = "server_shutting_down", "the server is shutting down; the answer so far is saved, send the message again to continue"
				r.Usage, r.Cost = chat.Usage{InputTokens: in, OutputTokens: 1, Estimated: true}, float64(in+2)
				r.TTFT, r.TTFW, r.Total = 100*ms, 100*ms, 150*ms
			},
			calls: 1, causes: []error{chat.ErrShutdown},
		},
		{
			// The answer finished but could not be saved: the client is
			// told, rather than promised an answer that is lost.
			name:   "the answer cannot be saved",
			setup:  setup{router: &fakeRouter{script: answer}, store: &fakeStore{convs: map[string]store.Conversation{}, errFinish: errors.New("disk full")}},
			events: []Event{delta("Hel"), delta("lo"), failed(ErrorEvent{Code: "store_unavailable", Message: "the answer could not be saved", Status: store.StatusError, Usage: chat.Usage{InputTokens: 10, OutputTokens: 2}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens, m.Cost = store.StatusComplete, "Hello", "stop", "dep", 10, 2, 14
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason, r.Error = "dep", "model", metering.StatusError, "stop", "the answer could not be saved"
				r.Usage, r.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 100*ms, 100*ms, 200*ms, 100
			},
			calls: 1, causes: []error{nil},
		},
		{
			// The client leaves while the parallel guard checks: the
			// guard's failure is not a block, the turn is cancelled.
			name:   "client gone while the guard checks",
			setup:  setup{router: &fakeRouter{script: answer}, guard: &fakeGuard{after: time.Second}, remote: true, cancelAfter: 50 * ms, cancelCause: context.Canceled},
			events: nil,
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated = store.StatusCancelled, in, true
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.Total = metering.StatusCancelled, chat.Usage{}, 50*ms
			},
			calls: 1, causes: []error{context.Canceled},
		},
		{
			// Guard before the model, without a remote guard: nothing
			// to wait for.
			name:   "guard before the model, none configured",
			setup:  setup{router: &fakeRouter{script: answer}, guardBefore: true},
			events: []Event{delta("Hel"), delta("lo"), done(func(d *Done) { d.Usage, d.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14 })},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens, m.Cost = store.StatusComplete, "Hello", "stop", "dep", 10, 2, 14
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusComplete, "stop"
				r.Usage, r.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 100*ms, 100*ms, 200*ms, 100
			},
			calls: 1, causes: []error{nil},
		},
		{
			name:   "blocked by the local guard",
			setup:  setup{router: &fakeRouter{script: answer}, guard: &fakeGuard{local: blocked}},
			events: []Event{blockedEvent},
			saved:  blockedSaved,
			record: blockedRecord(0, 0),
		},
		{
			name:   "blocked by the remote guard before the model",
			setup:  setup{router: &fakeRouter{script: answer}, guard: &fakeGuard{remote: blocked, after: 30 * ms}, remote: true, guardBefore: true},
			events: []Event{blockedEvent},
			saved:  blockedSaved,
			record: blockedRecord(30*ms, 0),
		},
		{
			// The guard is not reachable: in doubt, the message is not
			// sent on.
			name:  "guard unavailable",
			setup: setup{router: &fakeRouter{script: answer}, guard: &fakeGuard{err: errors.New("connection refused"), after: 30 * ms}, remote: true, guardBefore: true},
			events: []Event{failed(ErrorEvent{Code: "guardrail_blocked", Message: "The message could not be checked: connection refused", Status: store.StatusError,
				Usage: chat.Usage{InputTokens: in, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated = store.StatusError, in, true
				m.ErrorCode, m.ErrorMessage = "guardrail_blocked", "The message could not be checked: connection refused"
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.Total, r.Attempts = metering.StatusError, chat.Usage{}, 30*ms, 0
				r.ErrorCode, r.Error = "guardrail_blocked", "The message could not be checked: connection refused"
			},
		},
		{
			// The block cancels the context sources still running.
			name:   "blocked by the remote guard while the context is gathered",
			setup:  setup{router: &fakeRouter{script: answer}, guard: &fakeGuard{remote: blocked, after: 30 * ms}, remote: true, sources: []Source{slowDocs(false, time.Second)}},
			events: []Event{blockedEvent},
			saved:  blockedSaved,
			record: blockedRecord(30*ms, 0),
		},
		{
			// Parallel mode: the model's first text waits for the
			// guard's verdict, then flows.
			name:  "parallel guard passes: the text waits for it",
			setup: setup{router: &fakeRouter{script: answer}, guard: &fakeGuard{after: 150 * ms}, remote: true},
			events: []Event{delta("Hel"), delta("lo"), done(func(d *Done) {
				d.Usage, d.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
			})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens, m.Cost = store.StatusComplete, "Hello", "stop", "dep", 10, 2, 14
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusComplete, "stop"
				r.Usage, r.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
				// The stream is timed from the model's first text,
				// held back or not.
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 100*ms, 150*ms, 250*ms, 150
			},
			calls: 1, causes: []error{nil},
		},
		{
			// Parallel mode: the guard blocks while the model's first
			// text is held back; none of it reaches the client, and the
			// refusal is sent before the model's stream is closed.
			name:   "parallel guard blocks the held text",
			setup:  setup{router: &fakeRouter{script: answer}, guard: &fakeGuard{remote: blocked, after: 150 * ms}, remote: true},
			events: []Event{blockedEvent},
			saved: saved(func(m *store.Message) {
				m.Status, m.Deployment, m.InputTokens, m.Estimated, m.Cost = store.StatusError, "dep", in, true, float64(in)
				m.ErrorCode, m.ErrorMessage = "guardrail_blocked", blockReason
			}),
			record: func(r *metering.Record) {
				blockedRecord(150*ms, 1)(r)
				r.Deployment, r.Model, r.TTFT = "dep", "model", 100*ms
				r.Usage, r.Cost = chat.Usage{InputTokens: in, Estimated: true}, float64(in)
			},
			calls: 1, causes: []error{errBlocked},
		},
		{
			// Parallel mode: the guard blocks before the model's first
			// text, cancelling the model.
			name:   "parallel guard blocks before the text",
			setup:  setup{router: &fakeRouter{script: answer}, guard: &fakeGuard{remote: blocked, after: 50 * ms}, remote: true},
			events: []Event{blockedEvent},
			saved:  blockedSaved,
			record: blockedRecord(50*ms, 1),
			calls:  1, causes: []error{errBlocked},
		},
		{
			// Parallel mode: the model finished without text before the
			// verdict came; the verdict still decides.
			name: "parallel guard blocks after a silent answer",
			setup: setup{router: &fakeRouter{script: []step{
				{after: 100 * ms, chunk: chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 10}}},
			}}, guard: &fakeGuard{remote: blocked, after: 150 * ms}, remote: true},
			events: []Event{failed(ErrorEvent{Code: "guardrail_blocked", Message: blockReason, Status: store.StatusError, Usage: chat.Usage{InputTokens: 10}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.FinishReason, m.InputTokens = store.StatusError, "stop", 10
				m.ErrorCode, m.ErrorMessage = "guardrail_blocked", blockReason
			}),
			record: func(r *metering.Record) {
				blockedRecord(150*ms, 1)(r)
				r.Usage, r.FinishReason = chat.Usage{}, "stop"
			},
			calls: 1, causes: []error{nil},
		},
		{
			name:  "required context source fails",
			setup: setup{router: &fakeRouter{script: answer}, sources: []Source{brokenDocs(false)}},
			events: []Event{failed(ErrorEvent{Code: "context_unavailable", Message: "docs: index offline", Retryable: true, Status: store.StatusError,
				Usage: chat.Usage{InputTokens: in, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated, m.ErrorCode, m.ErrorMessage = store.StatusError, in, true, "context_unavailable", "docs: index offline"
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.ErrorCode, r.Error, r.Total, r.Attempts = metering.StatusError, chat.Usage{}, "context_unavailable", "docs: index offline", 40*ms, 0
			},
		},
		{
			// The guard's verdict is waited for (its stage belongs to
			// the turn), but the source's failure is what is reported.
			name:  "required context source fails, guard pending",
			setup: setup{router: &fakeRouter{script: answer}, sources: []Source{brokenDocs(false)}, guard: &fakeGuard{after: 60 * ms}, remote: true},
			events: []Event{failed(ErrorEvent{Code: "context_unavailable", Message: "docs: index offline", Retryable: true, Status: store.StatusError,
				Usage: chat.Usage{InputTokens: in, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated, m.ErrorCode, m.ErrorMessage = store.StatusError, in, true, "context_unavailable", "docs: index offline"
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.ErrorCode, r.Error, r.Total, r.Attempts = metering.StatusError, chat.Usage{}, "context_unavailable", "docs: index offline", 60*ms, 0
			},
		},
		{
			name:  "required context source times out",
			setup: setup{router: &fakeRouter{script: answer}, sources: []Source{slowDocs(false, 50*ms)}},
			events: []Event{failed(ErrorEvent{Code: "context_unavailable", Message: "docs: context deadline exceeded", Retryable: true, Status: store.StatusError,
				Usage: chat.Usage{InputTokens: in, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated, m.ErrorCode, m.ErrorMessage = store.StatusError, in, true, "context_unavailable", "docs: context deadline exceeded"
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.ErrorCode, r.Error, r.Total, r.Attempts = metering.StatusError, chat.Usage{}, "context_unavailable", "docs: context deadline exceeded", 50*ms, 0
			},
		},
		{
			name:  "optional context source fails",
			setup: setup{router: &fakeRouter{script: answer}, sources: []Source{brokenDocs(true)}},
			events: []Event{delta("Hel"), delta("lo"), done(func(d *Done) {
				d.Usage, d.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
				d.Sources = []SourceReport{{Name: "docs", Status: "failed", Ms: 40, Optional: true, Error: "index offline"}}
			})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens, m.Cost = store.StatusComplete, "Hello", "stop", "dep", 10, 2, 14
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusComplete, "stop"
				r.Usage, r.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 140*ms, 140*ms, 240*ms, 100
				r.CallStart = 40 * ms // the model is called once the failed source is given up
			},
			calls: 1, causes: []error{nil},
		},
		{
			name:  "optional context source times out",
			setup: setup{router: &fakeRouter{script: answer}, sources: []Source{slowDocs(true, 50*ms)}},
			events: []Event{delta("Hel"), delta("lo"), done(func(d *Done) {
				d.Usage, d.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
				d.Sources = []SourceReport{{Name: "docs", Status: "timeout", Ms: 50, Optional: true, Error: "context deadline exceeded"}}
			})},
			saved: saved(func(m *store.Message) {
				m.Status, m.Content, m.FinishReason, m.Deployment, m.InputTokens, m.OutputTokens, m.Cost = store.StatusComplete, "Hello", "stop", "dep", 10, 2, 14
			}),
			record: func(r *metering.Record) {
				r.Deployment, r.Model, r.Status, r.FinishReason = "dep", "model", metering.StatusComplete, "stop"
				r.Usage, r.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
				r.TTFT, r.TTFW, r.Total, r.StreamMs = 150*ms, 150*ms, 250*ms, 100
				r.CallStart = 50 * ms // the model is called once the source times out
			},
			calls: 1, causes: []error{nil},
		},
		{
			// The history is required: without it the answer would not
			// follow the conversation.
			name:  "history fails",
			setup: setup{router: &fakeRouter{script: answer}, existing: true, store: &fakeStore{convs: map[string]store.Conversation{}, errLast: errors.New("database is locked")}},
			events: []Event{failed(ErrorEvent{Code: "context_unavailable", Message: "history: database is locked", Retryable: true, Status: store.StatusError,
				Usage: chat.Usage{InputTokens: in, Estimated: true}})},
			saved: saved(func(m *store.Message) {
				m.Status, m.InputTokens, m.Estimated, m.ErrorCode, m.ErrorMessage = store.StatusError, in, true, "context_unavailable", "history: database is locked"
			}),
			record: func(r *metering.Record) {
				r.Status, r.Usage, r.ErrorCode, r.Error, r.Attempts = metering.StatusError, chat.Usage{}, "context_unavailable", "history: database is locked", 0
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := play(t, tt.setup)
				if diff := cmp.Diff(tt.events, p.events, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if len(p.saved) != 1 {
					t.Fatalf("the answer was saved %d times, want once", len(p.saved))
				}
				if diff := cmp.Diff(tt.saved, p.saved[0], ignoreIdentity); diff != "" {
					t.Errorf("saved message (-want +got):\n%s", diff)
				}
				if len(p.records) != 1 {
					t.Fatalf("%d metering records, want 1", len(p.records))
				}
				want := record(p.start, tt.record)
				if diff := cmp.Diff(want, p.records[0], cmpopts.IgnoreFields(metering.Record{}, "Timings", "Gaps")); diff != "" {
					t.Errorf("metering record (-want +got):\n%s", diff)
				}
				if len(p.reqs) != tt.calls {
					t.Errorf("router sent %d requests, want %d", len(p.reqs), tt.calls)
				}
				if diff := cmp.Diff(tt.causes, p.causes, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("the router's streams ended with causes (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestRunContext checks what a later turn with a context source sends the
// model (the system prompt, the history before this turn, the source's
// text, the message), what the source is asked, and what the done event
// and the stored message's meta report: the sources, the citations and
// the local guard's flags.
func TestRunContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked []Query
		docs := Source{Name: "docs", Timeout: time.Second, Fetch: func(ctx context.Context, q Query) (string, []Citation, error) {
			asked = append(asked, q)
			time.Sleep(20 * time.Millisecond)
			return "[1] returns.md: 30 days.", []Citation{{N: 1, Doc: "returns.md", Passage: 2}}, nil
		}}
		st := newFakeStore()
		p := play(t, setup{
			router: &fakeRouter{script: answer}, store: st, existing: true, system: "Be kind.", sources: []Source{docs},
			guard: &fakeGuard{local: Verdict{Flags: []string{"pii:redact"}}},
		})
		if diff := cmp.Diff([]Query{{TenantID: "t1", UserID: "u1", ConversationID: "conv_1", Question: "Hi"}}, asked); diff != "" {
			t.Errorf("the source was asked (-want +got):\n%s", diff)
		}
		if len(p.reqs) != 1 {
			t.Fatalf("%d requests to the router, want 1", len(p.reqs))
		}
		want := []chat.Message{
			{Role: chat.RoleSystem, Content: "Be kind.", CacheBreakpoint: true},
			{Role: chat.RoleUser, Content: "Earlier question"},
			{Role: chat.RoleAssistant, Content: "Earlier answer", CacheBreakpoint: true},
			{Role: chat.RoleUser, Content: "Context for this question:\n\n[1] returns.md: 30 days."},
			{Role: chat.RoleUser, Content: "Hi"},
		}
		if diff := cmp.Diff(want, p.reqs[0].Messages); diff != "" {
			t.Errorf("the prompt (-want +got):\n%s", diff)
		}
		sources := []SourceReport{{Name: "history", Status: "ok"}, {Name: "docs", Status: "ok", Ms: 20}}
		citations := []Citation{{N: 1, Doc: "returns.md", Passage: 2}}
		wantDone := done(func(d *Done) {
			d.Usage, d.Cost = chat.Usage{InputTokens: 10, OutputTokens: 2}, 14
			d.Sources, d.Citations, d.Flags = sources, citations, []string{"pii:redact"}
		})
		if diff := cmp.Diff([]Event{delta("Hel"), delta("lo"), wantDone}, p.events); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		var meta struct {
			Attempts   int            `json:"attempts"`
			Route      string         `json:"route"`
			Sources    []SourceReport `json:"sources"`
			Cached     bool           `json:"cached"`
			Fallback   bool           `json:"fallback"`
			Citations  []Citation     `json:"citations"`
			GuardFlags []string       `json:"guard_flags"`
		}
		if err := json.Unmarshal(p.saved[0].Meta, &meta); err != nil {
			t.Fatalf("stored meta %s: %v", p.saved[0].Meta, err)
		}
		wantMeta := meta
		wantMeta.Attempts, wantMeta.Route, wantMeta.Sources, wantMeta.Cached, wantMeta.Fallback = 1, "dep=ok", sources, false, false
		wantMeta.Citations, wantMeta.GuardFlags = citations, []string{"pii:redact"}
		if diff := cmp.Diff(wantMeta, meta); diff != "" {
			t.Errorf("stored meta (-want +got):\n%s", diff)
		}
	})
}

// TestHistoryWithin: the history in the prompt is the newest messages
// that fit in HistoryTokens; an empty (failed) answer is left out.
func TestHistoryWithin(t *testing.T) {
	msg := func(seq int, content string) store.Message { return store.Message{Seq: seq, Content: content} }
	ten := strings.Repeat("abcd", 10) // 10 tokens, 14 with the framing
	msgs := []store.Message{msg(1, ten), msg(2, ten), msg(3, ""), msg(4, ten), msg(5, "Hi"), msg(6, "")}
	tests := []struct {
		name   string
		until  int
		budget int
		want   []int // seqs
	}{
		{name: "all that fit", until: 5, budget: 1000, want: []int{1, 2, 4}},
		{name: "newest first", until: 5, budget: 30, want: []int{2, 4}},
		{name: "stops at the first that does not fit", until: 5, budget: 13, want: nil},
		{name: "this turn's messages left out", until: 2, budget: 1000, want: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, m := range historyWithin(msgs, tt.until, tt.budget) {
				got = append(got, m.Seq)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("historyWithin(until %d, budget %d) (-want +got):\n%s", tt.until, tt.budget, diff)
			}
		})
	}
}

// TestRunTimings checks the stages a turn records, in the done event (by
// start, then as recorded): the local guard and the store before Run; the
// guard in parallel with the context; the prompt; the routing and the
// attempt; the save.
func TestRunTimings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		docs := Source{Name: "docs", Timeout: time.Second, Fetch: func(ctx context.Context, q Query) (string, []Citation, error) {
			time.Sleep(20 * time.Millisecond)
			return "returns.md", nil, nil
		}}
		p := play(t, setup{router: &fakeRouter{script: answer}, sources: []Source{docs}, guard: &fakeGuard{after: 30 * time.Millisecond, remote: Verdict{Flags: []string{"x"}}}, remote: true})
		want := budget.Timings{TTFWMs: 120, TTCMs: 220, Stages: []budget.StageTiming{
			{Name: "guard.local"},
			{Name: "store.prepare"},
			{Name: "docs", EndMs: 20},
			{Name: "context", Group: true, EndMs: 20},
			{Name: "guard", EndMs: 30, Note: "flagged"},
			{Name: "prompt", StartMs: 20, EndMs: 20},
			{Name: "route", StartMs: 20, EndMs: 20},
			{Name: "upstream dep", StartMs: 20, EndMs: 220, Note: "ok", Group: true},
			{Name: "ttft", StartMs: 20, EndMs: 120, Note: "dep"},
			{Name: "generation", StartMs: 120, EndMs: 220, Note: "dep"},
			{Name: "persist", StartMs: 220, EndMs: 220},
		}}
		if diff := cmp.Diff(want, p.timings); diff != "" {
			t.Errorf("timings (-want +got):\n%s", diff)
		}
	})
}

// TestRunCheckpoints: a slow answer is saved while it streams, with the
// text the client has been sent.
func TestRunCheckpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := play(t, setup{router: &fakeRouter{script: []step{
			{after: 100 * time.Millisecond, chunk: chat.Chunk{Text: "Hel"}},
			{after: time.Second, chunk: chat.Chunk{Text: "lo"}},
			{chunk: chat.Chunk{FinishReason: chat.FinishStop}},
		}}})
		var got []checkpoint
		for _, cp := range p.cps {
			got = append(got, checkpoint{ID: cp.ID, Content: cp.Content, Tokens: cp.Tokens})
			if d := cp.At.Sub(p.start); d != 500*time.Millisecond {
				t.Errorf("checkpoint at %v, want 500ms", d)
			}
		}
		if diff := cmp.Diff([]checkpoint{{ID: p.meta.MessageID, Content: "Hel", Tokens: 1}}, got); diff != "" {
			t.Errorf("checkpoints (-want +got):\n%s", diff)
		}
		if len(p.saved) != 1 || p.saved[0].Content != "Hello" {
			t.Errorf("saved %+v, want Hello", p.saved)
		}
	})
}

// TestRunLogs: an internal failure and a failed save are logged for the
// operators; the client gets a safe message.
func TestRunLogs(t *testing.T) {
	tests := []struct {
		name  string
		setup setup
		want  string
	}{
		{
			name:  "internal error",
			setup: setup{router: &fakeRouter{script: []step{{err: errors.New("nil map")}}}},
			want:  `level=ERROR msg="chat turn failed" request_id=req_1 err="nil map"`,
		},
		{
			name:  "failed save",
			setup: setup{router: &fakeRouter{script: answer}, store: &fakeStore{convs: map[string]store.Conversation{}, errFinish: errors.New("disk full")}},
			want:  `level=ERROR msg="saving the answer" request_id=req_1 message_id=MSG err="disk full"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf strings.Builder
				tt.setup.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				}}))
				p := play(t, tt.setup)
				want := strings.ReplaceAll(tt.want, "MSG", p.meta.MessageID) + "\n"
				if got := buf.String(); got != want {
					t.Errorf("log:\n%s\nwant:\n%s", got, want)
				}
			})
		})
	}
}
