package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store"
)

// errBlocked cancels a turn's work when the guard blocks its message.
var errBlocked = errors.New("blocked by the guardrail")

// ShutdownCode is the error code of a turn cut by the server's shutdown.
const ShutdownCode = string(chat.CategoryShuttingDown)

// Event is one event of a turn after meta: a delta, then done or error.
type Event struct {
	Kind  string // "delta", "done" or "error"
	Text  string
	Done  *Done
	Error *ErrorEvent
}

// ErrorEvent ends a turn that failed. The partial answer is kept.
type ErrorEvent struct {
	MessageID string         `json:"message_id"`
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Status    store.Status   `json:"status"`
	Usage     chat.Usage     `json:"usage"`
	Timings   budget.Timings `json:"timings"`
}

// Done ends a turn that finished (completely, or cut by the timeout).
type Done struct {
	MessageID    string         `json:"message_id"`
	Status       store.Status   `json:"status"`
	FinishReason string         `json:"finish_reason"`
	Model        string         `json:"model"`
	Deployment   string         `json:"deployment"`
	Usage        chat.Usage     `json:"usage"`
	Cost         float64        `json:"cost"`
	Cached       bool           `json:"cached"`
	Coalesced    bool           `json:"coalesced,omitempty"`
	Rule         string         `json:"rule,omitempty"`
	Attempts     int            `json:"attempts"`
	Fallback     bool           `json:"fallback"`
	Route        string         `json:"route,omitempty"`
	Timings      budget.Timings `json:"timings"`
	Sources      []SourceReport `json:"sources"`
	Citations    []Citation     `json:"citations,omitempty"`
	Flags        []string       `json:"guard_flags,omitempty"`
}

// SourceReport says how a context source fared.
type SourceReport struct {
	Name     string  `json:"name"`
	Status   string  `json:"status"` // ok, timeout, failed, skipped
	Ms       float64 `json:"ms"`
	Optional bool    `json:"optional"`
	Error    string  `json:"error,omitempty"`
}

// Run streams the turn: yield receives deltas and then exactly one done or
// error event, unless the client left. yield reports whether the client
// received the event; its false ends the turn as cancelled. Every ending
// saves the assistant message with exactly the text that was delivered.
func (t *Turn) Run(ctx context.Context, yield func(Event) bool) {
	s, rec := t.s, t.in.Budget
	ctx, cancelDeadline := context.WithDeadlineCause(ctx, rec.Start().Add(t.timeout), chat.ErrDeadline)
	defer cancelDeadline()
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	f := &final{t: t}

	// The local guard ran in Prepare, before anything was stored.
	text := t.user.Content
	if v := t.local; v != nil {
		if v.Blocked {
			f.blocked(ctx, *v, yield)
			return
		}
		f.flags = v.Flags
	}
	var verdict chan Verdict
	if g := s.opt.Guard; g != nil && s.opt.RemoteGuard {
		verdict = make(chan Verdict, 1)
		go func() {
			gctx, cancel := context.WithTimeout(runCtx, s.opt.GuardTimeout)
			defer cancel()
			start := time.Now()
			v, err := g.Check(gctx, text, t.in.UserID)
			if err != nil && !v.Blocked {
				v = Verdict{Blocked: true, Code: "guard_unavailable", Reason: "The message could not be checked: " + err.Error()}
				if runCtx.Err() != nil {
					v.Blocked = false // the turn is over anyway
				}
			}
			rec.Add("guard", start, time.Now(), verdictNote(v))
			if v.Blocked {
				cancelRun(errBlocked)
			}
			verdict <- v
		}()
	}
	awaitGuard := func() (Verdict, bool) {
		if verdict == nil {
			return Verdict{}, false
		}
		v := <-verdict
		verdict = nil
		return v, v.Blocked
	}

	g, err := t.gather(runCtx, text)
	f.sources, f.citations = g.reports, g.citations
	if errors.Is(context.Cause(runCtx), errBlocked) {
		v, _ := awaitGuard()
		f.blocked(ctx, v, yield)
		return
	}
	if err != nil {
		if verdict != nil {
			awaitGuard()
		}
		f.err = err
		f.finish(ctx, yield)
		return
	}
	if s.opt.GuardBefore {
		if v, blocked := awaitGuard(); blocked {
			f.blocked(ctx, v, yield)
			return
		}
	}

	end := rec.Begin("prompt")
	req := t.prompt(text, g)
	f.prompt = req
	end("")

	cp := newCheckpointer(s.opt.Store, t.assistant.ID, s.opt.CheckpointInterval, s.opt.CheckpointTokens)
	defer cp.stop()
	var sent strings.Builder
	modelStart := time.Now()
	for c, err := range s.opt.Router.StreamReport(runCtx, req, &f.rep) {
		if err != nil {
			f.err = err
			break
		}
		f.tally.Add(&c)
		delta := c.Text + c.Refusal
		if delta == "" {
			continue
		}
		if verdict != nil {
			// Parallel mode: nothing reaches the client until the guard
			// has passed the message.
			if v, blocked := awaitGuard(); blocked {
				f.stopModel(modelStart)
				f.blocked(ctx, v, yield)
				return
			}
		}
		if !yield(Event{Kind: "delta", Text: delta}) {
			f.gone = true
			cancelRun(chat.ErrClientGone)
			break
		}
		rec.FirstWord(time.Now())
		sent.WriteString(delta)
		f.sentTokens.Add(delta)
		cp.update(sent.String(), f.sentTokens.Tokens())
	}
	f.stopModel(modelStart)
	cp.stop()
	if errors.Is(context.Cause(runCtx), errBlocked) {
		v, _ := awaitGuard()
		f.text = sent.String()
		f.blocked(ctx, v, yield)
		return
	}
	if verdict != nil && !f.gone {
		if v, blocked := awaitGuard(); blocked {
			f.text = sent.String()
			f.blocked(ctx, v, yield)
			return
		}
	}
	f.text = sent.String()
	f.finish(ctx, yield)
}

// final accumulates how a turn ended and writes it.
type final struct {
	t          *Turn
	rep        router.Report
	tally      metering.Tally
	text       string
	sentTokens chat.TokenCount
	err        error
	gone       bool
	sources    []SourceReport
	citations  []Citation
	flags      []string
	prompt     *chat.Request
}

// stopModel records the model's stages from the router's report.
func (f *final) stopModel(start time.Time) {
	RecordAttempts(f.t.in.Budget, &f.rep, start, time.Now())
}

func verdictNote(v Verdict) string {
	switch {
	case v.Blocked:
		return "blocked:" + v.Code
	case len(v.Flags) > 0:
		return "flagged"
	}
	return ""
}

// blocked ends a turn the guard refused: nothing more reaches the model or
// the client but the refusal.
func (f *final) blocked(ctx context.Context, v Verdict, yield func(Event) bool) {
	f.err = &chat.Error{Category: chat.CategoryBlocked, Message: v.Reason}
	if v.Code != "" {
		f.flags = append(f.flags, v.Code)
	}
	f.finish(ctx, yield)
}

// finish classifies the ending, saves the message and sends the last
// event. The message is saved before done is sent: nothing the client was
// told is finished can be lost.
func (f *final) finish(ctx context.Context, yield func(Event) bool) {
	t, s := f.t, f.t.s
	rec := t.in.Budget
	m := t.assistant
	m.Content = f.text
	m.Deployment = f.rep.Deployment
	m.FinishReason = string(f.tally.Finish)
	u := f.tally.Usage(f.req())
	if f.tally.Reported == nil && f.tally.SoFar == nil {
		// All estimated: of what was sent. (Counts the provider reported
		// before the stream ended are kept.)
		u.OutputTokens = f.sentTokens.Tokens()
	}
	m.InputTokens, m.OutputTokens, m.CachedTokens, m.Estimated = u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.Estimated
	billed := metering.Billed(u, f.rep.Cached, f.rep.BillShare, f.rep.BillPart)
	m.Cost = s.opt.Prices.Cost(f.rep.Deployment, billed)
	var code string
	retryable := false
	switch {
	case !f.gone && errors.Is(context.Cause(ctx), chat.ErrShutdown):
		// The server cut the answer, not the user: it says so, and the
		// message is interrupted, as after a crash, keeping its text.
		m.Status, code, retryable = store.StatusInterrupted, ShutdownCode, true
		m.ErrorCode, m.ErrorMessage = code, "the server is shutting down; the answer so far is saved, send the message again to continue"
	case f.gone || (f.err != nil && ctx.Err() != nil && !errors.Is(context.Cause(ctx), chat.ErrDeadline)):
		m.Status, code = store.StatusCancelled, "cancelled"
	case f.err == nil && f.tally.Finish == chat.FinishTimeout:
		m.Status = store.StatusTimeout
	case f.err == nil:
		m.Status = store.StatusComplete
	default:
		ce := chat.AsError(f.err)
		m.Status, code, retryable = store.StatusError, string(ce.Category), ce.Retryable
		if ce.Category == chat.CategoryTimeout || errors.Is(f.err, chat.ErrDeadline) {
			m.Status, code, retryable = store.StatusTimeout, "timeout", true
		}
		m.ErrorCode, m.ErrorMessage = code, ce.Message
		if ce.Category == chat.CategoryInternal {
			s.opt.Log.Error("chat turn failed", "request_id", t.in.RequestID, "err", f.err)
		}
	}
	rec.Complete(time.Now()) // provisional: the last event follows the save
	m.Timings = rec.JSON()
	meta := map[string]any{"attempts": f.rep.Tries(), "route": f.rep.Route(), "sources": f.sources, "cached": f.rep.Cached, "fallback": f.rep.Fallbacks() > 0}
	if len(f.citations) > 0 {
		meta["citations"] = f.citations
	}
	if len(f.flags) > 0 {
		meta["guard_flags"] = f.flags
	}
	m.Meta, _ = json.Marshal(meta)
	m.UpdatedAt = time.Now().UTC()

	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	end := rec.Begin("persist")
	if err := s.opt.Store.FinishMessage(pctx, m); err != nil {
		s.opt.Log.Error("saving the answer", "request_id", t.in.RequestID, "message_id", m.ID, "err", err)
		if m.Status == store.StatusComplete {
			m.Status, code = store.StatusError, "store_unavailable"
			m.ErrorMessage = "the answer could not be saved"
		}
	}
	end("")
	// Metered after the last event, which it does not delay.
	defer f.meter(pctx, u, m)
	if f.gone || m.Status == store.StatusCancelled {
		return
	}
	rec.Complete(time.Now())
	if m.Status == store.StatusComplete || m.Status == store.StatusTimeout && f.err == nil {
		yield(Event{Kind: "done", Done: &Done{
			MessageID: m.ID, Status: m.Status, FinishReason: m.FinishReason, Model: t.in.Model,
			Deployment: m.Deployment, Usage: u, Cost: m.Cost, Cached: f.rep.Cached, Coalesced: f.rep.Coalesced, Rule: f.rep.Rule, Attempts: f.rep.Tries(),
			Fallback: f.rep.Fallbacks() > 0, Route: f.rep.Route(), Timings: rec.Timings(),
			Sources: f.sources, Citations: f.citations, Flags: f.flags,
		}})
		return
	}
	yield(Event{Kind: "error", Error: &ErrorEvent{MessageID: m.ID, Code: code, Message: m.ErrorMessage, Retryable: retryable, Status: m.Status, Usage: u, Timings: rec.Timings()}})
}

// req is the request as sent, for usage estimates.
func (f *final) req() *chat.Request {
	if f.prompt != nil {
		return f.prompt
	}
	return &chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: f.t.in.Message}}}
}

// meter records the turn; u is the usage of what was delivered, before
// any sharing (see metering.Prices.Charge).
func (f *final) meter(ctx context.Context, u chat.Usage, m *store.Message) {
	t := f.t
	rec := t.in.Budget
	total := rec.TTC()
	if total == 0 {
		total = time.Since(rec.Start())
	}
	r := &metering.Record{
		RequestID: t.in.RequestID, Time: rec.Start(), Surface: "chat", Tenant: t.in.TenantID, User: t.in.UserID,
		Alias: t.in.Model, Deployment: f.rep.Deployment, Model: f.rep.Model, Stream: true,
		Status: meterStatus(m.Status), FinishReason: m.FinishReason,
		TTFW: rec.TTFW(), Total: total, Attempts: f.rep.Tries(),
		Fallbacks: f.rep.Fallbacks(), ErrorCode: m.ErrorCode, Error: m.ErrorMessage,
		Hedged: f.rep.Hedged(), Retries: f.rep.Retries(), Gaps: &f.tally.Gaps, Timings: rec,
		TraceID: t.in.TraceID, TraceParent: t.in.TraceParent,
	}
	if f.tally.Visible {
		r.StreamMs = float64(f.tally.Last.Sub(f.tally.First).Microseconds()) / 1000
	}
	if !f.rep.FirstToken.IsZero() {
		r.TTFT = f.rep.FirstToken.Sub(rec.Start())
	}
	if len(f.rep.Attempts) > 1 {
		r.Route = f.rep.Route()
	}
	t.s.opt.Prices.Charge(r, u, &f.rep)
	r.UsageMissing = m.Status == store.StatusComplete && f.tally.Reported == nil && !f.rep.Cached
	r.Cached, r.Coalesced, r.Rule = f.rep.Cached, f.rep.Coalesced, f.rep.Rule
	if r.Rule != "" {
		r.RoutedTo = f.rep.Alias
	}
	if t.s.opt.Meter != nil {
		t.s.opt.Meter.Record(ctx, r)
	}
}

func meterStatus(s store.Status) metering.Status {
	switch s {
	case store.StatusInterrupted:
		return metering.StatusInterrupted
	case store.StatusComplete:
		return metering.StatusComplete
	case store.StatusCancelled:
		return metering.StatusCancelled
	case store.StatusTimeout:
		return metering.StatusTimeout
	}
	return metering.StatusError
}

// gathered is the context for the prompt.
type gathered struct {
	history   []store.Message
	texts     []string
	citations []Citation
	reports   []SourceReport
}

// gather loads the history and runs every context source at once, each
// with its own timeout: the wait is the slowest, not the sum. Optional
// sources that fail are reported and skipped; a required one (and the
// history) fails the turn.
func (t *Turn) gather(ctx context.Context, question string) (*gathered, error) {
	s, rec := t.s, t.in.Budget
	g := &gathered{}
	start := time.Now()
	defer func() { rec.AddGroup("context", start, time.Now(), "") }()
	grp, gctx := errgroup.WithContext(ctx)
	results := make([]struct {
		text  string
		cites []Citation
	}, len(s.opt.Sources))
	reports := make([]SourceReport, len(s.opt.Sources)+1)
	reports[0] = SourceReport{Name: "history", Status: "ok"}
	if !t.created {
		grp.Go(func() error {
			hctx, cancel := context.WithTimeout(gctx, s.opt.HistoryTimeout)
			defer cancel()
			st := time.Now()
			msgs, err := s.opt.Store.LastMessages(hctx, t.in.TenantID, t.conv.ID, 64)
			reports[0].Ms = msSince(st)
			rec.Add("history", st, time.Now(), "")
			if err != nil {
				reports[0].Status, reports[0].Error = "failed", err.Error()
				return fmt.Errorf("history: %w", err)
			}
			g.history = historyWithin(msgs, t.historyUntil, s.opt.HistoryTokens)
			return nil
		})
	}
	q := Query{TenantID: t.in.TenantID, UserID: t.in.UserID, ConversationID: t.conv.ID, Question: question}
	for i, src := range s.opt.Sources {
		grp.Go(func() error {
			sctx, cancel := context.WithTimeout(gctx, src.Timeout)
			defer cancel()
			st := time.Now()
			text, cites, err := src.Fetch(sctx, q)
			r := &reports[i+1]
			*r = SourceReport{Name: src.Name, Status: "ok", Ms: msSince(st), Optional: src.Optional}
			note := ""
			if err != nil {
				switch {
				case gctx.Err() != nil:
					r.Status = "cancelled"
				case sctx.Err() != nil:
					r.Status = "timeout"
				default:
					r.Status = "failed"
				}
				r.Error, note = err.Error(), r.Status
			}
			rec.Add(src.Name, st, time.Now(), note)
			if err != nil {
				if !src.Optional && gctx.Err() == nil {
					return fmt.Errorf("%s: %w", src.Name, err)
				}
				return nil
			}
			results[i].text, results[i].cites = text, cites
			return nil
		})
	}
	err := grp.Wait()
	for _, r := range results {
		if r.text != "" {
			g.texts = append(g.texts, r.text)
		}
		g.citations = append(g.citations, r.cites...)
	}
	if t.created {
		reports = reports[1:]
	}
	g.reports = reports
	if err != nil {
		return g, &chat.Error{Category: chat.CategoryContextUnavailable, Message: err.Error(), Retryable: true, Err: err}
	}
	return g, nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// historyWithin keeps the newest messages before seq until that fit in the
// token budget, oldest first. Partial answers count: the history is what
// was on the user's screen.
func historyWithin(msgs []store.Message, until, budget int) []store.Message {
	var out []store.Message
	used := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Seq >= until || m.Content == "" {
			continue
		}
		n := chat.EstimateTokens(m.Content) + 4
		if used+n > budget {
			break
		}
		used += n
		out = append(out, m)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// prompt assembles the request with its stable prefix first, so that
// provider prompt caches hit: the system prompt, then the history, then
// what is new with this question: the retrieved documents and lookups, and
// the message. The context is a user message, not a system one: it
// changes with every question, so placed before the history (where
// Anthropic puts every system message) it would make the history
// uncacheable; and it is text from documents, which should not speak with
// the system prompt's authority.
//
// The cache breakpoints (sent when the alias has prompt_caching) are the
// system prompt, the end of the history, which the next turn reads back
// (its history goes on from there), and, when no context follows it, the
// message itself, which the next turn repeats. A message followed by this
// turn's context is not marked: the next turn has no such prefix.
func (t *Turn) prompt(text string, g *gathered) *chat.Request {
	s := t.s
	var msgs []chat.Message
	if sys := s.opt.SystemPrompt(t.in.Model); sys != "" {
		msgs = append(msgs, chat.Message{Role: chat.RoleSystem, Content: sys, CacheBreakpoint: true})
	}
	for _, m := range g.history {
		role := chat.RoleUser
		if m.Role == "assistant" {
			role = chat.RoleAssistant
		}
		msgs = append(msgs, chat.Message{Role: role, Content: m.Content})
	}
	if len(g.history) > 0 {
		msgs[len(msgs)-1].CacheBreakpoint = true
	}
	if len(g.texts) > 0 {
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: "Context for this question:\n\n" + strings.Join(g.texts, "\n\n")})
	}
	msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: text, CacheBreakpoint: len(g.texts) == 0})
	return &chat.Request{Model: t.in.Model, Messages: msgs, Meta: t.in.Meta}
}
