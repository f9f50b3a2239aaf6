package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/webui"
)

// routes is the whole API surface.
func (s *Server) routes() {
	s.mux.Handle("POST /v1/chat/completions", apiHandler{s, &openaiAPI})
	s.mux.Handle("POST /v1/messages", apiHandler{s, &anthropicAPI})
	s.mux.Handle("POST /v1/responses", apiHandler{s, s.responses})
	s.mux.Handle("GET /v1/responses/{id}", route(s.getResponse))
	s.mux.Handle("POST /v1/responses/{id}/cancel", route(s.cancelResponse))
	s.mux.HandleFunc("GET /v1/models", s.models)
	if s.opt.Chat != nil && s.opt.Store != nil {
		s.mux.Handle("POST /v1/chat", route(s.chat))
		s.mux.Handle("GET /v1/conversations", route(s.listConversations))
		s.mux.Handle("GET /v1/conversations/{id}", route(s.getConversation))
		s.mux.Handle("DELETE /v1/conversations/{id}", route(s.deleteConversation))
		s.mux.Handle("PATCH /v1/conversations/{id}", route(s.renameConversation))
		s.mux.Handle("GET /v1/conversations/{id}/stream", route(s.resumeStream))
		s.mux.Handle("POST /v1/conversations/{id}/stop", route(s.stopAnswer))
		// The AI SDK's UI message stream (uichat.go).
		s.mux.Handle("POST /v1/ui/chat", route(s.uiChat))
		s.mux.Handle("GET /v1/ui/chat/{id}/stream", route(s.uiResumeStream))
		s.mux.Handle("POST /v1/ui/chat/{id}/stop", route(s.uiStop))
		s.mux.Handle("GET /v1/ui/chat/{id}/messages", route(s.uiMessages))
		s.mux.Handle("GET /v1/usage", route(s.usage))
	}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	// Operators' endpoints need an admin key (anyone, in local mode, from
	// a loopback host name: see origin.go). None changes state on a GET.
	s.mux.Handle("GET /admin/health", s.admin(http.HandlerFunc(s.deploymentHealth)))
	s.mux.Handle("GET /admin/runtime", s.admin(http.HandlerFunc(s.runtimeStats)))
	s.mux.Handle("POST /admin/gc", s.admin(http.HandlerFunc(s.collect)))
	s.mux.Handle("GET /admin/debug/pprof/", s.admin(http.StripPrefix("/admin", http.HandlerFunc(pprof.Index))))
	s.mux.Handle("GET /admin/debug/pprof/profile", s.admin(http.HandlerFunc(pprof.Profile)))
	s.mux.Handle("GET /admin/debug/pprof/trace", s.admin(http.HandlerFunc(pprof.Trace)))
	// Tenants' limits, budgets and usage (admin_limits.go).
	s.limitsRoutes()
	if s.opt.Store != nil {
		// The admin key API (admin_keys.go).
		s.mux.Handle("POST /admin/v1/keys", s.admin(route(s.createKey)))
		s.mux.Handle("GET /admin/v1/keys", s.admin(route(s.listKeys)))
		s.mux.Handle("POST /admin/v1/keys/{id}/revoke", s.admin(route(s.revokeKey)))
		s.mux.Handle("POST /admin/v1/keys/{id}/rotate", s.admin(route(s.rotateKey)))
	}
	if s.opt.Metrics != nil {
		s.mux.Handle("GET /metrics", s.opt.Metrics)
	}
	if s.opt.Budget != nil {
		s.mux.Handle("GET /v1/budget", route(s.budgetReport))
		if s.opt.Advice != nil {
			s.mux.Handle("GET /v1/budget/advice", route(s.budgetAdvice))
		}
	}
	s.mux.Handle("GET /{$}", webui.Handler())
	s.mux.Handle("GET /budget", webui.Handler())
	s.mux.Handle("GET /favicon.ico", webui.Handler())
	s.mux.Handle("GET /static/", webui.Handler())
	s.mux.Handle("/", route(s.notFound))
	for pattern, h := range s.opt.Extra {
		s.mux.Handle(pattern, s.admin(h))
	}
}

// admin serves h to admin keys only (and to the local user in local
// mode); other keys get 403.
func (s *Server) admin(h http.Handler) http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) error {
		p, err := s.authenticate(w, r, nil)
		if err != nil {
			return err
		}
		if !p.Admin && !p.Local {
			return errAdminKeyRequired
		}
		if p.Local && crossSite(r) {
			// No key stands in the way in local mode: only the gateway's
			// own pages and non-browser clients may use the operators' API.
			return errCrossSiteAdmin
		}
		h.ServeHTTP(w, r)
		return nil
	})
}

// healthz says the process is alive: liveness.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says whether to send this replica new requests: no once shutdown
// has begun (streams already open go on).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// models lists the aliases (owned by firstword) and, while PROVIDER/MODEL
// names are served, each configured deployment's provider and model,
// owned by the provider. OpenAI's list has no way to say "any model of
// this provider", so only the pairs the config vouches for are listed;
// any other model of a configured provider may be asked for all the same.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := []model{}
	created := time.Now().Unix()
	for _, a := range s.opt.Models.Aliases() {
		data = append(data, model{ID: a, Object: "model", Created: created, OwnedBy: "firstword"})
	}
	if pr, ok := s.opt.Models.(interface {
		PassthroughModels() []router.PassthroughModel
	}); ok {
		for _, m := range pr.PassthroughModels() {
			data = append(data, model{ID: m.ID, Object: "model", Created: created, OwnedBy: m.Provider})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) deploymentHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"deployments": s.opt.Models.Health()})
}

// budgetReport serves the live latency budget (?surface=chat|openai|
// anthropic to keep one surface, ?recent=N waterfalls) of the caller's
// tenant, with the caller's own requests as waterfalls; an admin key sees
// every tenant's, or one with ?tenant=.
func (s *Server) budgetReport(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, nil)
	if err != nil {
		return err
	}
	tenant, user := p.TenantID, p.UserID
	if p.Admin || p.Local {
		tenant, user = r.URL.Query().Get("tenant"), ""
	}
	recent, err := intParam(r, "recent", 0, 0, 200)
	if err != nil {
		return err
	}
	surface := r.URL.Query().Get("surface")
	switch surface {
	case "", "openai", "chat", "anthropic":
	default:
		return invalid("surface", "surface must be openai, chat or anthropic")
	}
	writeJSON(w, http.StatusOK, s.opt.Budget(tenant, user, surface, recent))
	return nil
}

// budgetAdvice serves GET /v1/budget/advice: the lever advisor's advice
// for the caller's tenant's aliases (an admin, or local mode: every
// tenant's, or ?tenant=), as {"object": "list", "data": [...]}.
func (s *Server) budgetAdvice(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, nil)
	if err != nil {
		return err
	}
	tenant := p.TenantID
	if p.Admin || p.Local {
		tenant = r.URL.Query().Get("tenant")
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": s.opt.Advice(tenant)})
	return nil
}

// runtimeStats reports the process's goroutines and memory, for capacity
// planning (and the benchmark's memory-per-stream breakdown).
func (s *Server) runtimeStats(w http.ResponseWriter, r *http.Request) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	writeJSON(w, http.StatusOK, map[string]any{
		"goroutines":    runtime.NumGoroutine(),
		"heap_inuse":    m.HeapInuse,
		"heap_alloc":    m.HeapAlloc,
		"stack_inuse":   m.StackInuse,
		"sys":           m.Sys,
		"heap_released": m.HeapReleased,
		"num_gc":        m.NumGC,
	})
}

// collect runs a garbage collection and then reports as runtimeStats
// does, so heap_alloc is the live heap.
func (s *Server) collect(w http.ResponseWriter, r *http.Request) {
	runtime.GC()
	s.runtimeStats(w, r)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) error {
	return &chat.Error{Category: chat.CategoryNotFound, Message: "no route for " + r.Method + " " + r.URL.Path}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// A value that does not marshal (a NaN) is firstword's bug: the
		// client gets a 500 that says nothing of it.
		dialectOpenAI.writeError(w, &chat.Error{Category: chat.CategoryInternal, Message: "internal error", Err: err})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
