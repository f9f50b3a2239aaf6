// Package httpapi is firstword's HTTP surface: the OpenAI-compatible
// endpoints, health and admin routes. routes.go lists every route. Handlers
// translate between wire formats and the router's normalised streams; they
// own the commit point, heartbeats, flushing and what is recorded when a
// stream ends.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/cache"
	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store"
)

// Models is what the gateway serves: the aliases clients may ask for and
// the health of their deployments (the router's). When it also lists
// PROVIDER/MODEL names (PassthroughModels), /v1/models lists them too.
type Models interface {
	Aliases() []string
	Health() []router.Status
}

// Authenticator resolves API keys.
type Authenticator interface {
	Authenticate(ctx context.Context, authorization, apiKey string) (auth.Principal, error)
	// Local reports whether the gateway serves everyone as the local user
	// (no key exists). It must not wait on the store per request.
	Local(ctx context.Context) (bool, error)
}

// Options configures a Server.
type Options struct {
	// Routes are what each request's call is routed through: the levers
	// in front of the router.
	Routes call.Routes
	Models Models
	// Meter receives each request's record.
	Meter metering.Meter
	// Auth checks API keys; nil serves everyone as the local user.
	Auth Authenticator
	// Chat and Store serve /v1/chat, the conversations and usage; nil
	// leaves those routes out.
	Chat  *conversation.Service
	Store store.Store
	// Prices turn usage into cost.
	Prices metering.Prices
	// Streams counts open streams (nil: not counted).
	Streams interface{ Open(surface string) func() }
	// Metrics serves /metrics (nil: no route).
	Metrics http.Handler
	// Budget reports the latency budget for /v1/budget and /budget (nil:
	// no routes).
	Budget func(tenant, user, surface string, recent int) any
	// Advice is the lever advisor's advice for a tenant's ("" every
	// tenant's) aliases, for /v1/budget/advice (nil: no route).
	Advice func(tenant string) any
	Logger *slog.Logger
	// Heartbeat is the SSE heartbeat interval (0: none).
	Heartbeat time.Duration
	// WriteTimeout is how long one write to a client may block before the
	// client is taken for gone (default 30s).
	WriteTimeout time.Duration
	// MaxRequestBytes bounds request bodies (default 4 MiB).
	MaxRequestBytes int64
	// StoreTimeout is the store's timeout (store.timeout): on /v1/chat
	// the key check and the turn's first reads and write share one (see
	// store.WithBudget), so a stalled database answers 503 within it.
	StoreTimeout time.Duration
	// BodyTimeout bounds how long a request body may take to arrive
	// (default 10s), so a client trickling its body cannot hold a
	// connection forever; the stream after it is not limited by it.
	BodyTimeout time.Duration
	// Items keeps the Responses API's message items for item_reference
	// (nil: references are refused).
	Items cache.Cache
	// Extra routes mounted on the same mux (e.g. a sim's stats), for
	// admin keys only (anyone in local mode).
	Extra map[string]http.Handler
	// CORS lists the origins whose pages may call the API.
	CORS CORS
	// AllowedHosts are host names, besides loopback ones, that a request
	// may name in local mode (e.g. the listen host).
	AllowedHosts []string
	// SharedConversations reports whether every key of a tenant may read
	// and continue the tenant's conversations (nil: none do; a
	// conversation is its creator's).
	SharedConversations func(tenant string) bool
	// MaxMessages and MaxPromptBytes bound a request's messages and their
	// text (0: 2048 and 2 MiB).
	MaxMessages    int
	MaxPromptBytes int
	// Journal keeps /v1/chat answers for resumes and stops (nil: an
	// answer ends with its connection, and the resume and stop routes
	// can only replay stored answers).
	Journal journal.Journal
	// Grace is how long an answer goes on after its client dropped, for a
	// resume to pick it up (0: it is cancelled at once).
	Grace time.Duration
	// Lease is how long a shared journal's producer may go silent before
	// its answer is taken for lost (resume.lease).
	Lease time.Duration

	// Admission applies the tenants' and keys' rate limits, concurrency
	// caps and budgets after parsing, before any upstream call (nil:
	// none).
	Admission Admission
	// Limits serves the admin API's limits, budgets and usage (nil: those
	// routes answer 404).
	Limits LimitsAdmin
	// IdempotencyWindow is how long a /v1/chat Idempotency-Key holds its
	// turn (default 24h).
	IdempotencyWindow time.Duration
}

// Server serves the API.
type Server struct {
	opt Options
	log *slog.Logger
	mux *http.ServeMux
	// allowedHosts are opt.AllowedHosts, lower case.
	allowedHosts []string
	// draining is set once shutdown begins: /readyz answers 503.
	draining atomic.Bool
	// responses is the Responses API's entry point (it needs s).
	responses *api
	// calls starts each request's call.
	calls *call.Calls
}

// New returns a Server.
func New(opt Options) *Server {
	if opt.WriteTimeout <= 0 {
		opt.WriteTimeout = 30 * time.Second
	}
	if opt.BodyTimeout <= 0 {
		opt.BodyTimeout = 10 * time.Second
	}
	if opt.MaxRequestBytes <= 0 {
		opt.MaxRequestBytes = 4 << 20
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Meter == nil {
		opt.Meter = metering.NewMemory(0)
	}
	if opt.MaxMessages <= 0 {
		opt.MaxMessages = 2048
	}
	if opt.MaxPromptBytes <= 0 {
		opt.MaxPromptBytes = 2 << 20
	}
	s := &Server{opt: opt, log: opt.Logger, mux: http.NewServeMux(),
		calls: call.New(call.Options{Routes: opt.Routes, Prices: opt.Prices, Meter: opt.Meter})}
	s.opt.CORS.AllowedOrigins = nil
	for _, o := range opt.CORS.AllowedOrigins {
		s.opt.CORS.AllowedOrigins = append(s.opt.CORS.AllowedOrigins, NormalizeOrigin(o))
	}
	for _, h := range opt.AllowedHosts {
		s.allowedHosts = append(s.allowedHosts, strings.ToLower(strings.TrimSuffix(h, ".")))
	}
	s.responses = responsesAPIFor(s)
	s.routes()
	return s
}

// ServeHTTP implements http.Handler. Requests a browser must not make
// are refused first (origin.go), in the dialect of the route they would
// reach. A request with a body gets the body
// timeout at once, so one answered without reading it (401, 404, 405)
// cannot have its body trickled into net/http's drain forever; readBody
// clears it once the body is in.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 && r.Body != http.NoBody {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opt.BodyTimeout))
	}
	answered, err := s.admit(w, r)
	switch {
	case err != nil:
		s.dialectOf(r).writeError(w, err)
	case !answered:
		s.mux.ServeHTTP(w, r)
	}
}

// Drain marks the server as shutting down: /readyz answers 503 from now
// on, so that a load balancer stops sending new requests.
func (s *Server) Drain() { s.draining.Store(true) }

// clientDeadline returns the tightest timeout a client asked for with
// X-Request-Timeout, Request-Timeout or X-Stainless-Timeout (seconds, may
// be fractional), or 0.
func clientDeadline(h http.Header) time.Duration {
	var best time.Duration
	for _, name := range []string{"X-Request-Timeout", "Request-Timeout", "X-Stainless-Timeout"} {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
		if err != nil || f <= 0 || f > 86400 {
			continue
		}
		d := time.Duration(f * float64(time.Second))
		if best == 0 || d < best {
			best = d
		}
	}
	return best
}

// requestHints are the request's hints to the levers and providers: the
// tenant (which scopes the response cache), the client's cache policy
// (Cache-Control: no-cache reads nothing from the cache, no-store stores
// nothing; X-Firstword-Cache: on caches a non-deterministic request), a
// routing hint (X-Firstword-Hint), a route tag (X-Firstword-Route-Tag), and
// a directive for the simulated provider (X-Firstword-Sim).
func requestHints(r *http.Request, tenant string) chat.Hints {
	h := chat.Hints{
		Tenant:   tenant,
		Hint:     r.Header.Get("X-Firstword-Hint"),
		RouteTag: r.Header.Get("X-Firstword-Route-Tag"),
		Sim:      r.Header.Get("X-Firstword-Sim"),
	}
	cc := strings.ToLower(r.Header.Get("Cache-Control"))
	switch {
	case strings.Contains(cc, "no-cache"):
		h.Cache = chat.CacheBypass
	case strings.Contains(cc, "no-store"):
		h.Cache = chat.CacheNoStore
	case strings.EqualFold(r.Header.Get("X-Firstword-Cache"), "on"):
		h.Cache = chat.CacheOn
	}
	return h
}
