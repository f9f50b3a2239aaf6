// Package gateway is firstword's composition root: Build reads a config,
// picks the adapters (providers, store, cache, guard, context sources,
// meters) and wires them behind the HTTP API; Serve runs the result on a
// listener until its context ends. It is the only package that picks
// adapters, and only the command line (internal/cli) imports it.
// gatewaytest starts one on a loopback socket for tests.
package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/firstword/firstword/internal/advisor"
	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/budget/window"
	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/httpapi"
	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/metrics"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/anthropic"
	"github.com/firstword/firstword/internal/provider/gemini"
	"github.com/firstword/firstword/internal/provider/ollama"
	"github.com/firstword/firstword/internal/provider/openai"
	"github.com/firstword/firstword/internal/provider/openairesponses"
	"github.com/firstword/firstword/internal/provider/sim"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/tracing"
)

// Gateway is a built gateway: everything serve runs, wired. Build makes
// one, Serve serves it and Close releases it.
type Gateway struct {
	cfg    *config.Config
	log    *slog.Logger
	router *router.Router
	meter  *metering.Memory
	// deferred meters cancelled requests in the background; Close drains it
	// before the meters behind it close.
	deferred *metering.Deferred
	store    store.Store
	auth     *auth.Authenticator
	metrics  *metrics.Metrics
	levers   *levers.Levers
	closers  []func() error
	window   *window.Window
	advisor  *advisor.Recorder
	tracer   *tracing.Tracer
	sims     map[string]*sim.Provider

	transport *http.Transport
	cache     cache.Cache // the response cache, also holding Responses API items
	api       *httpapi.Server
	// cacheGuard bounds the Redis cache (nil for the memory cache).
	cacheGuard *cache.Guarded
	// limiter admits requests under the tenants' and keys' limits.
	limiter *limits.Limiter
	// journal keeps /v1/chat answers for resumes; shared says whether
	// other replicas see it (Redis).
	journal journal.Journal
	shared  bool
}

// Close flushes traces and releases the upstream connection pool and the
// store.
func (g *Gateway) Close() {
	if g.deferred != nil {
		g.deferred.Close()
	}
	if g.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g.tracer.Shutdown(ctx)
		cancel()
	}
	g.transport.CloseIdleConnections()
	if g.levers != nil {
		// Answers still being written to the cache; each write is bounded
		// by the cache timeout.
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g.levers.Flush(fctx)
		cancel()
	}
	for _, c := range g.closers {
		c()
	}
	if g.store != nil {
		g.store.Close()
	}
}

// Build wires a gateway from a config. It opens the store (running its
// migrations) and marks answers left streaming by a crash interrupted.
func Build(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Gateway, error) {
	g := &Gateway{cfg: cfg, log: log, sims: map[string]*sim.Provider{}, meter: metering.NewMemory(2000)}
	providers := map[string]provider.Provider{}
	transport := provider.NewTransport()
	g.transport = transport
	client := &http.Client{Transport: transport}
	for name, pc := range cfg.Providers {
		hc := provider.HTTPConfig{Name: name, BaseURL: pc.BaseURL, APIKey: pc.APIKey, Headers: pc.Headers, Client: client, MaxEventSize: cfg.MaxEventBytes}
		switch pc.Type {
		case "openai":
			providers[name] = openai.New(openai.Config{HTTPConfig: hc, MaxTokensField: pc.MaxTokensField})
		case "openai-responses":
			providers[name] = openairesponses.New(openairesponses.Config{HTTPConfig: hc})
		case "anthropic":
			providers[name] = anthropic.New(anthropic.Config{HTTPConfig: hc, Version: pc.AnthropicVersion, DefaultMaxTokens: pc.DefaultMaxTokens, PromptCaching: true})
		case "gemini":
			providers[name] = gemini.New(gemini.Config{HTTPConfig: hc})
		case "ollama":
			providers[name] = ollama.New(ollama.Config{HTTPConfig: hc})
		case "sim":
			sc := sim.Config{Name: name, Seed: pc.Seed}
			if pc.Fault != nil {
				sc.Fault = *pc.Fault
			}
			if len(pc.Tiers) > 0 {
				sc.Tiers = map[string]sim.Tier{}
				for tn, t := range pc.Tiers {
					jitter := 0.2
					if t.Jitter != nil {
						jitter = *t.Jitter
					}
					speedup := 2.0
					if t.CachedPrefixSpeedup > 0 {
						speedup = t.CachedPrefixSpeedup
					}
					sc.Tiers[tn] = sim.Tier{TTFT: t.TTFT, TokensPerSecond: t.TokensPerSecond, Jitter: jitter, TailProbability: t.TailProbability, TailFactor: t.TailFactor, AnswerTokens: t.AnswerTokens, CachedPrefixSpeedup: speedup,
						PrefillTokensPerSecond: t.PrefillTokensPerSecond, ThinkingTime: t.ThinkingTime, ThinkingTokensPerSecond: t.ThinkingTokensPerSecond}
				}
			}
			sp := sim.New(sc)
			g.sims[name] = sp
			providers[name] = sp
		default:
			return nil, fmt.Errorf("provider %s: type %q is not supported by this build", name, pc.Type)
		}
	}
	rc := router.Config{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Models)) {
		m := cfg.Models[name]
		a := router.Alias{Name: name, Timeout: m.Timeout, FirstTokenTimeout: m.FirstTokenTimeout, MaxAttempts: m.MaxAttempts,
			OnStreamFailure: m.OnStreamFailure, MaxContinuations: m.MaxContinuations, StallTimeout: m.StallTimeout, ContinuationPrompt: m.ContinuationPrompt}
		if ad := m.AdaptiveFirstToken; ad != nil {
			a.Adaptive = &router.Adaptive{Multiplier: ad.Multiplier, Min: ad.Min, Max: ad.Max, MinSamples: ad.MinSamples}
		}
		if h := m.Hedge; h != nil {
			a.Hedge = router.Hedge{Enabled: h.Enabled, Delay: h.Delay}
		}
		if b := m.Breaker; b != nil {
			a.Breaker = router.BreakerConfig{ConsecutiveFailures: b.ConsecutiveFailures, ErrorRate: b.ErrorRate, MinRequests: b.MinRequests, Window: b.Window, Cooldown: b.Cooldown, MaxEjectedShare: b.MaxEjectedShare}
		}
		for _, d := range m.Deployments {
			p := providers[d.Provider]
			if d.ThinkingTags {
				p = provider.ThinkTags(p)
			}
			a.Deployments = append(a.Deployments, router.Deployment{ProviderName: d.Provider, Model: d.Model, Provider: p, Priority: d.Priority, Weight: d.Weight, FirstTokenTimeout: d.FirstTokenTimeout,
				Continuation: router.ContinuationFor(cfg.Providers[d.Provider].Type, d.Model, d.Continuation)})
		}
		rc.Aliases = append(rc.Aliases, a)
	}
	// PROVIDER/MODEL names: auto serves them in local mode only, which is
	// auth's decision (made without waiting on the store; g.auth is set
	// below, before any request).
	rc.Passthrough = &router.Passthrough{Providers: providers}
	switch cfg.ModelsPassthrough {
	case "on":
	case "off":
		rc.Passthrough.Allow = func() bool { return false }
	default:
		rc.Passthrough.Allow = func() bool {
			local, err := g.auth.Local(context.Background())
			return err == nil && local
		}
	}
	r, err := router.New(rc)
	if err != nil {
		return nil, err
	}
	g.router = r
	prices := metering.Prices{}
	for name, pc := range cfg.Providers {
		if pc.Type == "sim" {
			for tier, p := range metering.SimPrices {
				prices[name+"/"+tier] = p
			}
		}
	}
	for key, p := range cfg.Prices {
		prices[key] = metering.Price{Input: p.Input, Output: p.Output, CachedInput: p.CachedInput, CacheWriteInput: p.CacheWriteInput}
	}

	raw, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// What requests wait on is bounded by the store timeout; the start-up
	// work below (migrations ran in OpenStore) is not.
	st := store.WithTimeout(raw, cfg.Store.Timeout)
	g.store = st
	fail := func(err error) (*Gateway, error) {
		for _, c := range g.closers {
			c()
		}
		st.Close()
		return nil, err
	}
	// One SQLite file has one gateway: every streaming row is a crash's.
	// On PostgreSQL other replicas may be streaming: only stale rows are.
	staleBefore := time.Now()
	if cfg.Store.Driver == "postgres" {
		staleBefore = staleBefore.Add(-conversation.StreamLease)
	}
	if n, err := raw.InterruptStreaming(ctx, staleBefore, time.Now().UTC()); err != nil {
		return fail(fmt.Errorf("store: %w", err))
	} else if n > 0 {
		log.Warn("answers left streaming by a crash are now interrupted", "count", n)
	}
	if err := auth.EnsureTenant(ctx, raw, auth.LocalTenant, "Local"); err != nil {
		return fail(fmt.Errorf("store: %w", err))
	}
	g.auth = auth.New(st, cfg.Auth.CacheTTL)
	g.closers = append(g.closers, func() error { g.auth.Close(); return nil })
	g.window = window.New(cfg.Budget.Window, budgetTargets(cfg.Budget), 50)
	usage, err := metering.NewUsageWriter(st, usageOptions(cfg, log))
	if err != nil {
		return fail(err)
	}
	g.closers = append(g.closers, usage.Close)
	g.advisor = advisor.NewRecorder(cfg.Budget.AdviceWindow, 0)
	meter := metering.Multi{g.meter, usage, windowMeter{g.window}, advisorMeter{g.advisor, cfg.Chat.GuardMode == "before"}, metering.Log{Logger: log}}
	if config.Optional(cfg.Metrics.Enabled) {
		g.metrics = metrics.New(r.Health)
		g.metrics.Init(r.Aliases())
		g.metrics.ObserveUsage(usage.Stats)
		meter = append(meter, g.metrics)
	}
	if tc := cfg.Tracing; tc.Endpoint != "" {
		tr, err := tracing.New(ctx, tracing.Config{Endpoint: tc.Endpoint, Headers: tc.Headers, ServiceName: tc.ServiceName, SampleRatio: tc.SampleRatio})
		if err != nil {
			return fail(err)
		}
		g.tracer = tr
		meter = append(meter, tr)
	}
	if err := g.buildLimits(ctx, cfg, st, log); err != nil {
		return fail(err)
	}
	g.deferred = metering.NewDeferred(meter) // a cancelled request's record is written after the burst of closes
	limited := g.limiter.Meter(g.deferred)   // settles admission's reservations and counts spend
	chatOpt, err := chatOptions(cfg, client, log)
	if err != nil {
		return fail(err)
	}
	lv, err := buildLevers(ctx, cfg, r, g, log)
	if err != nil {
		return fail(err)
	}
	g.levers = lv
	if g.metrics != nil {
		g.metrics.ObserveCache(g.cacheStats)
	}
	if g.journal, g.shared, err = openJournal(ctx, cfg, log); err != nil {
		return fail(err)
	}
	g.closers = append(g.closers, g.journal.Close)
	chatOpt.Store = st
	conv := conversation.New(chatOpt)
	extra := map[string]http.Handler{
		"GET /admin/sim": http.HandlerFunc(g.simStats),
	}
	g.api = httpapi.New(httpapi.Options{
		Routes: lv,
		Models: r,
		Meter:  limited,
		Auth:   g.auth,
		Chat:   conv,
		Store:  st,
		Prices: prices,
		Budget: func(tenant, user, surface string, recent int) any {
			return g.window.Report(time.Now(), tenant, user, surface, recent)
		},
		Advice: func(tenant string) any {
			return advisor.Advise(g.advisor.Samples(time.Now(), tenant), advisorOptions(cfg, prices))
		},
		Streams:         streamGauge(g.metrics),
		Metrics:         metricsHandler(g.metrics, cfg.Metrics.Listen == ""),
		Logger:          log,
		Heartbeat:       cfg.Heartbeat,
		MaxRequestBytes: cfg.MaxRequestBytes,
		BodyTimeout:     cfg.RequestBodyTimeout,
		StoreTimeout:    cfg.Store.Timeout,
		Items:           g.cache,
		Extra:           extra,
		CORS: httpapi.CORS{AllowedOrigins: cfg.CORS.AllowedOrigins, AllowedMethods: cfg.CORS.AllowedMethods,
			AllowedHeaders: cfg.CORS.AllowedHeaders, ExposedHeaders: cfg.CORS.ExposedHeaders,
			MaxAge: cfg.CORS.MaxAge, AllowCredentials: cfg.CORS.AllowCredentials},
		AllowedHosts: append(listenHost(cfg.Listen), cfg.AllowedHosts...),
		SharedConversations: func(tenant string) bool {
			t := cfg.Tenants[tenant]
			return t != nil && t.SharedConversations
		},
		MaxMessages:    cfg.MaxMessages,
		MaxPromptBytes: cfg.MaxPromptBytes,
		Journal:        g.journal,
		Grace:          cfg.Resume.GraceWindow(),
		Lease:          cfg.Resume.Lease,
		Admission:      g.limiter,
		Limits:         g.limiter,

		IdempotencyWindow: cfg.Chat.IdempotencyWindow,
	})
	return g, nil
}

// simStats answers GET /admin/sim: each simulated provider's counters.
func (g *Gateway) simStats(w http.ResponseWriter, _ *http.Request) {
	stats := map[string]sim.Stats{}
	for name, sp := range g.sims {
		stats[name] = sp.Stats()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(stats)
}

// Local reports whether the gateway serves without API keys, as the
// single local user: no key exists in the store (auth decides, within
// auth.cache_ttl).
func (g *Gateway) Local(ctx context.Context) (bool, error) { return g.auth.Local(ctx) }

// Aliases returns the configured model aliases, sorted.
func (g *Gateway) Aliases() []string { return g.router.Aliases() }

// Meter returns the in-memory record of the last 2000 requests' metering
// records.
func (g *Gateway) Meter() *metering.Memory { return g.meter }

// cacheStats reads the response cache's counters for the metrics.
func (g *Gateway) cacheStats() metrics.CacheStats {
	ls := g.levers.Stats()
	s := metrics.CacheStats{WritesInFlight: ls.CacheWrites, WritesDropped: ls.CacheWritesDropped}
	if g.cacheGuard != nil {
		gs := g.cacheGuard.Stats()
		s.Timeouts, s.Errors, s.Skipped, s.Opens, s.Open = gs.Timeouts, gs.Errors, gs.Skipped, gs.Opens, gs.Open
	}
	return s
}

// listenHost is the listen address's host, as a request's Host may name
// it (nothing for an unspecified address).
func listenHost(listen string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		return nil
	}
	return []string{host}
}
