package call

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
)

// routes is a fake of the levers: every alias but "nope" is served, with
// its timeout in timeouts (a minute if not listed); a request is routed
// to rule's alias when rule is set; its stream is script, each chunk
// after its wait, filling the report as the router does.
type routes struct {
	timeouts map[string]time.Duration
	why      error  // why "nope" is not served (router.ErrUnknownModel if nil)
	rule     string // the alias a routing rule sends every request to
	script   []tick

	deadlines []time.Time // of each stream's ctx
	causes    []error     // context.Cause of each stream's ctx as it ended
}

type tick struct {
	after time.Duration
	chunk chat.Chunk
	err   error
}

func (r *routes) Timeout(alias string) (time.Duration, error) {
	if alias == "nope" {
		if r.why != nil {
			return 0, r.why
		}
		return 0, router.ErrUnknownModel
	}
	if d, ok := r.timeouts[alias]; ok {
		return d, nil
	}
	return time.Minute, nil
}

func (r *routes) Plan(req *chat.Request, rep *levers.Report) levers.Planned {
	alias := req.Model
	if r.rule != "" {
		alias, rep.Rule, rep.Requested = r.rule, "short", req.Model
	}
	return plan{r: r, alias: alias, rep: rep}
}

type plan struct {
	r     *routes
	alias string
	rep   *levers.Report
}

func (p plan) Alias() string { return p.alias }

func (p plan) Stream(ctx context.Context) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		d, _ := ctx.Deadline()
		p.r.deadlines = append(p.r.deadlines, d)
		defer func() { p.r.causes = append(p.r.causes, context.Cause(ctx)) }()
		rep := p.rep
		rep.Alias, rep.BillShare = p.alias, 1
		rep.Attempts = append(rep.Attempts, router.Attempt{Deployment: "dep", Start: time.Now()})
		defer func() { rep.Attempts[0].End, rep.Attempts[0].Outcome = time.Now(), router.OutcomeOK }()
		for _, tk := range p.r.script {
			select {
			case <-ctx.Done():
				yield(chat.Chunk{}, context.Cause(ctx))
				return
			case <-time.After(tk.after):
			}
			if tk.err != nil {
				yield(chat.Chunk{}, tk.err)
				return
			}
			if tk.chunk.Visible() && rep.FirstToken.IsZero() {
				rep.FirstToken, rep.Attempts[0].FirstToken, rep.Deployment = time.Now(), time.Now(), "dep"
			}
			if !yield(tk.chunk, nil) {
				return
			}
		}
	}
}

// hello is an answer in two deltas, 100 ms apart, naming its model, with
// its usage.
var hello = []tick{
	{after: 100 * time.Millisecond, chunk: chat.Chunk{Model: "gpt-x"}},
	{chunk: chat.Chunk{Model: "gpt-x", Text: "Hel"}},
	{after: 100 * time.Millisecond, chunk: chat.Chunk{Model: "gpt-x", Text: "lo"}},
	{chunk: chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 10, OutputTokens: 2}}},
}

// records keeps the metering records.
type records []*metering.Record

func (m *records) Record(_ context.Context, r *metering.Record) { *m = append(*m, r) }

func request(rec *budget.Recorder) metering.Request {
	return metering.Request{ID: "req_1", Surface: "openai", Tenant: "t1", User: "u1", Alias: "chat", Stream: true, Timings: rec}
}

func ask(alias string) *chat.Request {
	return &chat.Request{Model: alias, Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}}
}

var errPassthroughOff = errors.New("models_passthrough is off")

// TestResolve: the alias is resolved once, into the call's deadline (the
// alias's timeout from the request's arrival, or the client's tighter
// one) or the reason it is not served.
func TestResolve(t *testing.T) {
	arrival := time.Unix(1e9, 0)
	for _, tt := range []struct {
		name   string
		alias  string
		client time.Duration
		why    error
		want   time.Duration // after arrival
		err    []error
	}{
		{name: "the alias's timeout", alias: "chat", want: 20 * time.Second},
		{name: "the client's tighter timeout", alias: "chat", client: 3 * time.Second, want: 3 * time.Second},
		{name: "a looser client timeout is the alias's", alias: "chat", client: time.Hour, want: 20 * time.Second},
		{name: "an unknown alias", alias: "nope", err: []error{router.ErrUnknownModel}},
		{name: "the router says why", alias: "nope", why: errPassthroughOff, err: []error{errPassthroughOff}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := New(Options{Routes: &routes{timeouts: map[string]time.Duration{"chat": 20 * time.Second}, why: tt.why}})
			q := request(budget.New(arrival))
			q.Alias = tt.alias
			c, err := cs.Resolve(q, tt.client)
			for _, want := range tt.err {
				if !errors.Is(err, want) || c != nil {
					t.Errorf("Resolve = %v, %v; want nil, %v", c, err, want)
				}
			}
			if tt.err == nil && (err != nil || c.deadline.Sub(arrival) != tt.want) {
				t.Errorf("Resolve = %v; deadline arrival+%v, want arrival+%v", err, c.deadline.Sub(arrival), tt.want)
			}
		})
	}
}

// TestContext: the call's context ends at its deadline with cause
// chat.ErrDeadline, and Cancel ends it with the cause given.
func TestContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := New(Options{Routes: &routes{timeouts: map[string]time.Duration{"chat": 2 * time.Second}}})
		start := time.Now()
		c, err := cs.Resolve(request(budget.New(start)), 0)
		if err != nil {
			t.Fatal(err)
		}
		ctx, release := c.Context(t.Context())
		defer release(nil)
		<-ctx.Done()
		if got := time.Since(start); got != 2*time.Second || !errors.Is(context.Cause(ctx), chat.ErrDeadline) {
			t.Errorf("ended after %v with cause %v; want 2s, chat.ErrDeadline", got, context.Cause(ctx))
		}

		c, _ = cs.Resolve(request(budget.New(time.Now())), 0)
		c.Cancel(chat.ErrClientGone) // before Context: a no-op
		ctx, release = c.Context(t.Context())
		defer release(nil)
		c.Cancel(chat.ErrClientGone)
		if !errors.Is(context.Cause(ctx), chat.ErrClientGone) {
			t.Errorf("cause after Cancel %v, want chat.ErrClientGone", context.Cause(ctx))
		}
	})
}

// TestStream: what the surface is yielded is what the routes streamed;
// the call tallies what the surface delivers, names the model once, when
// the first chunk that carries it is delivered, records the router's
// stages once when the call ends, and stamps the first word when the
// surface shows visible text.
func TestStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		rec := budget.New(start)
		c, _ := New(Options{Routes: &routes{script: hello}}).Resolve(request(rec), 0)
		ctx, release := c.Context(t.Context())
		defer release(nil)
		var named []string
		var got []chat.Chunk
		text := false
		for ch, err := range c.Stream(ctx, ask("chat")) {
			if err != nil {
				t.Fatal(err)
			}
			if c.Deliver(&ch) {
				named = append(named, c.Model())
			}
			if len(named) != 1 {
				t.Errorf("chunk %d yielded with the model named %d times, want once before it", len(got), len(named))
			}
			got = append(got, ch)
			c.Shown()
			text = text || ch.Text != ""
			if !text && rec.TTFW() != 0 {
				t.Errorf("first word stamped at %v before any text was shown", rec.TTFW())
			}
		}
		if len(got) != len(hello) || c.Model() != "gpt-x" || !slices.Equal(named, []string{"gpt-x"}) {
			t.Errorf("%d chunks, model %q, named %v; want %d, gpt-x, once", len(got), c.Model(), named, len(hello))
		}
		if tl := c.Tally(); tl.Finish != chat.FinishStop || tl.Reported == nil || !tl.Visible || tl.Last.Sub(tl.First) != 100*time.Millisecond {
			t.Errorf("tally %+v; want finished, reported, visible text over 100ms", tl)
		}
		if rec.TTFW() != 100*time.Millisecond {
			t.Errorf("first word at %v, want 100ms (the first text shown)", rec.TTFW())
		}
		if len(rec.Stages()) != 0 {
			t.Errorf("stages %v before the route ended", rec.Stages())
		}
		c.End(ctx, nil, false) // ends the route
		c.EndRoute()           // again: a no-op
		var stages []string
		for _, s := range rec.Stages() {
			stages = append(stages, s.Name)
		}
		if diff := cmp.Diff([]string{"route", "upstream dep", "ttft", "generation"}, stages); diff != "" {
			t.Errorf("stages (-want +got):\n%s", diff)
		}
		if c.RouteStart() != start {
			t.Errorf("routed at %v, want at the start", c.RouteStart().Sub(start))
		}
	})
}

// TestStreamBreak: a surface that stops reading ends the routes' stream
// at once, without an error cause; the stages are still recorded.
func TestStreamBreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := budget.New(time.Now())
		r := &routes{script: hello}
		c, _ := New(Options{Routes: r}).Resolve(request(rec), 0)
		ctx, release := c.Context(t.Context())
		defer release(nil)
		for ch := range c.Stream(ctx, ask("chat")) {
			c.Deliver(&ch)
			if ch.Text != "" {
				break
			}
		}
		c.EndRoute()
		if c.Tally().Finish != "" || len(rec.Stages()) == 0 || r.causes[0] != nil {
			t.Errorf("tally %+v, %d stages; want no finish, the stages recorded", c.Tally(), len(rec.Stages()))
		}
	})
}

// TestRuleTimeout: a routing rule's alias ends the call at its own timeout
// from the moment it is routed when that is earlier than the call's
// deadline, and never later.
func TestRuleTimeout(t *testing.T) {
	for _, tt := range []struct {
		name string
		rule time.Duration
		want time.Duration
	}{
		{name: "shorter", rule: 5 * time.Second, want: 5 * time.Second},
		{name: "longer", rule: time.Hour, want: 20 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				r := &routes{timeouts: map[string]time.Duration{"chat": 20 * time.Second, "fast": tt.rule}, rule: "fast", script: hello}
				c, _ := New(Options{Routes: r}).Resolve(request(budget.New(start)), 0)
				ctx, release := c.Context(t.Context())
				defer release(nil)
				if _, err := chat.Collect(c.Stream(ctx, ask("chat"))); err != nil {
					t.Fatal(err)
				}
				if len(r.deadlines) != 1 || r.deadlines[0].Sub(start) != tt.want {
					t.Errorf("routed with deadlines %v, want start+%v", r.deadlines, tt.want)
				}
				if c.Report().Rule != "short" {
					t.Errorf("report %+v, want the rule", c.Report())
				}
			})
		})
	}
}

// TestEnd checks how a call's ending is classified from its error, the
// client's leaving and the cause that ended its context; the first match
// wins.
func TestEnd(t *testing.T) {
	ended := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	live := context.Background()
	overloaded := &chat.Error{Category: chat.CategoryOverloaded, Message: "busy"}
	tests := []struct {
		name   string
		ctx    context.Context
		err    error
		gone   bool
		finish chat.FinishReason
		want   Outcome
		status metering.Status
	}{
		{name: "finished", ctx: live, finish: chat.FinishStop, want: Complete, status: metering.StatusComplete},
		{name: "finished as the client left", ctx: ended(context.Canceled), finish: chat.FinishStop, want: Complete, status: metering.StatusComplete},
		{name: "finished, then the server's shutdown", ctx: ended(chat.ErrShutdown), finish: chat.FinishStop, want: Complete, status: metering.StatusComplete},
		{name: "cut at the deadline", ctx: ended(chat.ErrDeadline), finish: chat.FinishTimeout, want: Cut, status: metering.StatusTimeout},
		{name: "failed", ctx: live, err: overloaded, want: Failed, status: metering.StatusError},
		{name: "blocked", ctx: live, err: &chat.Error{Category: chat.CategoryBlocked}, want: Failed, status: metering.StatusError},
		{name: "first-token timeout", ctx: live, err: &chat.Error{Category: chat.CategoryTimeout, Err: chat.ErrFirstTokenTimeout}, want: TimedOut, status: metering.StatusTimeout},
		{name: "deadline before the first text", ctx: ended(chat.ErrDeadline), err: chat.ErrDeadline, want: TimedOut, status: metering.StatusTimeout},
		{name: "deadline inside another error", ctx: live, err: &chat.Error{Category: chat.CategoryProtocol, Err: chat.ErrDeadline}, want: TimedOut, status: metering.StatusTimeout},
		{name: "the client refused an event", ctx: live, gone: true, want: Gone, status: metering.StatusCancelled},
		{name: "the client closed the request", ctx: ended(context.Canceled), err: context.Canceled, want: Gone, status: metering.StatusCancelled},
		{name: "a write to the client failed", ctx: ended(chat.ErrClientGone), err: errors.New("broken pipe"), want: Gone, status: metering.StatusCancelled},
		{name: "the user stopped the answer", ctx: ended(chat.ErrStopped), err: chat.ErrStopped, want: Gone, status: metering.StatusCancelled},
		{name: "the client left, said by the error alone", ctx: live, err: chat.ErrClientGone, want: Gone, status: metering.StatusCancelled},
		{name: "shutdown", ctx: ended(chat.ErrShutdown), err: chat.ErrShutdown, want: Shutdown, status: metering.StatusInterrupted},
		{name: "shutdown, said by the cause alone", ctx: ended(chat.ErrShutdown), err: context.Canceled, want: Shutdown, status: metering.StatusInterrupted},
		{name: "shutdown after the client left", ctx: ended(chat.ErrShutdown), gone: true, want: Gone, status: metering.StatusCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Call{}
			c.tally.Finish = tt.finish
			e := c.End(tt.ctx, tt.err, tt.gone)
			if e.Outcome != tt.want || e.Status != tt.status {
				t.Errorf("End = %v, %q; want %v, %q", e.Outcome, e.Status, tt.want, tt.status)
			}
			if fail := e.Outcome == Failed || e.Outcome == TimedOut; fail != (e.Err != nil && e.Outcome != Cut) || fail && e.ErrorCode != string(e.Err.Category) {
				t.Errorf("End = %+v: a failure carries its error and its code, nothing else does", e)
			}
			// A cut answer is metered as before (status timeout, no error
			// code); the surfaces end it with the timeout error it carries.
			if e.Outcome == Cut && (e.Err == nil || e.Err.Category != chat.CategoryTimeout || !errors.Is(e.Err, chat.ErrDeadline) || e.ErrorCode != "") {
				t.Errorf("End = %+v: a cut carries the deadline's timeout error, and no error code", e)
			}
		})
	}
	var names []string
	for o := Complete; o <= Shutdown; o++ {
		names = append(names, o.String())
	}
	if diff := cmp.Diff([]string{"complete", "cut", "failed", "timed out", "gone", "shutdown"}, names); diff != "" {
		t.Errorf("outcome names (-want +got):\n%s", diff)
	}
}

// TestMeter: the record is built from the request, the report, the tally
// and the ending given, priced, with the timings completed.
func TestMeter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		rec := budget.New(start)
		var m records
		prices := metering.Prices{"dep": {Input: 1e6, Output: 2e6}}
		c, _ := New(Options{Routes: &routes{script: hello}, Prices: prices, Meter: &m}).Resolve(request(rec), 0)
		ctx, release := c.Context(t.Context())
		defer release(nil)
		req := ask("chat")
		for ch := range c.Stream(ctx, req) {
			c.Deliver(&ch)
			c.Shown()
		}
		time.Sleep(50 * time.Millisecond)
		u := c.Usage(req)
		c.Meter(t.Context(), c.End(ctx, nil, false).Ending, u)
		if len(m) != 1 {
			t.Fatalf("%d records, want 1", len(m))
		}
		r := m[0]
		if r.RequestID != "req_1" || r.Status != metering.StatusComplete || r.Deployment != "dep" || r.Usage != u || r.Cost != 14 || c.Cost(u) != 14 ||
			r.TTFT != 100*time.Millisecond || r.TTFW != 100*time.Millisecond || r.Total != 250*time.Millisecond {
			t.Errorf("record %+v", r)
		}
		// Without a meter, nothing is built; the timings are completed
		// all the same.
		rec = budget.New(time.Now())
		c, _ = New(Options{Routes: &routes{}}).Resolve(request(rec), 0)
		time.Sleep(time.Millisecond)
		c.Meter(t.Context(), metering.Ending{Status: metering.StatusComplete}, chat.Usage{})
		if rec.TTC() == 0 {
			t.Error("the timings were not completed")
		}
	})
}
