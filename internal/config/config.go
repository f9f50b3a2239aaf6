// Package config is firstword's configuration file: one typed struct,
// decoded strictly from YAML (unknown keys are errors), with defaults in one
// function and a Validate that reports every problem at once, each with its
// line. The field comments here are the user documentation of the schema;
// docs/config.md is generated from the same words.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/firstword/firstword/internal/simspec"
)

// Config is the whole file.
type Config struct {
	// Listen is the address to serve on (default 127.0.0.1:8080).
	Listen string `yaml:"listen"`
	// ShutdownTimeout is how long open streams may run on after SIGTERM
	// before they are cancelled (default 30s).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// ShutdownDelay is how long /readyz answers 503 after SIGTERM while
	// new requests are still served, before the listener closes, so that a
	// load balancer stops sending first (default 0; e.g. 5s behind one).
	ShutdownDelay time.Duration `yaml:"shutdown_delay"`
	// Heartbeat is the interval of SSE comment heartbeats while the
	// upstream is silent (default 10s).
	Heartbeat time.Duration `yaml:"heartbeat"`
	// MaxRequestBytes bounds a request body (default 4 MiB).
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// RequestBodyTimeout bounds how long a request body may take to
	// arrive after its headers; a body trickled longer gets 408 and a
	// closed connection (default 10s, well below the 30s that clients'
	// own timeouts often use). The stream that answers is not bound by it.
	RequestBodyTimeout time.Duration `yaml:"request_body_timeout"`
	// MaxEventBytes bounds one upstream event (default 1 MiB).
	MaxEventBytes int `yaml:"max_event_bytes"`
	// MaxHeaderBytes bounds a request's header block; larger ones get 431
	// (default 32 KiB).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxMessages bounds the messages of one request (default 2048);
	// MaxPromptBytes bounds their text, summed (default 2 MiB). Requests
	// over either get 413 naming the limit.
	MaxMessages    int `yaml:"max_messages"`
	MaxPromptBytes int `yaml:"max_prompt_bytes"`
	// AllowedHosts are host names (besides loopback names and the listen
	// address) that requests may name in their Host header while the
	// gateway runs in local mode, e.g. a name in /etc/hosts. Others get
	// 403: a page on another site could otherwise reach the local API
	// through DNS rebinding.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// CORS lets browser apps on other origins call the API.
	CORS CORS `yaml:"cors"`
	// Tenants are per-tenant settings, by tenant ID.
	Tenants map[string]*Tenant `yaml:"tenants"`
	// Usage tunes how usage rows reach the store.
	Usage Usage `yaml:"usage"`
	// Log configures the structured request log.
	Log Log `yaml:"log"`
	// Providers are the upstreams, by name.
	Providers map[string]*Provider `yaml:"providers"`
	// Models are the aliases clients ask for, by name.
	Models map[string]*Model `yaml:"models"`
	// ModelsPassthrough lets clients ask for PROVIDER/MODEL where an alias
	// would go: a configured provider's name and any model of its upstream
	// (openai/gpt-4o-mini, sim/small), served with an alias's defaults
	// (timeouts, breaker, response cache, coalescing) and measured under
	// that name. auto (default): on while the gateway runs in local mode,
	// off once an API key exists; on; off. GET /v1/models lists each
	// configured deployment's PROVIDER/MODEL while they are on. At most 64
	// such names are in use at once; an alias of the same name wins.
	ModelsPassthrough string `yaml:"models_passthrough"`
	// Store is where conversations, keys and usage are kept.
	Store Store `yaml:"store"`
	// Auth tunes API-key checks.
	Auth Auth `yaml:"auth"`
	// Chat configures the /v1/chat pipeline.
	Chat Chat `yaml:"chat"`
	// Guard is the input guardrail of /v1/chat: off when a config file
	// has no guard section (guard: {} turns it on with its defaults); on,
	// with its defaults, in the built-in config.
	Guard *Guard `yaml:"guard"`
	// Sources are the context sources of /v1/chat, fetched in parallel.
	Sources Sources `yaml:"sources"`
	// Prices are USD per million tokens, keyed by deployment
	// ("provider/model") or by upstream model name.
	Prices map[string]Price `yaml:"prices"`
	// Metrics serves Prometheus metrics at /metrics.
	Metrics Metrics `yaml:"metrics"`
	// Tracing exports OpenTelemetry spans (off unless an endpoint is set).
	Tracing Tracing `yaml:"tracing"`
	// Budget is the latency budget: targets and the report's window.
	Budget Budget `yaml:"budget"`
	// Cache is the response cache's storage.
	Cache Cache `yaml:"cache"`
	// Resume makes /v1/chat answers resumable (docs/resume.md).
	Resume Resume `yaml:"resume"`
	// Limits says where the tenants' rate limits and concurrency caps
	// are counted (docs/security.md).
	Limits Limits `yaml:"limits"`

	// Path is the file the config was read from ("" for the built-in).
	Path string `yaml:"-"`
	root *yaml.Node
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error (default info).
	Level string `yaml:"level"`
	// Format is json or text (default json).
	Format string `yaml:"format"`
}

// Provider is one upstream.
type Provider struct {
	// Type is the wire format: openai (any OpenAI-compatible server),
	// openai-responses (OpenAI's Responses API, POST {base_url}/responses,
	// sent with store: false), anthropic, gemini, ollama (native
	// /api/chat), or sim (built in).
	Type string `yaml:"type"`
	// BaseURL is the API root, e.g. https://api.openai.com/v1.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the API key. The
	// key itself is never written in the file or the logs. Unset is fine
	// for servers that need no key.
	APIKeyEnv string `yaml:"api_key_env"`
	// Headers are sent with every request. Values may reference the
	// environment as ${NAME}.
	Headers map[string]string `yaml:"headers"`
	// MaxTokensField is the request field an openai upstream takes for
	// the answer cap: max_tokens (default) or max_completion_tokens.
	MaxTokensField string `yaml:"max_tokens_field"`
	// AnthropicVersion is the anthropic-version header (default
	// 2023-06-01); DefaultMaxTokens the max_tokens sent to Anthropic when a
	// request sets none (it is required there; default 4096).
	AnthropicVersion string `yaml:"anthropic_version"`
	DefaultMaxTokens int    `yaml:"default_max_tokens"`
	// Seed makes a sim provider repeatable (default 1).
	Seed uint64 `yaml:"seed"`
	// Fault makes a sim provider fail on purpose: mode is one of 429,
	// 500, 503, hang, error_mid, stall_mid, slow, truncate,
	// error_thinking; after is the token count for mid-stream faults (the
	// thinking tokens for error_thinking); probability (0-1) applies it to a
	// share of requests.
	Fault *Fault `yaml:"fault"`
	// Tiers overrides or adds sim tiers by name.
	Tiers map[string]*Tier `yaml:"tiers"`

	// APIKey is resolved from APIKeyEnv at load time.
	APIKey string `yaml:"-"`
	line   int
}

// Fault is a sim fault, as internal/simspec defines it.
type Fault = simspec.Fault

// Tier is a sim model tier.
type Tier struct {
	// TTFT is the median time to first token.
	TTFT time.Duration `yaml:"ttft"`
	// TokensPerSecond is the median generation rate.
	TokensPerSecond float64 `yaml:"tokens_per_second"`
	// Jitter is the log-normal sigma of timings (default 0.2).
	Jitter *float64 `yaml:"jitter"`
	// TailProbability and TailFactor add a heavy tail: that share of
	// requests has its TTFT multiplied by the factor.
	TailProbability float64 `yaml:"tail_probability"`
	TailFactor      float64 `yaml:"tail_factor"`
	// AnswerTokens is the typical answer length (default 200).
	AnswerTokens int `yaml:"answer_tokens"`
	// ThinkingTime is how long the model thinks before it answers, from
	// its first thinking delta (at its TTFT) to its first answer token
	// (default 0: it does not think; the built-in reasoner thinks 1.5s).
	ThinkingTime time.Duration `yaml:"thinking_time"`
	// ThinkingTokensPerSecond is the rate of its thinking deltas
	// (default 100).
	ThinkingTokensPerSecond float64 `yaml:"thinking_tokens_per_second"`
	// PrefillTokensPerSecond, when set, adds the time to read the prompt
	// to the TTFT: uncached input tokens at this rate, cached ones
	// CachedPrefixSpeedup times faster (default 0: the TTFT does not grow
	// with the prompt).
	PrefillTokensPerSecond float64 `yaml:"prefill_tokens_per_second"`
	// CachedPrefixSpeedup is how much faster a cached prefix is read
	// (default 2).
	CachedPrefixSpeedup float64 `yaml:"cached_prefix_speedup"`
}

// Model is an alias and how to serve it.
type Model struct {
	// Timeout is the overall per-request timeout, shared by every
	// attempt, retry and fallback (default 20s). When it passes after the
	// first token, the answer is cut and what was written is kept.
	Timeout time.Duration `yaml:"timeout"`
	// FirstTokenTimeout is the default time each deployment has to send
	// its first visible token before the next one is tried (default 5s).
	FirstTokenTimeout time.Duration `yaml:"first_token_timeout"`
	// AdaptiveFirstToken derives the first-token timeout from the
	// deployment's observed p99 TTFT once there are enough samples.
	AdaptiveFirstToken *Adaptive `yaml:"adaptive_first_token"`
	// MaxAttempts bounds attempts per request (default two per
	// deployment, at most 6).
	MaxAttempts int `yaml:"max_attempts"`
	// Hedge starts the next deployment when the first is slow to start.
	Hedge *Hedge `yaml:"hedge"`
	// Breaker tunes the per-deployment circuit breaker.
	Breaker *Breaker `yaml:"breaker"`
	// Deployments are tried in order of priority; equal priorities are
	// balanced by measured latency.
	Deployments []*Deployment `yaml:"deployments"`
	// SystemPrompt replaces chat.system_prompt for this alias on /v1/chat.
	SystemPrompt string `yaml:"system_prompt"`
	// MaxTokens caps the answer length of every request to this alias
	// (0: no cap); DefaultMaxTokens applies when the client sets none.
	// Clients may ask for less, never more.
	MaxTokens        int `yaml:"max_tokens"`
	DefaultMaxTokens int `yaml:"default_max_tokens"`
	// Brevity is appended to the system prompt ("Answer in at most three
	// sentences.").
	Brevity string `yaml:"brevity"`
	// PromptCaching marks the stable prompt prefix for providers with
	// explicit prompt caching (Anthropic's cache_control).
	PromptCaching bool `yaml:"prompt_caching"`
	// Cache is the response cache policy (see the top-level cache).
	Cache *ModelCache `yaml:"cache"`
	// Coalesce shares one upstream stream between identical cacheable
	// requests in flight (default true).
	Coalesce *bool `yaml:"coalesce"`
	// Rules send some requests to another alias, e.g. a smaller tier.
	Rules []*Rule `yaml:"rules"`
	// Thinking sets what this alias's requests ask of a thinking model's
	// thinking, and caps it.
	Thinking *Thinking `yaml:"thinking"`
	// OnStreamFailure is what an answer that breaks after its first token
	// (the upstream failed, sent garbage or stalled) does: continue (the
	// default) asks the next deployment to continue it in the same
	// stream; end ends it with the error, as before. An answer that
	// streamed a tool call, or asked for several choices, always ends.
	OnStreamFailure string `yaml:"on_stream_failure"`
	// MaxContinuations bounds the continuations of one request (default 2).
	MaxContinuations int `yaml:"max_continuations"`
	// StallTimeout: after the first answer token, this long without
	// progress (text, tool call, thinking, finish, usage; keep-alives are
	// not progress) is a failure that a continuation takes over (default
	// 15s; with on_stream_failure: continue only).
	StallTimeout time.Duration `yaml:"stall_timeout"`
	// ContinuationPrompt is the instruction sent to upstreams that take no
	// prefill, asking for the rest of the answer (default: see
	// docs/continuation.md).
	ContinuationPrompt string `yaml:"continuation_prompt"`

	line int
}

// Thinking is an alias's policy for a model's thinking (reasoning).
type Thinking struct {
	// Effort is the effort asked when the client asks none: none,
	// minimal, low, medium or high ("": the upstream's default).
	Effort string `yaml:"effort"`
	// MaxBudgetTokens caps the thinking budget a request may ask (0: no
	// cap): the lesson's "ask for less" lever applied to thinking.
	MaxBudgetTokens int `yaml:"max_budget_tokens"`
	// Show (default true) streams the thinking to clients; false still
	// measures and bills it but sends none.
	Show *bool `yaml:"show"`
}

// ModelCache is an alias's response cache policy.
type ModelCache struct {
	// Enabled (default true) caches deterministic requests (temperature
	// 0); Nondeterministic caches every request.
	Enabled          *bool         `yaml:"enabled"`
	Nondeterministic bool          `yaml:"nondeterministic"`
	TTL              time.Duration `yaml:"ttl"`
}

// Rule routes matching requests to another alias. Every condition set must
// hold; the first matching rule wins.
type Rule struct {
	Name string `yaml:"name"`
	// MaxInputTokens: prompts of at most this many tokens (estimated).
	MaxInputTokens int `yaml:"max_input_tokens"`
	// Keywords in the last user message.
	Keywords []string `yaml:"keywords"`
	// Hint is the client's X-Firstword-Hint (e.g. fast); Route its
	// X-Firstword-Route-Tag.
	Hint  string `yaml:"hint"`
	Route string `yaml:"route"`
	// Use is the alias to send the request to.
	Use string `yaml:"use"`
}

// Cache is where the response cache lives.
type Cache struct {
	// Driver is memory (default) or redis (shared by replicas).
	Driver string `yaml:"driver"`
	// MaxBytes bounds the memory cache (default 64 MiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// Redis is the server, for driver redis.
	Redis `yaml:",inline"`
	// ReplayTokensPerSecond paces cache hits (0: at once).
	ReplayTokensPerSecond float64 `yaml:"replay_tokens_per_second"`
	// Timeout bounds one cache read or write (default 50ms): a slower
	// read is a miss, and writes never delay an answer's ending.
	Timeout time.Duration `yaml:"timeout"`
	// After Failures failed or timed-out operations in a row (default 3),
	// the cache is skipped for Cooldown (default 10s), then tried again.
	Failures int           `yaml:"failures"`
	Cooldown time.Duration `yaml:"cooldown"`
}

// Redis names a Redis deployment: one server, a master that Sentinel
// watches, or a Redis Cluster.
type Redis struct {
	// URL or URLEnv name the server (redis://host:6379/0), or with
	// SentinelMaster a sentinel, or with Cluster a node of the cluster.
	URL    string `yaml:"url"`
	URLEnv string `yaml:"url_env"`
	// Addrs are more sentinels, or more cluster nodes (host:port).
	Addrs []string `yaml:"addrs"`
	// SentinelMaster is the name of the master Sentinel watches.
	SentinelMaster string `yaml:"sentinel_master"`
	// Cluster: the servers are nodes of a Redis Cluster.
	Cluster bool `yaml:"cluster"`

	// ResolvedURL is URL or the value of URLEnv.
	ResolvedURL string `yaml:"-"`
}

// Named reports whether r names a server.
func (r Redis) Named() bool { return r.URL != "" || r.URLEnv != "" || len(r.Addrs) > 0 }

// Resume configures resumable /v1/chat answers: the journal of each
// answer's events, the grace window after a dropped connection and the
// lease that tells a live answer from one whose replica died.
type Resume struct {
	// Journal is memory (default: this process only) or redis (shared:
	// a resume or a stop on any replica reaches the answer).
	Journal string `yaml:"journal"`
	// Redis is the journal's server; default: the cache's, when
	// cache.driver is redis.
	Redis `yaml:",inline"`
	// Grace is how long an answer goes on after its client dropped, for
	// a resume to pick it up (default 15s; 0 cancels at once).
	Grace *time.Duration `yaml:"grace"`
	// Lease is how long an answer whose replica stopped renewing it
	// stays streaming before it is interrupted (default 3s).
	Lease time.Duration `yaml:"lease"`
	// Retain is how long an ended answer's journal is kept (default
	// 10m); after it a resume replays the stored message.
	Retain time.Duration `yaml:"retain"`
	// MaxAnswerBytes and MaxBytes bound the memory journal per answer
	// (default 4 MiB) and in all (default 256 MiB).
	MaxAnswerBytes int64 `yaml:"max_answer_bytes"`
	MaxBytes       int64 `yaml:"max_bytes"`
	// FlushInterval is how often, at most, the Redis journal writes an
	// answer's events, all since its last write in one entry (default
	// 250ms; sooner for its first and last write and every 64 events).
	// A resume on another replica sees events up to about this late.
	FlushInterval time.Duration `yaml:"flush_interval"`
}

// GraceWindow is Grace with its default.
func (r Resume) GraceWindow() time.Duration {
	if r.Grace == nil {
		return 15 * time.Second
	}
	return *r.Grace
}

// Store selects the database.
type Store struct {
	// Driver is sqlite (default: one embedded file) or postgres.
	Driver string `yaml:"driver"`
	// Path is the SQLite file (default firstword.db in the working
	// directory for serve; ":memory:" keeps nothing).
	Path string `yaml:"path"`
	// URL is the PostgreSQL connection URL; URLEnv names an environment
	// variable holding it instead (for URLs with passwords).
	URL    string `yaml:"url"`
	URLEnv string `yaml:"url_env"`
	// Timeout bounds each store operation a request waits on (default
	// 2s): a stalled database answers 503 store_unavailable within it.
	Timeout time.Duration `yaml:"timeout"`

	// ResolvedURL is URL or the value of URLEnv.
	ResolvedURL string `yaml:"-"`
}

// Usage tunes the usage writer. Rows are written in batches in the
// background; while the store is unavailable they wait in memory and are
// retried with backoff, and past Queue rows they go to the spill file,
// which is replayed when the store is back.
type Usage struct {
	// Queue bounds the rows kept in memory (default 100000).
	Queue int `yaml:"queue"`
	// SpillPath is the spill file (default: the SQLite file's path plus
	// ".usage-spill", or firstword-usage.spill in the working directory).
	// ${NAME} reads the environment, e.g. ${HOSTNAME} for one file per
	// replica.
	SpillPath string `yaml:"spill_path"`
	// RetryMax caps the backoff between attempts (default 30s).
	RetryMax time.Duration `yaml:"retry_max"`
}

// CORS configures cross-origin requests from browsers.
type CORS struct {
	// AllowedOrigins are origins (scheme://host[:port]) whose pages may
	// call the API; "*" allows any. Empty: none, and requests from a page
	// on another origin are refused (403).
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedMethods are the methods a cross-origin page may use beyond
	// GET, HEAD and POST (default GET, POST, PATCH, DELETE).
	AllowedMethods []string `yaml:"allowed_methods"`
	// AllowedHeaders are the request headers a cross-origin page may send:
	// names, prefixes ending in "*" (x-stainless-*), or "*" for any (not
	// with allow_credentials). Default: what the official OpenAI and
	// Anthropic SDKs send from a browser (httpapi.DefaultCORSHeaders).
	AllowedHeaders []string `yaml:"allowed_headers"`
	// ExposedHeaders are the response headers a cross-origin page may
	// read. Default: the request and trace ids, the X-Firstword-* headers,
	// Idempotent-Replayed, Server-Timing, Retry-After and the
	// x-ratelimit-* headers.
	ExposedHeaders []string `yaml:"exposed_headers"`
	// MaxAge is how long a browser may cache a preflight's answer
	// (default 10m).
	MaxAge time.Duration `yaml:"max_age"`
	// AllowCredentials lets pages send cookies with their requests and
	// read the answers (default false). Not with the origin "*".
	AllowCredentials bool `yaml:"allow_credentials"`
}

// Tenant is one tenant's settings.
type Tenant struct {
	// SharedConversations lets every key of the tenant read and continue
	// the tenant's conversations (default false: a conversation belongs to
	// the user of the key that created it).
	SharedConversations bool `yaml:"shared_conversations"`
	// Limits are the tenant's rate limits and concurrency cap, summed
	// over all its keys (absent: none). The admin API can override them
	// and set a key's own.
	Limits *RateLimits `yaml:"limits"`
	// Budget caps the tenant's spend per UTC day and month (absent: none).
	Budget *SpendBudget `yaml:"budget"`
}

// RateLimits are the rates a tenant or a key may use; 0 is no limit.
type RateLimits struct {
	// RequestsPerMinute and TokensPerMinute (input + output; admission
	// reserves the prompt's estimate plus max_tokens and the final usage
	// settles it) are counted by GCRA over limits.period.
	RequestsPerMinute int `yaml:"requests_per_minute"`
	TokensPerMinute   int `yaml:"tokens_per_minute"`
	// ConcurrentStreams bounds the requests open at once.
	ConcurrentStreams int `yaml:"concurrent_streams"`
}

// SpendBudget caps spend per UTC day and month; 0 is no cap. USD comes
// from the price table; tokens count every model, priced or not.
type SpendBudget struct {
	USDPerDay      float64 `yaml:"usd_per_day"`
	USDPerMonth    float64 `yaml:"usd_per_month"`
	TokensPerDay   int64   `yaml:"tokens_per_day"`
	TokensPerMonth int64   `yaml:"tokens_per_month"`
	// SoftThreshold is the fraction of a cap past which the metrics, the
	// log (once per period) and the admin API say so (default 0.8).
	SoftThreshold float64 `yaml:"soft_threshold"`
}

// Limits configures where admission keeps its counts.
type Limits struct {
	// Driver is memory (default: each replica counts alone) or redis
	// (the replicas share the counts).
	Driver string `yaml:"driver"`
	// Redis is the counts' server; default: the cache's, when
	// cache.driver is redis.
	Redis `yaml:",inline"`
	// Timeout bounds admission's one Redis round trip (default 50ms).
	// Past it, or on an error, the request is admitted by this replica's
	// own counts, and Redis is skipped for Cooldown (default 5s).
	Timeout  time.Duration `yaml:"timeout"`
	Cooldown time.Duration `yaml:"cooldown"`
	// Refresh is how often each replica reloads the limits set through
	// the admin API and the spend in the store (default 1s).
	Refresh time.Duration `yaml:"refresh"`
	// Lease is how long a crashed replica's open streams keep their
	// concurrency slots in Redis (default 30s; renewed every third).
	Lease time.Duration `yaml:"lease"`
	// Period is the window of the per-minute rates (default 1m). Only
	// tests shorten it: requests_per_minute: 3 with period: 2s lets 3
	// requests through every 2 seconds.
	Period time.Duration `yaml:"period"`
}

// Auth tunes authentication. Keys are managed with "firstword keys".
type Auth struct {
	// CacheTTL bounds how long a key check is cached; a revoked key stops
	// working within it on every replica (default 1s).
	CacheTTL time.Duration `yaml:"cache_ttl"`
}

// Chat configures the /v1/chat pipeline.
type Chat struct {
	// IdempotencyWindow is how long a send's Idempotency-Key holds its
	// turn: a retry with the key within it gets that turn's answer
	// (default 24h).
	IdempotencyWindow time.Duration `yaml:"idempotency_window"`
	// SystemPrompt starts every prompt (the stable prefix).
	SystemPrompt string `yaml:"system_prompt"`
	// GuardMode is parallel (default: the model call starts at once and
	// nothing reaches the client until the guard passes) or before (the
	// model waits for the verdict).
	GuardMode string `yaml:"guard_mode"`
	// CheckpointInterval and CheckpointTokens: a streaming answer is
	// saved at least this often (default 500ms, 32 tokens).
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
	CheckpointTokens   int           `yaml:"checkpoint_tokens"`
}

// Guard configures the input guardrail.
type Guard struct {
	// MaxInputChars blocks longer messages (default 32000).
	MaxInputChars int `yaml:"max_input_chars"`
	// Blocklist words or phrases, matched case-insensitively on word
	// boundaries, with BlocklistAction (block, redact or flag; default
	// block).
	Blocklist       []string `yaml:"blocklist"`
	BlocklistAction string   `yaml:"blocklist_action"`
	// Injection detects prompt-injection phrases (default true), with
	// InjectionAction (default block).
	Injection       *bool  `yaml:"injection"`
	InjectionAction string `yaml:"injection_action"`
	// PIIAction applies to card numbers (Luhn-checked) and e-mail
	// addresses: block, redact (default) or flag.
	PIIAction string `yaml:"pii_action"`
	// Timeout bounds the whole guard stage (default 1s).
	Timeout time.Duration `yaml:"timeout"`
	// HTTP is an optional remote guard.
	HTTP *GuardHTTP `yaml:"http"`
}

// GuardHTTP is a remote guard: POST {"text","user"} → {"allowed","reason"}.
type GuardHTTP struct {
	URL      string            `yaml:"url"`
	Timeout  time.Duration     `yaml:"timeout"`
	FailOpen bool              `yaml:"fail_open"`
	Headers  map[string]string `yaml:"headers"`
	// ModelCall marks the remote guard as a model call of its own, for
	// the lever advisor's "fewer calls".
	ModelCall bool `yaml:"model_call"`
}

// Sources are the /v1/chat context sources.
type Sources struct {
	History   *HistorySource   `yaml:"history"`
	Retrieval *RetrievalSource `yaml:"retrieval"`
	Lookups   []*LookupSource  `yaml:"lookups"`
}

// HistorySource loads the conversation's last turns.
type HistorySource struct {
	// MaxTokens is the history budget (default 2000).
	MaxTokens int `yaml:"max_tokens"`
	// Timeout for loading it (default 500ms). History is required: a
	// failure fails the request.
	Timeout time.Duration `yaml:"timeout"`
}

// RetrievalSource searches a folder of documents with BM25.
type RetrievalSource struct {
	// Dir is indexed at start (*.md and *.txt, recursively).
	Dir string `yaml:"dir"`
	// TopK passages are cited in the prompt (default 3).
	TopK int `yaml:"top_k"`
	// Timeout (default 300ms); Optional (default true) sources that fail
	// or time out are skipped and reported.
	Timeout  time.Duration `yaml:"timeout"`
	Optional *bool         `yaml:"optional"`
}

// LookupSource is an HTTP call whose answer goes into the prompt.
type LookupSource struct {
	Name string `yaml:"name"`
	// URL may contain {{user}}, {{tenant}}, {{question}} and
	// {{conversation}}, filled in URL-escaped.
	URL      string            `yaml:"url"`
	Headers  map[string]string `yaml:"headers"`
	Timeout  time.Duration     `yaml:"timeout"`
	Optional *bool             `yaml:"optional"`
	MaxBytes int               `yaml:"max_bytes"`
	// ModelCall marks the lookup as a model call of its own (a
	// classifier, a query rewriter), for the lever advisor's "fewer
	// calls".
	ModelCall bool `yaml:"model_call"`
}

// Metrics configures /metrics.
type Metrics struct {
	// Enabled (default true).
	Enabled *bool `yaml:"enabled"`
	// Listen, if set, serves /metrics on this address (HOST:PORT) instead
	// of on listen, where it then answers 404: a port the front door (an
	// Ingress, a public load balancer) never routes.
	Listen string `yaml:"listen"`
}

// Tracing configures the OTLP/HTTP span exporter.
type Tracing struct {
	// Endpoint is the collector's OTLP/HTTP base URL, e.g.
	// http://127.0.0.1:4318; empty turns tracing off (it then costs
	// nothing).
	Endpoint    string            `yaml:"endpoint"`
	Headers     map[string]string `yaml:"headers"`
	ServiceName string            `yaml:"service_name"`
	// SampleRatio of traces kept (default 1).
	SampleRatio float64 `yaml:"sample_ratio"`
}

// Budget is the latency budget.
type Budget struct {
	// Window of the live percentiles (default 5m).
	Window time.Duration `yaml:"window"`
	// TTFW and TTC targets (default p95 1s and p95 6s).
	TTFW Target `yaml:"ttfw"`
	TTC  Target `yaml:"ttc"`
	// Stages are per-stage targets by stage name (guard, context, ttft,
	// a lookup's name...).
	Stages map[string]Target `yaml:"stages"`
	// AdviceWindow is how far back the lever advisor reads its sample of
	// each alias's requests (the last 2,000 of it; default 15m).
	AdviceWindow time.Duration `yaml:"advice_window"`
}

// Target is one percentile and its limit: {p95: 1s}.
type Target map[string]time.Duration

// Percentile returns the target's percentile and value, if it has one.
func (t Target) Percentile() (float64, time.Duration, bool) {
	for k, v := range t {
		switch k {
		case "p50":
			return 50, v, true
		case "p95":
			return 95, v, true
		case "p99":
			return 99, v, true
		}
	}
	return 0, 0, false
}

// Price is USD per million tokens.
type Price struct {
	Input       float64 `yaml:"input"`
	Output      float64 `yaml:"output"`
	CachedInput float64 `yaml:"cached_input"`
	// CacheWriteInput prices input tokens written to a prompt cache
	// (default 1.25 × input, Anthropic's five-minute cache).
	CacheWriteInput float64 `yaml:"cache_write_input"`
}

// Adaptive is the adaptive first-token timeout.
type Adaptive struct {
	// Multiplier of the observed p99 TTFT (e.g. 3).
	Multiplier float64 `yaml:"multiplier"`
	// Min and Max bound the result.
	Min time.Duration `yaml:"min"`
	Max time.Duration `yaml:"max"`
	// MinSamples before it applies (default 20).
	MinSamples int `yaml:"min_samples"`
}

// Hedge configures hedged requests.
type Hedge struct {
	Enabled bool `yaml:"enabled"`
	// Delay before the hedge starts (default: the deployment's observed
	// p95 TTFT, or half its first-token timeout until measured).
	Delay time.Duration `yaml:"delay"`
}

// Breaker tunes a circuit breaker.
type Breaker struct {
	ConsecutiveFailures int           `yaml:"consecutive_failures"`
	ErrorRate           float64       `yaml:"error_rate"`
	MinRequests         int           `yaml:"min_requests"`
	Window              time.Duration `yaml:"window"`
	Cooldown            time.Duration `yaml:"cooldown"`
	// MaxEjectedShare is the largest share of an alias's deployments
	// whose open circuits are skipped at once (default 0.5); the rest are
	// tried even while open, so that an alias is never shut out whole.
	MaxEjectedShare float64 `yaml:"max_ejected_share"`
}

// Deployment is a provider and an upstream model.
type Deployment struct {
	// Provider names an entry of providers.
	Provider string `yaml:"provider"`
	// Model is the upstream model name.
	Model string `yaml:"model"`
	// Priority: lower is tried first (default 0).
	Priority int `yaml:"priority"`
	// Weight among deployments of equal priority (default 1).
	Weight float64 `yaml:"weight"`
	// FirstTokenTimeout overrides the alias default for this deployment.
	FirstTokenTimeout time.Duration `yaml:"first_token_timeout"`
	// ThinkingTags reads <think>...</think> in the answer text as
	// thinking, for models that have no other way to stream it.
	ThinkingTags bool `yaml:"thinking_tags"`
	// Continuation is how this deployment is asked to continue a broken
	// answer: prefill (the delivered text as a trailing assistant message;
	// on an openai provider, vLLM's continue_final_message) or instruct
	// (an instruction quoting it). Default: by provider type and model
	// (see docs/continuation.md).
	Continuation string `yaml:"continuation"`

	line int
}

// ProviderTypes are the provider types this build knows.
var ProviderTypes = []string{"openai", "openai-responses", "anthropic", "gemini", "ollama", "sim"}

// Load reads and validates the file at path. getenv resolves API keys and
// header references.
func Load(path string, getenv func(string) string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, b, getenv)
}

// Parse decodes and validates a config file's bytes.
func Parse(path string, b []byte, getenv func(string) string) (*Config, error) {
	c := &Config{Path: path}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the file is empty", path)
		}
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, fmt.Errorf("%s: %s", path, syntaxError(cleanYAMLError(err), b))
		}
		// Unknown keys and wrong types: report them with every other
		// problem of what could be read, not one at a time.
		loose := &Config{Path: path}
		yaml.Unmarshal(b, loose)
		loose.parseTree(b)
		loose.Defaults()
		return nil, loose.errorList(append(explainTypeErrors(te, loose.root), loose.problems()...))
	}
	c.parseTree(b)
	c.Defaults()
	if err := c.resolve(getenv); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseTree keeps the document's node tree, for line numbers.
func (c *Config) parseTree(b []byte) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err == nil {
		c.root = &root
	}
	c.locate()
}

// cleanYAMLError drops the library's "yaml: unmarshal errors:" preamble
// and Go type names, leaving "line N: ..." sentences.
func cleanYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "yaml: unmarshal errors:\n")
	s = strings.TrimPrefix(s, "yaml: ")
	s = typeNameRE.ReplaceAllString(s, "")
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

var typeNameRE = regexp.MustCompile(` in type [\w.*\[\]]+`)

// Default returns the built-in configuration: the sim provider and its
// tiers as aliases, so that firstword runs with no file, keys or servers.
func Default() *Config {
	c := &Config{
		Providers: map[string]*Provider{"sim": {Type: "sim"}},
		Models: map[string]*Model{
			"sim-small":    {Deployments: []*Deployment{{Provider: "sim", Model: "small"}}},
			"sim-medium":   {Deployments: []*Deployment{{Provider: "sim", Model: "medium"}}},
			"sim-large":    {Deployments: []*Deployment{{Provider: "sim", Model: "large"}}},
			"sim-reasoner": {Deployments: []*Deployment{{Provider: "sim", Model: "reasoner"}}},
			"chat": {Deployments: []*Deployment{
				{Provider: "sim", Model: "medium"},
				{Provider: "sim", Model: "small", Priority: 1},
			}},
		},
		Guard: &Guard{},
	}
	c.Defaults()
	return c
}

// Defaults fills every unset field with its default.
func (c *Config) Defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.ModelsPassthrough == "" {
		c.ModelsPassthrough = "auto"
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = 4 << 20
	}
	if c.RequestBodyTimeout == 0 {
		c.RequestBodyTimeout = 10 * time.Second
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = 1 << 20
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 32 << 10
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = 2048
	}
	if c.MaxPromptBytes == 0 {
		c.MaxPromptBytes = 2 << 20
	}
	if c.Store.Timeout == 0 {
		c.Store.Timeout = 2 * time.Second
	}
	if c.Cache.Timeout == 0 {
		c.Cache.Timeout = 50 * time.Millisecond
	}
	if c.Cache.Failures == 0 {
		c.Cache.Failures = 3
	}
	if c.Cache.Cooldown == 0 {
		c.Cache.Cooldown = 10 * time.Second
	}
	if c.Usage.Queue == 0 {
		c.Usage.Queue = 100000
	}
	if c.Usage.RetryMax == 0 {
		c.Usage.RetryMax = 30 * time.Second
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "json"
	}
	if c.Store.Driver == "" {
		c.Store.Driver = "sqlite"
	}
	if c.Auth.CacheTTL == 0 {
		c.Auth.CacheTTL = time.Second
	}
	if c.Chat.IdempotencyWindow == 0 {
		c.Chat.IdempotencyWindow = 24 * time.Hour
	}
	if c.Chat.GuardMode == "" {
		c.Chat.GuardMode = "parallel"
	}
	if c.Chat.CheckpointInterval == 0 {
		c.Chat.CheckpointInterval = 500 * time.Millisecond
	}
	if c.Chat.CheckpointTokens == 0 {
		c.Chat.CheckpointTokens = 32
	}
	if c.Chat.SystemPrompt == "" {
		c.Chat.SystemPrompt = DefaultSystemPrompt
	}
	if c.Sources.History == nil {
		c.Sources.History = &HistorySource{}
	}
	if c.Sources.History.MaxTokens == 0 {
		c.Sources.History.MaxTokens = 2000
	}
	if c.Sources.History.Timeout == 0 {
		c.Sources.History.Timeout = 500 * time.Millisecond
	}
	if r := c.Sources.Retrieval; r != nil {
		if r.TopK == 0 {
			r.TopK = 3
		}
		if r.Timeout == 0 {
			r.Timeout = 300 * time.Millisecond
		}
	}
	for _, l := range c.Sources.Lookups {
		if l != nil && l.Timeout == 0 {
			l.Timeout = 500 * time.Millisecond
		}
	}
	if c.Cache.Driver == "" {
		c.Cache.Driver = "memory"
	}
	if c.Cache.MaxBytes == 0 {
		c.Cache.MaxBytes = 64 << 20
	}
	if c.Resume.Journal == "" {
		c.Resume.Journal = "memory"
	}
	if c.Limits.Driver == "" {
		c.Limits.Driver = "memory"
	}
	if c.Limits.Timeout == 0 {
		c.Limits.Timeout = 50 * time.Millisecond
	}
	if c.Limits.Cooldown == 0 {
		c.Limits.Cooldown = 5 * time.Second
	}
	if c.Limits.Refresh == 0 {
		c.Limits.Refresh = time.Second
	}
	if c.Limits.Lease == 0 {
		c.Limits.Lease = 30 * time.Second
	}
	if c.Limits.Period == 0 {
		c.Limits.Period = time.Minute
	}
	for _, t := range c.Tenants {
		if t != nil && t.Budget != nil && t.Budget.SoftThreshold == 0 {
			t.Budget.SoftThreshold = 0.8
		}
	}
	if c.Resume.Lease == 0 {
		c.Resume.Lease = 3 * time.Second
	}
	if c.Resume.Retain == 0 {
		c.Resume.Retain = 10 * time.Minute
	}
	if c.Resume.MaxAnswerBytes == 0 {
		c.Resume.MaxAnswerBytes = 4 << 20
	}
	if c.Resume.MaxBytes == 0 {
		c.Resume.MaxBytes = 256 << 20
	}
	if c.Budget.Window == 0 {
		c.Budget.Window = 5 * time.Minute
	}
	if c.Budget.TTFW == nil {
		c.Budget.TTFW = Target{"p95": time.Second}
	}
	if c.Budget.TTC == nil {
		c.Budget.TTC = Target{"p95": 6 * time.Second}
	}
	if c.Budget.Stages == nil {
		// The lesson's budget, as p95 targets.
		c.Budget.Stages = map[string]Target{
			"guard":   {"p95": 100 * time.Millisecond},
			"context": {"p95": 150 * time.Millisecond},
			"prompt":  {"p95": 15 * time.Millisecond},
			"ttft":    {"p95": 800 * time.Millisecond},
		}
	}
	if g := c.Guard; g != nil && g.Timeout == 0 {
		g.Timeout = time.Second
	}
	for _, p := range c.Providers {
		if p == nil {
			continue
		}
		if p.Type == "sim" && p.Seed == 0 {
			p.Seed = 1
		}
		if p.Type == "openai" && p.MaxTokensField == "" {
			p.MaxTokensField = "max_tokens"
		}
	}
	for _, m := range c.Models {
		if m == nil {
			continue
		}
		for _, d := range m.Deployments {
			if d != nil && d.Weight == 0 {
				d.Weight = 1
			}
		}
	}
}

// DefaultSystemPrompt starts /v1/chat prompts unless the config sets one.
const DefaultSystemPrompt = "You are a helpful assistant. Answer clearly and concisely. When the context below cites documents, use them and cite them by number."

// Optional reports whether an optional flag is on (default true).
func Optional(p *bool) bool { return p == nil || *p }

var envRefRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func (c *Config) resolve(getenv func(string) string) error {
	var errs []string
	// env reads the variable name, which the field at path refers to: a
	// problem if it is not set.
	env := func(name string, path ...string) string {
		val := getenv(name)
		if val == "" {
			errs = append(errs, fmt.Sprintf("line %d: %s: environment variable %s is not set", c.line(path...), strings.Join(path, "."), name))
		}
		return val
	}
	// A section's url_env, when set, names the variable holding its URL.
	resolveURL := func(section, url, urlEnv string) string {
		if urlEnv == "" {
			return url
		}
		return env(urlEnv, section, "url_env")
	}
	c.Cache.ResolvedURL = resolveURL("cache", c.Cache.URL, c.Cache.URLEnv)
	c.Resume.ResolvedURL = resolveURL("resume", c.Resume.URL, c.Resume.URLEnv)
	if !c.Resume.Named() && c.Cache.Driver == "redis" {
		c.Resume.Redis = c.Cache.Redis
	}
	c.Limits.ResolvedURL = resolveURL("limits", c.Limits.URL, c.Limits.URLEnv)
	if !c.Limits.Named() && c.Cache.Driver == "redis" {
		c.Limits.Redis = c.Cache.Redis
	}
	c.Store.ResolvedURL = resolveURL("store", c.Store.URL, c.Store.URLEnv)
	// expand replaces each ${NAME} in v, the field at path, by the
	// variable's value.
	expand := func(v string, path ...string) string {
		return envRefRE.ReplaceAllStringFunc(v, func(ref string) string {
			return env(envRefRE.FindStringSubmatch(ref)[1], path...)
		})
	}
	// ${NAME} in the spill path gives each replica its own file from a
	// shared config (${HOSTNAME}).
	c.Usage.SpillPath = expand(c.Usage.SpillPath, "usage", "spill_path")
	// Outbound headers read the environment the same way.
	expandHeaders := func(headers map[string]string, path ...string) {
		for _, k := range sortedKeys(headers) {
			headers[k] = expand(headers[k], append(path[:len(path):len(path)], k)...)
		}
	}
	for _, name := range sortedKeys(c.Providers) {
		p := c.Providers[name]
		if p == nil {
			continue
		}
		if p.APIKeyEnv != "" {
			p.APIKey = getenv(p.APIKeyEnv)
		}
		expandHeaders(p.Headers, "providers", name, "headers")
	}
	if c.Guard != nil && c.Guard.HTTP != nil {
		expandHeaders(c.Guard.HTTP.Headers, "guard", "http", "headers")
	}
	for i, l := range c.Sources.Lookups {
		if l != nil {
			expandHeaders(l.Headers, "sources", "lookups", strconv.Itoa(i), "headers")
		}
	}
	expandHeaders(c.Tracing.Headers, "tracing", "headers")
	return c.errorList(errs)
}

func (c *Config) errorList(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	where := c.Path
	if where == "" {
		where = "config"
	}
	byLine(errs)
	if len(errs) == 1 {
		return fmt.Errorf("%s: %s", where, errs[0])
	}
	return fmt.Errorf("%s: %d problems:\n  %s", where, len(errs), strings.Join(errs, "\n  "))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
