package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/advisor"
	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/budget/window"
	"github.com/firstword/firstword/internal/cache"
	cacheredis "github.com/firstword/firstword/internal/cache/redis"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/contextsrc"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/guard"
	"github.com/firstword/firstword/internal/journal"
	redisjournal "github.com/firstword/firstword/internal/journal/redis"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/metrics"
	"github.com/firstword/firstword/internal/redisconn"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/store/postgres"
	"github.com/firstword/firstword/internal/store/sqlite"
)

// OpenStore opens the configured store and runs its migrations. An
// SQLite store without a path keeps everything in memory (tests); the
// serve and keys commands default the path to firstword.db. Build opens
// the gateway's store with it, and the keys command the same store.
func OpenStore(ctx context.Context, cfg *config.Config) (store.Store, error) {
	switch cfg.Store.Driver {
	case "postgres":
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		st, err := postgres.Open(octx, cfg.Store.ResolvedURL)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return st, nil
	default:
		path := cfg.Store.Path
		if path == "" {
			path = ":memory:"
		}
		st, err := sqlite.Open(path)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return st, nil
	}
}

// usageOptions configures the usage writer. Without a configured spill
// path, the spill file sits next to the SQLite file (none for an
// in-memory one: its rows die with the process anyway), or in the working
// directory on PostgreSQL.
func usageOptions(cfg *config.Config, log *slog.Logger) metering.UsageOptions {
	spill := cfg.Usage.SpillPath
	if spill == "" {
		switch {
		case cfg.Store.Driver == "postgres":
			spill = "firstword-usage.spill"
		case cfg.Store.Path != "" && !strings.Contains(cfg.Store.Path, ":memory:"):
			spill = cfg.Store.Path + ".usage-spill"
		}
	}
	return metering.UsageOptions{Timeout: cfg.Store.Timeout, Queue: cfg.Usage.Queue, SpillPath: spill, RetryMax: cfg.Usage.RetryMax, Log: log}
}

// touchInterval is how often a silent answer's row is rewritten while
// the shared journal fails (while it keeps the answer, the row is saved
// every conversation.DurableCheckpointEvery): a third of its lease (at
// most the default, 5s), so that a replica taking over an answer whose
// row was quiet for a lease takes a dead producer's
// (httpapi.ContinueLost).
func touchInterval(cfg *config.Config) time.Duration {
	if cfg.Resume.Journal != "redis" {
		return 0
	}
	return min(5*time.Second, cfg.Resume.Lease/3)
}

// chatOptions builds the /v1/chat pipeline's guard and sources.
func chatOptions(cfg *config.Config, client *http.Client, log *slog.Logger) (conversation.Options, error) {
	o := conversation.Options{
		GuardBefore:        cfg.Chat.GuardMode == "before",
		HistoryTokens:      cfg.Sources.History.MaxTokens,
		HistoryTimeout:     cfg.Sources.History.Timeout,
		CheckpointInterval: cfg.Chat.CheckpointInterval,
		CheckpointTokens:   cfg.Chat.CheckpointTokens,
		TouchInterval:      touchInterval(cfg),
		Log:                log,
		SystemPrompt: func(alias string) string {
			if m := cfg.Models[alias]; m != nil && m.SystemPrompt != "" {
				return m.SystemPrompt
			}
			return cfg.Chat.SystemPrompt
		},
	}
	if gc := cfg.Guard; gc != nil {
		g, err := guard.New(guard.Config{
			MaxInputChars: gc.MaxInputChars, Blocklist: gc.Blocklist, BlocklistAction: guard.Action(gc.BlocklistAction),
			Injection: gc.Injection, InjectionAction: guard.Action(gc.InjectionAction), PIIAction: guard.Action(gc.PIIAction),
			HTTP: guardHTTP(gc.HTTP),
		}, client)
		if err != nil {
			return o, fmt.Errorf("guard: %w", err)
		}
		o.Guard, o.RemoteGuard, o.GuardTimeout = guardAdapter{g}, gc.HTTP != nil, gc.Timeout
	}
	if rc := cfg.Sources.Retrieval; rc != nil {
		start := time.Now()
		ix, err := contextsrc.BuildIndex(rc.Dir)
		if err != nil {
			return o, fmt.Errorf("sources.retrieval: %w", err)
		}
		log.Info("retrieval index built", "dir", rc.Dir, "passages", ix.Len(), "ms", time.Since(start).Milliseconds())
		o.Sources = append(o.Sources, source(&contextsrc.Retrieval{Index: ix, TopK: rc.TopK}, rc.Timeout, config.Optional(rc.Optional)))
	}
	for _, lc := range cfg.Sources.Lookups {
		l := &contextsrc.Lookup{LookupName: lc.Name, URLTemplate: lc.URL, Headers: lc.Headers, MaxBytes: lc.MaxBytes, Client: client}
		if err := l.Validate(); err != nil {
			return o, fmt.Errorf("sources.lookups %s: %w", lc.Name, err)
		}
		o.Sources = append(o.Sources, source(l, lc.Timeout, config.Optional(lc.Optional)))
	}
	return o, nil
}

func guardHTTP(h *config.GuardHTTP) *guard.HTTPConfig {
	if h == nil {
		return nil
	}
	return &guard.HTTPConfig{URL: h.URL, Timeout: h.Timeout, FailOpen: h.FailOpen, Headers: h.Headers}
}

// source adapts a contextsrc.Source to the pipeline.
func source(src contextsrc.Source, timeout time.Duration, optional bool) conversation.Source {
	return conversation.Source{
		Name: src.Name(), Timeout: timeout, Optional: optional,
		Fetch: func(ctx context.Context, q conversation.Query) (string, []conversation.Citation, error) {
			res, err := src.Fetch(ctx, contextsrc.Query{TenantID: q.TenantID, UserID: q.UserID, ConversationID: q.ConversationID, Question: q.Question})
			if err != nil {
				return "", nil, err
			}
			cites := make([]conversation.Citation, 0, len(res.Citations))
			for _, c := range res.Citations {
				cites = append(cites, conversation.Citation{N: c.N, Doc: c.Doc, Passage: c.Passage})
			}
			return res.Text, cites, nil
		},
	}
}

// guardAdapter adapts guard.Guard to the pipeline.
type guardAdapter struct{ g *guard.Guard }

func (a guardAdapter) CheckLocal(text string) conversation.Verdict {
	return verdict(a.g.CheckLocal(text))
}

func (a guardAdapter) Check(ctx context.Context, text, user string) (conversation.Verdict, error) {
	v, err := a.g.Check(ctx, text, user)
	return verdict(v), err
}

func verdict(v guard.Verdict) conversation.Verdict {
	out := conversation.Verdict{Blocked: v.Blocked, Code: v.Code, Reason: v.Reason, Text: v.Text}
	for _, f := range v.Findings {
		out.Flags = append(out.Flags, f.Kind+":"+string(f.Action))
	}
	return out
}

// windowMeter feeds finished requests to the budget window.
type windowMeter struct{ w *window.Window }

func (m windowMeter) Record(_ context.Context, r *metering.Record) {
	if r.Timings != nil {
		m.w.Observe(time.Now(), r.RequestID, r.Tenant, r.User, r.Surface, r.Alias, string(r.Status), r.Timings)
	}
}

func budgetTargets(b config.Budget) window.Targets {
	conv := func(t config.Target) *window.Target {
		p, v, ok := t.Percentile()
		if !ok {
			return nil
		}
		return &window.Target{Percentile: p, Value: v}
	}
	out := window.Targets{TTFW: conv(b.TTFW), TTC: conv(b.TTC), Stages: map[string]window.Target{}}
	for name, t := range b.Stages {
		if wt := conv(t); wt != nil {
			out.Stages[name] = *wt
		}
	}
	return out
}

func streamGauge(m *metrics.Metrics) interface{ Open(string) func() } {
	if m == nil {
		return nil
	}
	return m
}

// metricsHandler is /metrics on the main listener, or nil when off there
// (metrics.listen gives it a listener of its own: Serve).
func metricsHandler(m *metrics.Metrics, onMain bool) http.Handler {
	if m == nil || !onMain {
		return nil
	}
	return m.Handler()
}

// buildLevers puts the caps, routing rules, response cache and request
// coalescing in front of the router.
func buildLevers(ctx context.Context, cfg *config.Config, r *router.Router, g *Gateway, log *slog.Logger) (*levers.Levers, error) {
	opt := levers.Options{Inner: r, Aliases: map[string]levers.Alias{}, ReplayTokensPerSecond: cfg.Cache.ReplayTokensPerSecond, Log: log}
	switch cfg.Cache.Driver {
	case "redis":
		rc, err := cacheredis.Open(ctx, redisServer(cfg.Cache.Redis), "")
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		g.closers = append(g.closers, rc.Close)
		// A slow or frozen Redis costs a request at most the cache
		// timeout, and after repeated failures nothing until the cooldown
		// ends. One guard for the answers and the Responses items: they
		// share one Redis, and so one verdict on it.
		cg := cache.Guard(rc, cache.GuardOptions{Timeout: cfg.Cache.Timeout, Failures: cfg.Cache.Failures, Cooldown: cfg.Cache.Cooldown, Log: log})
		opt.Cache = cg
		g.cache = cg
		g.cacheGuard = cg
	default:
		mc, err := cache.NewMemory(cfg.Cache.MaxBytes)
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		g.closers = append(g.closers, mc.Close)
		opt.Cache = mc
		g.cache = mc
	}
	for name, m := range cfg.Models {
		a := levers.Alias{MaxTokens: m.MaxTokens, DefaultMaxTokens: m.DefaultMaxTokens, Brevity: m.Brevity, PromptCaching: m.PromptCaching, Coalesce: config.Optional(m.Coalesce)}
		a.Cache.Enabled = true
		if mc := m.Cache; mc != nil {
			a.Cache.Enabled, a.Cache.Nondeterministic, a.Cache.TTL = config.Optional(mc.Enabled), mc.Nondeterministic, mc.TTL
		}
		for _, rule := range m.Rules {
			a.Rules = append(a.Rules, levers.Rule{Name: rule.Name, MaxInputTokens: rule.MaxInputTokens, Keywords: rule.Keywords, Hint: rule.Hint, Route: rule.Route, Use: rule.Use})
		}
		if th := m.Thinking; th != nil {
			a.Thinking = levers.Thinking{Effort: th.Effort, MaxBudgetTokens: th.MaxBudgetTokens, Hide: !config.Optional(th.Show)}
		}
		opt.Aliases[name] = a
	}
	return levers.New(opt), nil
}

// openJournal opens the journal of /v1/chat answers: in process, or on
// Redis, shared by the replicas.
func openJournal(ctx context.Context, cfg *config.Config, log *slog.Logger) (j journal.Journal, shared bool, err error) {
	rc := cfg.Resume
	o := journal.Options{Lease: rc.Lease, Retention: rc.Retain, MaxMessageBytes: rc.MaxAnswerBytes, MaxTotalBytes: rc.MaxBytes, FlushInterval: rc.FlushInterval}
	if err := o.Validate(); err != nil {
		return nil, false, fmt.Errorf("resume: %w", err)
	}
	if rc.Journal != "redis" {
		return journal.NewMemory(o), false, nil
	}
	rj, err := redisjournal.Open(ctx, redisServer(rc.Redis), o, log)
	if err != nil {
		return nil, false, fmt.Errorf("resume: %w", err)
	}
	return rj, true, nil
}

// redisServer is the Redis deployment a config section names.
func redisServer(r config.Redis) redisconn.Server {
	return redisconn.Server{URL: r.ResolvedURL, Addrs: r.Addrs, SentinelMaster: r.SentinelMaster, Cluster: r.Cluster}
}

// advisorMeter feeds finished requests to the lever advisor. guardFirst:
// the model waits for the guard (guard_mode: before), which is then a
// pre-call step; in parallel mode it runs beside the model's call.
type advisorMeter struct {
	r          *advisor.Recorder
	guardFirst bool
}

func (m advisorMeter) Record(_ context.Context, r *metering.Record) {
	if r.Timings == nil {
		return
	}
	s := advisor.Sample{Time: r.Time, Tenant: r.Tenant, Alias: r.Alias, Deployment: r.Deployment, Complete: r.Status == metering.StatusComplete,
		TTFT: r.TTFT, TTFW: r.TTFW, Total: r.Total, Gen: time.Duration(r.StreamMs * float64(time.Millisecond)), CallStart: r.CallStart,
		Thinking: r.Thinking, Input: r.Usage.InputTokens, Cached: r.Usage.CachedInputTokens, Output: r.Usage.OutputTokens,
		Reasoning: r.Usage.ReasoningTokens, Cost: r.Cost, RepeatKey: r.Fingerprint.Repeat, CacheHit: r.Cached, Coalesced: r.Coalesced,
		PrefixKey: r.Fingerprint.Prefix, PrefixTokens: r.Fingerprint.PrefixTokens, FirstTokenTimeouts: r.FirstTokenTimeouts}
	if r.RoutedTo != "" && !strings.Contains(r.RoutedTo, router.FellBackTo) {
		s.Alias = r.RoutedTo // measured as the alias that served it
	}
	s.Steps = preCallSteps(r.Timings.Stages(), m.guardFirst, r.CallStart)
	m.r.Add(s)
}

// preCallSteps are a request's context steps (the stages inside its
// context group) and, when the model waits for it, its guard: the steps
// before the model's call (at callStart; 0: not called), clipped to it.
func preCallSteps(stages []budget.Stage, guardFirst bool, callStart time.Duration) []advisor.Step {
	var group *budget.Stage
	for i := range stages {
		if stages[i].Group && stages[i].Name == "context" {
			group = &stages[i]
		}
	}
	var out []advisor.Step
	for _, st := range stages {
		inside := group != nil && !st.Group && st.Start >= group.Start && st.End <= group.End
		if !inside && !(guardFirst && st.Name == "guard") {
			continue
		}
		end := st.End
		if callStart > 0 {
			end = min(end, callStart)
		}
		if end > st.Start {
			out = append(out, advisor.Step{Name: st.Name, Start: st.Start, End: end})
		}
	}
	return out
}

// advisorOptions are the config's facts the lever advisor reads.
func advisorOptions(cfg *config.Config, prices metering.Prices) advisor.Options {
	opt := advisor.Options{Aliases: map[string]advisor.Alias{}, Price: func(dep string) (advisor.Price, bool) {
		p, ok := prices.Lookup(dep)
		return advisor.Price{Input: p.Input / 1e6, CachedInput: p.CachedInput / 1e6, Output: p.Output / 1e6}, ok
	}}
	opt.ModelCalls = map[string]bool{}
	for _, l := range cfg.Sources.Lookups {
		if l.ModelCall {
			opt.ModelCalls[l.Name] = true
		}
	}
	if cfg.Guard != nil && cfg.Guard.HTTP != nil && cfg.Guard.HTTP.ModelCall && cfg.Chat.GuardMode == "before" {
		opt.ModelCalls["guard"] = true
	}
	for name, m := range cfg.Models {
		a := advisor.Alias{MaxTokens: m.MaxTokens, FirstTokenTimeout: m.FirstTokenTimeout, PromptCaching: m.PromptCaching,
			Adaptive: m.AdaptiveFirstToken != nil}
		if a.FirstTokenTimeout == 0 {
			a.FirstTokenTimeout = 5 * time.Second
		}
		if c := m.Cache; c != nil {
			a.CacheTTL, a.Nondeterministic = c.TTL, c.Nondeterministic
			a.CacheOff = c.Enabled != nil && !*c.Enabled
		}
		if m.Thinking != nil {
			a.ThinkingBudget = m.Thinking.MaxBudgetTokens
		}
		opt.Aliases[name] = a
	}
	return opt
}
