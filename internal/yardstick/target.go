// Package yardstick measures streaming LLM endpoints side by side: any
// number of targets (OpenAI Chat Completions, Anthropic Messages, OpenAI
// Responses, firstword's /v1/chat), in alternating rounds over a sweep of
// concurrency levels, for time to first byte, time to first word, time to
// complete, chunk gaps, tokens per second and errors; with firstword's fake
// upstream in the path, whether and how fast each target cancels the
// upstream and what it does when the upstream drops. It reports a table,
// JSON and a self-contained HTML page with plots.
package yardstick

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Surface is the wire format a target speaks.
type Surface string

// The surfaces a target can speak.
const (
	SurfaceOpenAI    Surface = "openai"    // POST /v1/chat/completions, stream: true
	SurfaceAnthropic Surface = "anthropic" // POST /v1/messages, stream: true
	SurfaceResponses Surface = "responses" // POST /v1/responses, stream: true
	SurfaceChat      Surface = "chat"      // firstword's POST /v1/chat
)

// defaultPaths is where each surface lives when a target's URL names no path.
var defaultPaths = map[Surface]string{
	SurfaceOpenAI:    "/v1/chat/completions",
	SurfaceAnthropic: "/v1/messages",
	SurfaceResponses: "/v1/responses",
	SurfaceChat:      "/v1/chat",
}

// ParseSurface checks a surface name.
func ParseSurface(s string) (Surface, error) {
	if _, ok := defaultPaths[Surface(s)]; ok {
		return Surface(s), nil
	}
	return "", fmt.Errorf("unknown surface %q (want openai, anthropic, responses or chat)", s)
}

// GuessSurface names the surface a URL path points at, or "" when the path
// says nothing.
func GuessSurface(path string) Surface {
	path = strings.TrimRight(path, "/")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return SurfaceOpenAI
	case strings.HasSuffix(path, "/messages"):
		return SurfaceAnthropic
	case strings.HasSuffix(path, "/responses"):
		return SurfaceResponses
	case strings.HasSuffix(path, "/v1/chat"):
		return SurfaceChat
	}
	return ""
}

// Target is one endpoint under measurement.
type Target struct {
	Name    string
	URL     string // the endpoint itself, path included, once Resolve ran
	Surface Surface
	Model   string
	Headers [][2]string
	// APIKeyEnv names the environment variable holding the key; the key
	// itself is kept unexported so that no report can carry it.
	APIKeyEnv string
	PID       int
	apiKey    string
}

// SetAPIKey sets the key sent to the target.
func (t *Target) SetAPIKey(k string) { t.apiKey = k }

// Resolve completes the target: the surface from the URL path when not
// given, the surface's default path when the URL has none, and a model.
func (t *Target) Resolve() error {
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("target %s: want an http or https URL, got %q", t.Name, RedactURL(t.URL))
	}
	guess := GuessSurface(u.Path)
	if t.Surface == "" {
		t.Surface = guess
		if t.Surface == "" {
			t.Surface = SurfaceOpenAI
		}
	}
	if guess == "" {
		// A base URL, as SDKs take it: "" or ".../v1".
		switch base := strings.TrimRight(u.Path, "/"); {
		case base == "":
			u.Path = defaultPaths[t.Surface]
		case strings.HasSuffix(base, "/v1"):
			u.Path = base + strings.TrimPrefix(defaultPaths[t.Surface], "/v1")
		}
	}
	t.URL = u.String()
	if t.Model == "" {
		t.Model = "chat"
	}
	return nil
}

// Loopback reports whether the target's host is a loopback address or
// localhost.
func (t *Target) Loopback() bool {
	u, err := url.Parse(t.URL)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// PublicURL is the URL as reports show it: without user information or
// query, where a key could hide.
func (t *Target) PublicURL() string { return RedactURL(t.URL) }

// RedactURL is s without the user information, query and fragment of a
// URL, where a key could hide; "[redacted]" when s does not parse.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "[redacted]"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://\S*`)

// RedactText is s with every URL in it redacted as RedactURL does.
func RedactText(s string) string { return urlInText.ReplaceAllStringFunc(s, RedactURL) }

var targetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// SplitAssign splits a per-target flag value NAME=VALUE.
func SplitAssign(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", errors.New("want NAME=VALUE, got no '=' (the value is not shown: it may be a key)")
	}
	if !targetName.MatchString(name) {
		return "", "", fmt.Errorf("want NAME=VALUE with a NAME of letters, digits, '.', '_' and '-', got NAME %q", name)
	}
	return name, value, nil
}

// SplitHeader splits a header value K:V.
func SplitHeader(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, ":")
	k = strings.TrimSpace(k)
	if !ok || k == "" || strings.ContainsAny(k, " \t\r\n") || strings.ContainsAny(v, "\r\n") {
		return "", "", fmt.Errorf("want a header K:V (the value is not shown: it may be a key)")
	}
	return k, strings.TrimSpace(v), nil
}
