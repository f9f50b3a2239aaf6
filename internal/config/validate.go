package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/simspec"
)

// Validate reports every problem in the config at once, each with the line
// it is on.
func (c *Config) Validate() error {
	return c.errorList(c.problems())
}

// problems lists every problem of c, each with its line when known.
func (c *Config) problems() []string {
	var errs []string
	bad := func(line int, field, format string, args ...any) {
		msg := fmt.Sprintf("%s: %s", field, fmt.Sprintf(format, args...))
		if line > 0 {
			msg = fmt.Sprintf("line %d: %s", line, msg)
		}
		errs = append(errs, msg)
	}
	// atLeast reports the field at path if v is below least: a number,
	// or a duration that must not be negative (least 0).
	atLeast := func(v, least int64, path ...string) {
		if v < least && least == 0 {
			bad(c.line(path...), strings.Join(path, "."), "must not be negative")
		} else if v < least {
			bad(c.line(path...), strings.Join(path, "."), "must be at least %d", least)
		}
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad(c.line("listen"), "listen", "want HOST:PORT, got %q", c.Listen)
	}
	if l := c.Metrics.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			bad(c.line("metrics", "listen"), "metrics.listen", "want HOST:PORT, got %q", l)
		} else if l == c.Listen {
			bad(c.line("metrics", "listen"), "metrics.listen", "is listen's address: give /metrics a port of its own, or leave it unset to serve it on listen")
		} else if !Optional(c.Metrics.Enabled) {
			bad(c.line("metrics", "listen"), "metrics.listen", "is set but metrics.enabled is false")
		}
	}
	atLeast(int64(c.ShutdownTimeout), 0, "shutdown_timeout")
	if !slices.Contains([]string{"auto", "on", "off"}, c.ModelsPassthrough) {
		bad(c.line("models_passthrough"), "models_passthrough", "want auto, on or off, got %q", c.ModelsPassthrough)
	}
	atLeast(int64(c.Heartbeat), 0, "heartbeat")
	atLeast(c.MaxRequestBytes, 1024, "max_request_bytes")
	atLeast(int64(c.RequestBodyTimeout), 0, "request_body_timeout")
	atLeast(int64(c.MaxEventBytes), 1024, "max_event_bytes")
	atLeast(int64(c.ShutdownDelay), 0, "shutdown_delay")
	atLeast(int64(c.MaxHeaderBytes), 4096, "max_header_bytes")
	atLeast(int64(c.MaxMessages), 1, "max_messages")
	atLeast(int64(c.MaxPromptBytes), 1024, "max_prompt_bytes")
	for _, o := range c.CORS.AllowedOrigins {
		if o == "*" {
			continue
		}
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad(c.line("cors", "allowed_origins"), "cors.allowed_origins", "want scheme://host[:port] or *, got %q", o)
		}
	}
	if c.CORS.AllowCredentials && slices.Contains(c.CORS.AllowedOrigins, "*") {
		bad(c.line("cors", "allow_credentials"), "cors.allow_credentials", "cannot be true with the origin \"*\": list the origins")
	}
	if c.CORS.AllowCredentials && slices.Contains(c.CORS.AllowedHeaders, "*") {
		bad(c.line("cors", "allowed_headers"), "cors.allowed_headers", "\"*\" is a header name, not a wildcard, with allow_credentials: list the headers")
	}
	for _, h := range c.CORS.AllowedHeaders {
		if name := strings.TrimSuffix(h, "*"); h != "*" && !validHeaderName(name) {
			bad(c.line("cors", "allowed_headers"), "cors.allowed_headers", "want header names, prefixes ending in * (x-stainless-*) or *, got %q", h)
		}
	}
	for _, m := range c.CORS.AllowedMethods {
		if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " ,") {
			bad(c.line("cors", "allowed_methods"), "cors.allowed_methods", "want method names in upper case (GET, DELETE...), got %q", m)
		}
	}
	atLeast(int64(c.Chat.IdempotencyWindow), 0, "chat", "idempotency_window")
	atLeast(int64(c.CORS.MaxAge), 0, "cors", "max_age")
	atLeast(int64(c.Store.Timeout), 0, "store", "timeout")
	if c.Cache.Timeout < 0 || c.Cache.Cooldown < 0 || c.Cache.Failures < 0 {
		bad(c.line("cache"), "cache", "timeout, failures and cooldown must not be negative")
	}
	c.limitProblems(bad)
	if c.Usage.Queue < 0 || c.Usage.RetryMax < 0 {
		bad(c.line("usage"), "usage", "queue and retry_max must not be negative")
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad(c.line("log", "level"), "log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	if !slices.Contains([]string{"json", "text"}, c.Log.Format) {
		bad(c.line("log", "format"), "log.format", "want json or text, got %q", c.Log.Format)
	}
	switch c.Store.Driver {
	case "sqlite":
		if c.Store.URL != "" || c.Store.URLEnv != "" {
			bad(c.line("store"), "store", "url and url_env apply to driver postgres")
		}
	case "postgres":
		if c.Store.URL == "" && c.Store.URLEnv == "" {
			bad(c.line("store", "driver"), "store.url", "required for driver postgres (or url_env)")
		}
	default:
		bad(c.line("store", "driver"), "store.driver", "want sqlite or postgres, got %q", c.Store.Driver)
	}
	if c.Chat.GuardMode != "parallel" && c.Chat.GuardMode != "before" {
		bad(c.line("chat", "guard_mode"), "chat.guard_mode", "want parallel or before, got %q", c.Chat.GuardMode)
	}
	if c.Chat.CheckpointInterval < 0 || c.Chat.CheckpointTokens < 0 {
		bad(c.line("chat"), "chat", "checkpoint_interval and checkpoint_tokens must not be negative")
	}
	if g := c.Guard; g != nil {
		for field, a := range map[string]string{"blocklist_action": g.BlocklistAction, "injection_action": g.InjectionAction, "pii_action": g.PIIAction} {
			if a != "" && a != "block" && a != "redact" && a != "flag" {
				bad(c.line("guard", field), "guard."+field, "want block, redact or flag, got %q", a)
			}
		}
		if g.HTTP != nil && g.HTTP.URL == "" {
			bad(c.line("guard", "http"), "guard.http.url", "required")
		}
	}
	if r := c.Sources.Retrieval; r != nil {
		if r.Dir == "" {
			bad(c.line("sources", "retrieval"), "sources.retrieval.dir", "required")
		} else if st, err := os.Stat(r.Dir); err != nil || !st.IsDir() {
			bad(c.line("sources", "retrieval", "dir"), "sources.retrieval.dir", "%q is not a readable directory", r.Dir)
		}
	}
	names := map[string]bool{}
	for i, l := range c.Sources.Lookups {
		f := fmt.Sprintf("sources.lookups[%d]", i)
		if l == nil || l.Name == "" || l.URL == "" {
			bad(c.line("sources", "lookups"), f, "name and url are required")
			continue
		}
		if names[l.Name] || l.Name == "history" || l.Name == "retrieval" || l.Name == "guard" {
			bad(c.line("sources", "lookups"), f+".name", "%q is taken", l.Name)
		}
		names[l.Name] = true
	}
	checkTarget := func(field string, t Target, path ...string) {
		if len(t) != 1 {
			bad(c.line(path...), field, "want exactly one of p50, p95, p99, e.g. {p95: 1s}")
			return
		}
		if _, v, ok := t.Percentile(); !ok || v <= 0 {
			bad(c.line(path...), field, "want exactly one of p50, p95, p99 with a positive duration")
		}
	}
	checkTarget("budget.ttfw", c.Budget.TTFW, "budget", "ttfw")
	checkTarget("budget.ttc", c.Budget.TTC, "budget", "ttc")
	for name, t := range c.Budget.Stages {
		checkTarget("budget.stages."+name, t, "budget", "stages", name)
	}
	if c.Budget.Window < time.Minute {
		bad(c.line("budget", "window"), "budget.window", "must be at least 1m")
	}
	if tr := c.Tracing; tr.Endpoint != "" {
		if u, err := url.Parse(tr.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(c.line("tracing", "endpoint"), "tracing.endpoint", "want an http(s) URL, got %q", tr.Endpoint)
		}
		if tr.SampleRatio < 0 || tr.SampleRatio > 1 {
			bad(c.line("tracing", "sample_ratio"), "tracing.sample_ratio", "must be between 0 and 1")
		}
	}
	switch c.Cache.Driver {
	case "memory":
	case "redis":
		if !c.Cache.Named() {
			bad(c.line("cache", "driver"), "cache.url", "required for driver redis (or url_env, or addrs)")
		}
		c.redisProblems("cache", c.Cache.Redis, bad)
	default:
		bad(c.line("cache", "driver"), "cache.driver", "want memory or redis, got %q", c.Cache.Driver)
	}
	switch r := c.Resume; r.Journal {
	case "memory":
	case "redis":
		if !r.Named() {
			bad(c.line("resume", "journal"), "resume.url", "required for journal redis (or url_env, addrs, or a redis cache)")
		}
		c.redisProblems("resume", r.Redis, bad)
	default:
		bad(c.line("resume", "journal"), "resume.journal", "want memory or redis, got %q", r.Journal)
	}
	if g := c.Resume.Grace; g != nil && *g < 0 || c.Resume.Lease < 0 || c.Resume.Retain < 0 || c.Resume.MaxAnswerBytes < 0 || c.Resume.MaxBytes < 0 || c.Resume.FlushInterval < 0 {
		bad(c.line("resume"), "resume", "durations and sizes must not be negative")
	}
	if c.Cache.ReplayTokensPerSecond < 0 {
		bad(c.line("cache", "replay_tokens_per_second"), "cache.replay_tokens_per_second", "must not be negative")
	}
	for name, p := range c.Prices {
		if p.Input < 0 || p.Output < 0 || p.CachedInput < 0 || p.CacheWriteInput < 0 {
			bad(c.line("prices", name), "prices."+name, "prices must not be negative")
		}
	}
	if len(c.Models) == 0 {
		bad(c.line("models"), "models", "at least one model alias is required")
	}
	for _, name := range sortedKeys(c.Providers) {
		p := c.Providers[name]
		f := "providers." + name
		if p == nil {
			bad(c.line("providers", name), f, "empty provider")
			continue
		}
		switch p.Type {
		case "":
			bad(c.line("providers", name), f+".type", "required (one of %s)", strings.Join(ProviderTypes, ", "))
		case "sim":
			if p.Fault != nil {
				if err := p.Fault.Validate(); err != nil {
					bad(c.line("providers", name, "fault"), f+".fault", "%v", err)
				}
			}
			for tn, t := range p.Tiers {
				if t == nil || t.TTFT <= 0 || t.TokensPerSecond <= 0 {
					bad(c.line("providers", name, "tiers", tn), f+".tiers."+tn, "ttft and tokens_per_second must be positive")
				} else if t.PrefillTokensPerSecond < 0 {
					bad(c.line("providers", name, "tiers", tn), f+".tiers."+tn, "prefill_tokens_per_second must not be negative")
				} else if t.CachedPrefixSpeedup != 0 && t.CachedPrefixSpeedup < 1 {
					bad(c.line("providers", name, "tiers", tn), f+".tiers."+tn, "cached_prefix_speedup must be at least 1 (how many times faster a cached prefix is read)")
				} else if t.ThinkingTime < 0 || t.ThinkingTokensPerSecond < 0 {
					bad(c.line("providers", name, "tiers", tn), f+".tiers."+tn, "thinking_time and thinking_tokens_per_second must not be negative")
				}
			}
		default:
			if !slices.Contains(ProviderTypes, p.Type) {
				bad(c.line("providers", name, "type"), f+".type", "unknown type %q (want one of %s)", p.Type, strings.Join(ProviderTypes, ", "))
				continue
			}
			if p.BaseURL == "" {
				bad(c.line("providers", name), f+".base_url", "required for type %s", p.Type)
			} else if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(c.line("providers", name, "base_url"), f+".base_url", "want an http(s) URL, got %q", p.BaseURL)
			}
		}
		if p.Type != "sim" && (p.Fault != nil || p.Tiers != nil || p.Seed != 0) {
			bad(c.line("providers", name), f, "seed, fault and tiers apply to type sim only")
		}
		if p.Type != "anthropic" && (p.AnthropicVersion != "" || p.DefaultMaxTokens != 0) {
			bad(c.line("providers", name), f, "anthropic_version and default_max_tokens apply to type anthropic only")
		}
		if p.Type == "openai" && p.MaxTokensField != "max_tokens" && p.MaxTokensField != "max_completion_tokens" {
			bad(c.line("providers", name, "max_tokens_field"), f+".max_tokens_field", "want max_tokens or max_completion_tokens")
		}
		if p.Type == "openai-responses" && p.MaxTokensField != "" {
			bad(c.line("providers", name, "max_tokens_field"), f+".max_tokens_field", "applies to type openai only (the Responses API always takes max_output_tokens)")
		}
	}
	for _, name := range sortedKeys(c.Models) {
		m := c.Models[name]
		f := "models." + name
		if m == nil {
			bad(c.line("models", name), f, "empty model")
			continue
		}
		atLeast(int64(m.Timeout), 0, "models", name, "timeout")
		atLeast(int64(m.FirstTokenTimeout), 0, "models", name, "first_token_timeout")
		if m.Timeout > 0 && m.FirstTokenTimeout > m.Timeout {
			bad(c.line("models", name, "first_token_timeout"), f+".first_token_timeout", "%s is longer than the timeout %s", m.FirstTokenTimeout, m.Timeout)
		}
		if a := m.AdaptiveFirstToken; a != nil {
			if a.Multiplier <= 0 {
				bad(c.line("models", name, "adaptive_first_token"), f+".adaptive_first_token.multiplier", "must be positive")
			}
			if a.Max > 0 && a.Min > a.Max {
				bad(c.line("models", name, "adaptive_first_token"), f+".adaptive_first_token", "min is above max")
			}
		}
		if b := m.Breaker; b != nil && (b.MaxEjectedShare < 0 || b.MaxEjectedShare > 1) {
			bad(c.line("models", name, "breaker", "max_ejected_share"), f+".breaker.max_ejected_share", "must be between 0 and 1")
		}
		if m.MaxTokens < 0 || m.DefaultMaxTokens < 0 {
			bad(c.line("models", name, "max_tokens"), f+".max_tokens", "max_tokens and default_max_tokens must not be negative")
		}
		if th := m.Thinking; th != nil {
			if th.Effort != "" && !slices.Contains(chat.Efforts, th.Effort) {
				bad(c.line("models", name, "thinking", "effort"), f+".thinking.effort", "%q: want one of %s", th.Effort, strings.Join(chat.Efforts, ", "))
			}
			if th.MaxBudgetTokens < 0 || (th.MaxBudgetTokens > 0 && th.MaxBudgetTokens < 1024) {
				bad(c.line("models", name, "thinking", "max_budget_tokens"), f+".thinking.max_budget_tokens", "%d: want 0 (no cap) or at least 1024, the smallest budget providers take", th.MaxBudgetTokens)
			}
		}
		switch m.OnStreamFailure {
		case "", "continue", "end":
		default:
			bad(c.line("models", name, "on_stream_failure"), f+".on_stream_failure", "%q: want continue or end", m.OnStreamFailure)
		}
		atLeast(int64(m.MaxContinuations), 0, "models", name, "max_continuations")
		atLeast(int64(m.StallTimeout), 0, "models", name, "stall_timeout")
		if m.MaxTokens > 0 && m.DefaultMaxTokens > m.MaxTokens {
			bad(c.line("models", name, "default_max_tokens"), f+".default_max_tokens", "%d is above max_tokens %d", m.DefaultMaxTokens, m.MaxTokens)
		}
		for i, r := range m.Rules {
			rf := fmt.Sprintf("%s.rules[%d]", f, i)
			switch {
			case r == nil || r.Use == "":
				bad(c.line("models", name, "rules"), rf+".use", "required")
			case r.Use == name:
				bad(c.line("models", name, "rules"), rf+".use", "a rule cannot route an alias to itself")
			case c.Models[r.Use] == nil:
				bad(c.line("models", name, "rules"), rf+".use", "no model alias named %q", r.Use)
			case r.MaxInputTokens == 0 && len(r.Keywords) == 0 && r.Hint == "" && r.Route == "":
				bad(c.line("models", name, "rules"), rf, "needs at least one condition (max_input_tokens, keywords, hint, route)")
			}
		}
		if len(m.Deployments) == 0 {
			bad(c.line("models", name), f+".deployments", "at least one deployment is required")
		}
		for i, d := range m.Deployments {
			df := fmt.Sprintf("%s.deployments[%d]", f, i)
			if d == nil {
				bad(m.line, df, "empty deployment")
				continue
			}
			if d.Provider == "" {
				bad(d.line, df+".provider", "required")
			} else if _, ok := c.Providers[d.Provider]; !ok {
				bad(d.line, df+".provider", "no provider named %q (have: %s)", d.Provider, strings.Join(sortedKeys(c.Providers), ", "))
			}
			if d.Model == "" {
				bad(d.line, df+".model", "required")
			} else if p := c.Providers[d.Provider]; p != nil && p.Type == "sim" && !p.hasTier(d.Model) {
				bad(d.line, df+".model", "provider %q is a sim: want one of its tiers (%s), got %q", d.Provider, strings.Join(p.tierNames(), ", "), d.Model)
			}
			if d.Weight < 0 {
				bad(d.line, df+".weight", "must not be negative")
			}
			if d.FirstTokenTimeout < 0 {
				bad(d.line, df+".first_token_timeout", "must not be negative")
			}
			switch d.Continuation {
			case "", "prefill", "instruct":
			default:
				bad(d.line, df+".continuation", "%q: want prefill or instruct", d.Continuation)
			}
		}
	}
	return errs
}

// line returns the line of the key at path in the file (or of the deepest
// key of path that exists), or 0.
func (c *Config) line(path ...string) int {
	if c.root == nil || len(c.root.Content) == 0 {
		return 0
	}
	n, line := c.root.Content[0], 0
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				line = n.Content[i].Line
				n = n.Content[i+1]
				found = true
				break
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// node returns the value node at path, or nil.
func (c *Config) node(path ...string) *yaml.Node {
	if c.root == nil || len(c.root.Content) == 0 {
		return nil
	}
	n := c.root.Content[0]
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// locate records the line of each model and deployment for error messages.
func (c *Config) locate() {
	for name, m := range c.Models {
		if m == nil {
			continue
		}
		m.line = c.line("models", name)
		seq := c.node("models", name, "deployments")
		for i, d := range m.Deployments {
			if d == nil {
				continue
			}
			d.line = m.line
			if seq != nil && seq.Kind == yaml.SequenceNode && i < len(seq.Content) {
				d.line = seq.Content[i].Line
			}
		}
	}
	for name, p := range c.Providers {
		if p != nil {
			p.line = c.line("providers", name)
		}
	}
}

// hasTier reports whether a sim provider serves model: a built-in or
// configured tier, optionally prefixed "sim-".
func (p *Provider) hasTier(model string) bool {
	return slices.Contains(p.tierNames(), strings.TrimPrefix(model, "sim-"))
}

func (p *Provider) tierNames() []string {
	names := slices.Sorted(maps.Keys(simspec.Tiers))
	for _, name := range slices.Sorted(maps.Keys(p.Tiers)) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// limitProblems checks the limits section and the tenants' limits and
// budgets, reporting each problem with bad.
func (c *Config) limitProblems(bad func(line int, field, format string, args ...any)) {
	switch l := c.Limits; l.Driver {
	case "memory":
	case "redis":
		if !l.Named() {
			bad(c.line("limits", "driver"), "limits.url", "required for driver redis (or url_env, addrs, or a redis cache)")
		}
		c.redisProblems("limits", l.Redis, bad)
	default:
		bad(c.line("limits", "driver"), "limits.driver", "want memory or redis, got %q", l.Driver)
	}
	if l := c.Limits; l.Timeout < 0 || l.Cooldown < 0 || l.Refresh < 0 || l.Lease < 0 || l.Period < 0 {
		bad(c.line("limits"), "limits", "durations must not be negative")
	}
	if c.Limits.Period > 0 && c.Limits.Period < 100*time.Millisecond {
		bad(c.line("limits", "period"), "limits.period", "must be at least 100ms")
	}
	for _, name := range sortedKeys(c.Tenants) {
		t := c.Tenants[name]
		if t == nil {
			continue
		}
		if r := t.Limits; r != nil && (r.RequestsPerMinute < 0 || r.TokensPerMinute < 0 || r.ConcurrentStreams < 0) {
			bad(c.line("tenants", name, "limits"), "tenants."+name+".limits", "must not be negative (0 is no limit)")
		}
		if r := t.Limits; r != nil && (r.RequestsPerMinute > maxLimit || r.TokensPerMinute > maxLimit || r.ConcurrentStreams > maxLimit) {
			bad(c.line("tenants", name, "limits"), "tenants."+name+".limits", "must be at most 1000000000")
		}
		if b := t.Budget; b != nil {
			if b.USDPerDay < 0 || b.USDPerMonth < 0 || b.TokensPerDay < 0 || b.TokensPerMonth < 0 {
				bad(c.line("tenants", name, "budget"), "tenants."+name+".budget", "must not be negative (0 is no cap)")
			}
			if b.SoftThreshold < 0 || b.SoftThreshold > 1 {
				bad(c.line("tenants", name, "budget", "soft_threshold"), "tenants."+name+".budget.soft_threshold", "want a fraction between 0 and 1, got %g", b.SoftThreshold)
			}
		}
	}
}

// maxLimit bounds a rate or concurrency limit (limits.MaxLimit).
const maxLimit = 1_000_000_000

// validHeaderName reports whether name is an HTTP header name (an RFC 9110
// token; without "*", which only ends a prefix pattern).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// redisProblems checks a section's Redis deployment, reporting each
// problem with bad.
func (c *Config) redisProblems(section string, r Redis, bad func(line int, field, format string, args ...any)) {
	if r.Cluster && r.SentinelMaster != "" {
		bad(c.line(section, "cluster"), section+".cluster", "a Redis Cluster has no Sentinel master: set cluster or sentinel_master, not both")
	}
	for _, a := range r.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			bad(c.line(section, "addrs"), section+".addrs", "want host:port, got %q", a)
		}
	}
	if len(r.Addrs) > 0 && !r.Cluster && r.SentinelMaster == "" {
		bad(c.line(section, "addrs"), section+".addrs", "more servers are for a cluster (cluster: true) or sentinels (sentinel_master); one server is url")
	}
}
