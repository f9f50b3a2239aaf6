package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/firstword/firstword/internal/cache"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/budget/window"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/connguard"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/httpapi"
	"github.com/firstword/firstword/internal/levers"
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

// Serve runs the gateway until ctx ends, then shuts down gracefully: it
// stops accepting, lets open streams finish for the shutdown timeout, then
// cancels the rest (they end with an error event and are recorded).
func Serve(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("serve")
	cfgPath := fs.String("config", "", "read the config from `FILE` (default: none; the built-in simulated models and the store ./firstword.db)")
	addr := fs.String("addr", "", "listen on `HOST:PORT` instead of the config's listen (whose default is 127.0.0.1:8080)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noOperands(fs); err != nil {
		return err
	}
	if *addr != "" {
		if _, _, err := net.SplitHostPort(*addr); err != nil {
			return usagef(fs, "--addr: want HOST:PORT, got %q", *addr)
		}
	}
	cfg, err := loadConfig(*cfgPath, env)
	if err != nil {
		return err
	}
	if *addr != "" {
		cfg.Listen = *addr
	}
	logs := newLogBuffer(env.Stderr)
	defer logs.Close()
	log := newLogger(logs, cfg.Log)
	app, err := Build(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer app.Close()
	local, err := app.Auth.Local(ctx)
	if err != nil {
		return err
	}
	if local && !isLoopback(cfg.Listen) {
		return fmt.Errorf("no API keys exist, so firstword would serve anyone as the local user: it only does that on a loopback address, not %s. Create a key with \"firstword keys create --tenant NAME\" or listen on 127.0.0.1", cfg.Listen)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	mode := "keys"
	if local {
		mode = "local (single user, no keys)"
	}
	log.Info("listening", "addr", ln.Addr().String(), "config", cfg.Path, "models", app.Router.Aliases(), "store", cfg.Store.Driver, "store_at", storeLocation(cfg.Store), "auth", mode)
	return app.Serve(ctx, ln, cfg.ShutdownTimeout)
}

// App is a built gateway: everything serve runs, wired.
type App struct {
	Config  *config.Config
	Router  *router.Router
	Meter   *metering.Memory
	Store   store.Store
	Auth    *auth.Authenticator
	Chat    *conversation.Service
	Metrics *metrics.Metrics
	Levers  *levers.Levers
	closers []func() error
	Window  *window.Window
	Tracer  *tracing.Tracer
	Sims    map[string]*sim.Provider
	Handler http.Handler
	Log     *slog.Logger

	transport *http.Transport
	cache     cache.Cache // the response cache, also holding Responses API items
	api       *httpapi.Server
	// cacheGuard bounds the Redis cache (nil for the memory cache).
	cacheGuard *cache.Guarded
}

// Close flushes traces and releases the upstream connection pool and the
// store.
func (a *App) Close() {
	if a.Tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.Tracer.Shutdown(ctx)
		cancel()
	}
	a.transport.CloseIdleConnections()
	if a.Levers != nil {
		// Answers still being written to the cache; each write is bounded
		// by the cache timeout.
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.Levers.Flush(fctx)
		cancel()
	}
	for _, c := range a.closers {
		c()
	}
	if a.Store != nil {
		a.Store.Close()
	}
}

// Build wires a gateway from a config. It opens the store (running its
// migrations) and marks answers left streaming by a crash interrupted.
func Build(ctx context.Context, cfg *config.Config, log *slog.Logger) (*App, error) {
	app := &App{Config: cfg, Log: log, Sims: map[string]*sim.Provider{}, Meter: metering.NewMemory(2000)}
	providers := map[string]provider.Provider{}
	transport := provider.NewTransport()
	app.transport = transport
	client := &http.Client{Transport: transport}
	for name, pc := range cfg.Providers {
		switch pc.Type {
		case "openai":
			providers[name] = openai.New(openai.Config{Name: name, BaseURL: pc.BaseURL, APIKey: pc.APIKey, Headers: pc.Headers, Client: client, MaxEventSize: cfg.MaxEventBytes, MaxTokensField: pc.MaxTokensField})
		case "openai-responses":
			providers[name] = openairesponses.New(openairesponses.Config{Name: name, BaseURL: pc.BaseURL, APIKey: pc.APIKey, Headers: pc.Headers, Client: client, MaxEventSize: cfg.MaxEventBytes})
		case "anthropic":
			providers[name] = anthropic.New(anthropic.Config{Name: name, BaseURL: pc.BaseURL, APIKey: pc.APIKey, Headers: pc.Headers, Client: client,
				MaxEventSize: cfg.MaxEventBytes, Version: pc.AnthropicVersion, DefaultMaxTokens: pc.DefaultMaxTokens, PromptCaching: true})
		case "gemini":
			providers[name] = gemini.New(gemini.Config{Name: name, BaseURL: pc.BaseURL, APIKey: pc.APIKey, Headers: pc.Headers, Client: client, MaxEventSize: cfg.MaxEventBytes})
		case "ollama":
			providers[name] = ollama.New(ollama.Config{Name: name, BaseURL: pc.BaseURL, Headers: bearer(pc.Headers, pc.APIKey), Client: client, MaxLineSize: cfg.MaxEventBytes})
		case "sim":
			sc := sim.Config{Name: name, Seed: pc.Seed}
			if pc.Fault != nil {
				sc.Fault = sim.Fault{Mode: pc.Fault.Mode, After: pc.Fault.After, Probability: pc.Fault.Probability, RetryAfter: pc.Fault.RetryAfter, Factor: pc.Fault.Factor}
			}
			if len(pc.Tiers) > 0 {
				sc.Tiers = map[string]sim.Tier{}
				for tn, t := range pc.Tiers {
					jitter := 0.2
					if t.Jitter != nil {
						jitter = *t.Jitter
					}
					sc.Tiers[tn] = sim.Tier{TTFT: t.TTFT, TokensPerSecond: t.TokensPerSecond, Jitter: jitter, TailProbability: t.TailProbability, TailFactor: t.TailFactor, AnswerTokens: t.AnswerTokens, CachedPrefixSpeedup: 2}
				}
			}
			sp := sim.New(sc)
			app.Sims[name] = sp
			providers[name] = sp
		default:
			return nil, fmt.Errorf("provider %s: type %q is not supported by this build", name, pc.Type)
		}
	}
	rc := router.Config{}
	for _, name := range sortedKeys(cfg.Models) {
		m := cfg.Models[name]
		a := router.Alias{Name: name, Timeout: m.Timeout, FirstTokenTimeout: m.FirstTokenTimeout, MaxAttempts: m.MaxAttempts}
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
			a.Deployments = append(a.Deployments, router.Deployment{ProviderName: d.Provider, Model: d.Model, Provider: providers[d.Provider], Priority: d.Priority, Weight: d.Weight, FirstTokenTimeout: d.FirstTokenTimeout})
		}
		rc.Aliases = append(rc.Aliases, a)
	}
	// PROVIDER/MODEL names: auto serves them in local mode only, which is
	// auth's decision (made without waiting on the store; app.Auth is set
	// below, before any request).
	rc.Passthrough = &router.Passthrough{Providers: providers}
	switch cfg.ModelsPassthrough {
	case "on":
	case "off":
		rc.Passthrough.Allow = func() bool { return false }
	default:
		rc.Passthrough.Allow = func() bool {
			local, err := app.Auth.Local(context.Background())
			return err == nil && local
		}
	}
	r, err := router.New(rc)
	if err != nil {
		return nil, err
	}
	app.Router = r
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

	raw, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// What requests wait on is bounded by the store timeout; the start-up
	// work below (migrations ran in openStore) is not.
	st := store.WithTimeout(raw, cfg.Store.Timeout)
	app.Store = st
	fail := func(err error) (*App, error) {
		for _, c := range app.closers {
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
	app.Auth = auth.New(st, cfg.Auth.CacheTTL)
	app.closers = append(app.closers, func() error { app.Auth.Close(); return nil })
	app.Window = window.New(cfg.Budget.Window, budgetTargets(cfg.Budget), 50)
	usage, err := metering.NewUsageWriter(st, usageOptions(cfg, log))
	if err != nil {
		return fail(err)
	}
	app.closers = append(app.closers, usage.Close)
	meter := metering.Multi{app.Meter, usage, windowMeter{app.Window}, metering.Log{Logger: log}}
	if config.Optional(cfg.Metrics.Enabled) {
		app.Metrics = metrics.New(r.Health)
		app.Metrics.Init(r.Aliases())
		app.Metrics.ObserveUsage(usage.Stats)
		meter = append(meter, app.Metrics)
	}
	if tc := cfg.Tracing; tc.Endpoint != "" {
		tr, err := tracing.New(ctx, tracing.Config{Endpoint: tc.Endpoint, Headers: tc.Headers, ServiceName: tc.ServiceName, SampleRatio: tc.SampleRatio})
		if err != nil {
			return fail(err)
		}
		app.Tracer = tr
		meter = append(meter, tr)
	}
	chatOpt, err := chatOptions(cfg, client, log)
	if err != nil {
		return fail(err)
	}
	lv, err := buildLevers(ctx, cfg, r, app, log)
	if err != nil {
		return fail(err)
	}
	app.Levers = lv
	if app.Metrics != nil {
		app.Metrics.ObserveCache(app.cacheStats)
	}
	chatOpt.Store, chatOpt.Router, chatOpt.Prices, chatOpt.Meter = st, lv, prices, meter
	app.Chat = conversation.New(chatOpt)
	extra := map[string]http.Handler{
		"GET /admin/sim": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			stats := map[string]sim.Stats{}
			for name, sp := range app.Sims {
				stats[name] = sp.Stats()
			}
			writeJSON(w, stats)
		}),
	}
	app.api = httpapi.New(httpapi.Options{
		Router: lv,
		Meter:  meter,
		Auth:   app.Auth,
		Chat:   app.Chat,
		Store:  st,
		Prices: prices,
		Budget: func(tenant, user, surface string, recent int) any {
			return app.Window.Report(time.Now(), tenant, user, surface, recent)
		},
		Streams:         streamGauge(app.Metrics),
		Metrics:         metricsHandler(app.Metrics),
		Logger:          log,
		Heartbeat:       cfg.Heartbeat,
		MaxRequestBytes: cfg.MaxRequestBytes,
		Items:           app.cache,
		Extra:           extra,
		CORS:            httpapi.CORS{AllowedOrigins: cfg.CORS.AllowedOrigins},
		AllowedHosts:    append(listenHost(cfg.Listen), cfg.AllowedHosts...),
		SharedConversations: func(tenant string) bool {
			t := cfg.Tenants[tenant]
			return t != nil && t.SharedConversations
		},
		MaxMessages:    cfg.MaxMessages,
		MaxPromptBytes: cfg.MaxPromptBytes,
	})
	app.Handler = app.api
	return app, nil
}

// Serve serves on ln until ctx ends, then drains for up to drain before
// cancelling what is still open.
func (a *App) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	base, cancelAll := context.WithCancelCause(context.Background())
	defer cancelAll(nil)
	srv := &http.Server{
		Handler: a.Handler,
		// net/http reads 4 KiB past MaxHeaderBytes before it refuses:
		// take it off, so the limit is the configured one.
		MaxHeaderBytes:    max(a.Config.MaxHeaderBytes-4096, 1),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	// Requests framed two ways at once (Content-Length and
	// Transfer-Encoding) are refused with 400 and a closed connection
	// before net/http would serve them as chunked.
	ln = connguard.NewListener(ln, connguard.Options{OnReject: func(remote net.Addr, reason string) {
		a.Log.Warn("refused a request with ambiguous framing", "remote", remote.String(), "reason", reason)
	}})
	go func() { errc <- srv.Serve(ln) }()
	if a.Config.Store.Driver == "postgres" {
		go a.sweep(base)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Unready first: a load balancer polling /readyz stops sending new
	// requests while this replica still serves them.
	a.api.Drain()
	if d := a.Config.ShutdownDelay; d > 0 {
		a.Log.Info("shutting down: unready, still serving", "delay", d.String())
		select {
		case err := <-errc:
			return err
		case <-time.After(d):
		}
	}
	a.Log.Info("shutting down", "drain", drain.String())
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := srv.Shutdown(dctx)
	if errors.Is(err, context.DeadlineExceeded) {
		a.Log.Warn("drain timeout: cancelling open streams")
		cancelAll(chat.ErrShutdown)
		// Give the handlers a moment to write their final events.
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer fcancel()
		if srv.Shutdown(fctx) != nil {
			srv.Close()
		}
		err = nil
	}
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return err
}

// bearer returns headers with an Authorization: Bearer key added (Ollama
// behind an authenticating proxy, or Ollama's hosted API), unless the
// headers set one already.
func bearer(headers map[string]string, key string) map[string]string {
	if key == "" {
		return headers
	}
	out := map[string]string{"Authorization": "Bearer " + key}
	for k, v := range headers {
		if strings.EqualFold(k, "Authorization") {
			delete(out, "Authorization")
		}
		out[k] = v
	}
	return out
}

// cacheStats reads the response cache's counters for the metrics.
func (a *App) cacheStats() metrics.CacheStats {
	ls := a.Levers.Stats()
	s := metrics.CacheStats{WritesInFlight: ls.CacheWrites, WritesDropped: ls.CacheWritesDropped}
	if a.cacheGuard != nil {
		g := a.cacheGuard.Stats()
		s.Timeouts, s.Errors, s.Skipped, s.Opens, s.Open = g.Timeouts, g.Errors, g.Skipped, g.Opens, g.Open
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

// sweep marks answers interrupted whose replica stopped writing them (it
// crashed), so they do not stay "streaming" until some replica restarts.
func (a *App) sweep(ctx context.Context) {
	t := time.NewTicker(conversation.StreamLease / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := a.Store.InterruptStreaming(ctx, time.Now().Add(-conversation.StreamLease), time.Now().UTC()); err != nil {
			a.Log.Warn("sweeping stale streams", "err", err)
		} else if n > 0 {
			a.Log.Warn("answers abandoned by a crashed replica are now interrupted", "count", n)
		}
	}
}
