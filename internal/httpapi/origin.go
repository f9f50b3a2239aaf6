package httpapi

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/chat"
)

// Browser checks. A browser lets any page send a "simple" cross-site POST
// (text/plain body, no preflight) and, through DNS rebinding, read what a
// loopback server answers under another host name. In local mode no key
// stands in the way, so these checks are what keeps a web page from using
// the user's gateway (Ollama hardened its own server the same way).
//
//   - a request from a page on another origin (its Origin header, or
//     Sec-Fetch-Site: cross-site or same-site outside a top-level
//     navigation) is refused unless CORS allows that origin; same-origin
//     requests (the chat page itself) pass;
//   - in local mode, the Host header must be a loopback name, the listen
//     address, or one of AllowedHosts: a rebinding host name gets 403;
//   - a POST body must be JSON (415 otherwise): no form or text/plain body
//     reaches a handler (a PATCH body neither).

// CORS is the cross-origin policy: the origins whose pages may call the
// API, with which methods and request headers, and which response headers
// their scripts may read. Nothing is allowed unless AllowedOrigins is set.
type CORS struct {
	// AllowedOrigins are scheme://host[:port] values, or "*" for any.
	AllowedOrigins []string
	// AllowedMethods a preflight may ask for (nil: DefaultCORSMethods).
	AllowedMethods []string
	// AllowedHeaders a preflight may ask for: names, prefixes ending in
	// "*" ("x-stainless-*"), or "*" for any (nil: DefaultCORSHeaders).
	// CORS-safelisted headers need no listing.
	AllowedHeaders []string
	// ExposedHeaders are the response headers a page may read (nil:
	// DefaultCORSExposedHeaders).
	ExposedHeaders []string
	// MaxAge is how long a browser may cache a preflight's answer (0: 10m).
	MaxAge time.Duration
	// AllowCredentials lets pages send cookies and read answers to
	// requests made with them; never with the origin "*".
	AllowCredentials bool
}

// The CORS defaults: what firstword's own clients send and read.
var (
	DefaultCORSMethods = []string{"GET", "POST", "PATCH", "DELETE"}
	// The official OpenAI and Anthropic SDKs' browser requests send these.
	DefaultCORSHeaders = []string{"authorization", "content-type", "accept", "idempotency-key", "last-event-id",
		"x-request-timeout", "openai-organization", "openai-project", "openai-beta", "x-stainless-*",
		"x-api-key", "anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access",
		"cache-control", "x-firstword-*", "traceparent", "tracestate"}
	DefaultCORSExposedHeaders = []string{"X-Request-Id", "X-Trace-Id", "X-Firstword-Deployment", "X-Firstword-Attempts",
		"X-Firstword-Route", "X-Firstword-Cache", "X-Firstword-Coalesced", "X-Firstword-Rule", "X-Firstword-Protocol",
		"X-Firstword-Resume", "Idempotent-Replayed", "Server-Timing", "Retry-After",
		"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests",
		"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"}
)

func (c *CORS) allows(origin string) bool {
	if len(c.AllowedOrigins) == 0 {
		return false
	}
	return slices.Contains(c.AllowedOrigins, "*") || slices.Contains(c.AllowedOrigins, NormalizeOrigin(origin))
}

// allowsMethod reports whether a preflight may ask for method. The
// CORS-safelisted methods are always allowed.
func (c *CORS) allowsMethod(method string) bool {
	switch method {
	case "GET", "HEAD", "POST":
		return true
	}
	methods := c.AllowedMethods
	if methods == nil {
		methods = DefaultCORSMethods
	}
	return slices.Contains(methods, method)
}

// allowsHeaders reports whether a preflight may ask for the request
// headers in list (Access-Control-Request-Headers: comma-separated,
// lower case).
func (c *CORS) allowsHeaders(list string) bool {
	allowed := c.AllowedHeaders
	if allowed == nil {
		allowed = DefaultCORSHeaders
	}
	if slices.Contains(allowed, "*") && !c.AllowCredentials {
		return true
	}
	for h := range strings.SplitSeq(list, ",") {
		h = strings.TrimSpace(h)
		if h == "" || safelistedHeader(h) {
			continue
		}
		if !slices.ContainsFunc(allowed, func(a string) bool { return headerMatches(a, h) }) {
			return false
		}
	}
	return true
}

// headerMatches reports whether the header name h matches pattern: the
// same name, or a prefix ending in "*" ("x-stainless-*"), in any case.
func headerMatches(pattern, h string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok && prefix != "" {
		return len(h) > len(prefix) && strings.EqualFold(h[:len(prefix)], prefix)
	}
	return strings.EqualFold(pattern, h)
}

// safelistedHeader reports whether a request header never needs a
// preflight's leave (the Fetch standard's CORS-safelisted request headers;
// their values' limits are the browser's business).
func safelistedHeader(h string) bool {
	switch strings.ToLower(h) {
	case "accept", "accept-language", "content-language", "range":
		return true
	}
	return false
}

func (c *CORS) methods() string {
	if c.AllowedMethods == nil {
		return strings.Join(DefaultCORSMethods, ", ")
	}
	return strings.Join(c.AllowedMethods, ", ")
}

func (c *CORS) exposed() string {
	if c.ExposedHeaders == nil {
		return strings.Join(DefaultCORSExposedHeaders, ", ")
	}
	return strings.Join(c.ExposedHeaders, ", ")
}

func (c *CORS) maxAge() string {
	if c.MaxAge <= 0 {
		return "600"
	}
	return strconv.Itoa(int(c.MaxAge / time.Second))
}

// NormalizeOrigin writes an origin as browsers send it: scheme and host
// in lower case, no default port, no trailing slash. Origins that do not
// parse are returned as they are.
func NormalizeOrigin(origin string) string {
	u, err := url.Parse(strings.TrimSuffix(origin, "/"))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return origin
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if h, port, err := net.SplitHostPort(host); err == nil && (scheme == "http" && port == "80" || scheme == "https" && port == "443") {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return scheme + "://" + host
}

// admit runs the browser checks: it returns the error of a request a
// browser must not make (a 403 or a 415), and reports whether it answered
// the request itself (a CORS preflight).
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (answered bool, err error) {
	origin := r.Header.Get("Origin")
	site := r.Header.Get("Sec-Fetch-Site")
	switch {
	case site == "same-origin" || site == "none":
		// The browser says the page is the gateway's own (or the user
		// typed the address); a page cannot forge the header. Behind a
		// proxy that rewrites Host, Origin and Host differ all the same.
	case origin != "" && !operatorRoute(r.URL.Path) && s.opt.CORS.allows(origin):
		c := &s.opt.CORS
		h := w.Header()
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			method, headers := r.Header.Get("Access-Control-Request-Method"), r.Header.Get("Access-Control-Request-Headers")
			if !c.allowsMethod(method) || !c.allowsHeaders(headers) {
				// No Access-Control-Allow-* header: the browser refuses
				// the request it asked about.
				return false, &chat.Error{Category: chat.CategoryPermissionDenied, Code: "cors_preflight_refused",
					Message: "cross-origin " + quoteValue(method) + " with headers " + quoteValue(headers) +
						" is not allowed: see cors.allowed_methods and cors.allowed_headers"}
			}
			h.Set("Access-Control-Allow-Origin", origin)
			if c.AllowCredentials {
				h.Set("Access-Control-Allow-Credentials", "true")
			}
			h.Set("Access-Control-Allow-Methods", c.methods())
			if headers != "" {
				h.Set("Access-Control-Allow-Headers", headers)
			}
			h.Set("Access-Control-Max-Age", c.maxAge())
			w.WriteHeader(http.StatusNoContent)
			return true, nil
		}
		h.Set("Access-Control-Allow-Origin", origin)
		if c.AllowCredentials {
			h.Set("Access-Control-Allow-Credentials", "true")
		}
		h.Set("Access-Control-Expose-Headers", c.exposed())
	case origin != "" && !sameOrigin(origin, r.Host):
		return false, &chat.Error{Category: chat.CategoryPermissionDenied, Code: "cross_origin_refused",
			Message: "requests from pages on " + quoteValue(origin) + " are refused: add the origin to cors.allowed_origins to allow them"}
	case origin == "" && fromAnotherPage(r):
		return false, &chat.Error{Category: chat.CategoryPermissionDenied, Code: "cross_origin_refused",
			Message: "requests from pages on other origins are refused: add the page's origin to cors.allowed_origins to allow them"}
	}
	if !s.hostAllowed(r) {
		return false, &chat.Error{Category: chat.CategoryPermissionDenied, Code: "host_refused",
			Message: "this gateway runs in local mode and answers only to loopback host names, not " + quoteValue(r.Host) +
				": add the name to allowed_hosts, or create an API key"}
	}
	if (r.Method == http.MethodPost || r.Method == http.MethodPatch) && r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
		return false, &chat.Error{Category: chat.CategoryUnsupportedMedia,
			Message: "the request body must be JSON: send Content-Type: application/json (with curl: -H 'Content-Type: application/json')"}
	}
	return false, nil
}

// operatorRoute reports whether path is one of the operators' routes
// (/admin/*, /metrics): CORS never opens them to another origin's pages.
func operatorRoute(path string) bool {
	return strings.HasPrefix(path, "/admin/") || path == "/admin" || path == "/metrics"
}

// crossSite reports whether a browser says another origin's page made the
// request: an Origin other than the server's own, or Fetch Metadata.
func crossSite(r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) {
		return true
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	}
	return false
}

// fromAnotherPage reports whether the browser says a page of another
// origin made the request (Fetch Metadata): another site, or another port
// of this one. A top-level navigation to a page (a link to the chat page)
// is not refused; a frame, an image, a script, a fetch, and a navigation
// to the API or the operators' routes (a profile a page could start with
// window.open) are.
func fromAnotherPage(r *http.Request) bool {
	h := r.Header
	switch h.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		page := h.Get("Sec-Fetch-Mode") == "navigate" && h.Get("Sec-Fetch-Dest") == "document" &&
			!strings.HasPrefix(r.URL.Path, "/v1/") && !strings.HasPrefix(r.URL.Path, "/admin/")
		return !page
	}
	return false
}

// sameOrigin reports whether origin (scheme://host[:port]) names the host
// the request was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// hostAllowed reports whether the request's Host may be served: any host
// once keys exist; in local mode, loopback names, the listen host and the
// configured allowed hosts.
func (s *Server) hostAllowed(r *http.Request) bool {
	if s.opt.Auth == nil {
		return true
	}
	local, err := s.opt.Auth.Local(r.Context())
	if err != nil || !local {
		return true // authentication decides
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return slices.Contains(s.allowedHosts, host)
}

// isJSON reports whether a Content-Type is JSON: application/json or a
// +json type, with any parameters.
func isJSON(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// quoteValue quotes a client's value for an error message, cut to a short
// prefix: an error must not echo a megabyte back.
func quoteValue(v string) string {
	const max = 64
	if len(v) > max {
		cut := max
		for cut > 0 && !isRuneStart(v[cut]) {
			cut--
		}
		return strconv.Quote(v[:cut]) + "..."
	}
	return strconv.Quote(v)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
