// Package gatewaytest runs a gateway on a loopback socket for tests, with
// the fakes and the minimal clients the end-to-end tests share: an
// upstream that records its requests, SSE writers for it, a raw event
// reader, and config parsing that fails the test.
package gatewaytest

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/config"
)

// Upstream is a fake provider on a real socket. It records each request's
// body, and when each request saw the client (the gateway) go away: a
// time on Closed per request.
type Upstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	Closed chan time.Time
}

// NewUpstream serves h on a loopback socket until the test ends; h sees
// the request with its body already read (Requests has it).
func NewUpstream(t testing.TB, h func(w http.ResponseWriter, r *http.Request)) *Upstream {
	t.Helper()
	u := &Upstream{Closed: make(chan time.Time, 16)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		go func() {
			<-r.Context().Done()
			u.Closed <- time.Now()
		}()
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// Requests returns the bodies of the requests served so far, in order.
func (u *Upstream) Requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

// SSEWrite writes raw bytes and flushes; it reports whether both worked.
func SSEWrite(w http.ResponseWriter, s string) bool {
	if _, err := io.WriteString(w, s); err != nil {
		return false
	}
	return http.NewResponseController(w).Flush() == nil
}

// SSEHeaders sends an event stream's status and headers at once.
func SSEHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
}

// ChunkJSON is an OpenAI chunk event carrying text.
func ChunkJSON(text string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
}

// FinishJSON ends an OpenAI stream: a stop, usage (7 in, 5 out) and
// [DONE].
const FinishJSON = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}` + "\n\n" +
	"data: [DONE]\n\n"

// MinimalConfig is a minimal config file, exactly: one alias, chat,
// on an OpenAI-compatible upstream at {{UP}} (see StartYAML).
const MinimalConfig = `listen: 127.0.0.1:8080
providers:
  local:
    type: openai
    base_url: {{UP}}/v1
    api_key_env: LOCAL_API_KEY      # unset is fine for servers that need no key
models:
  chat:
    deployments:
      - provider: local
        model: mock-model
`

// Post sends a chat completion request with the header name, value
// pairs in hdr.
func Post(t testing.TB, url, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Event is one SSE event or comment read by a test client, with when it
// arrived.
type Event struct {
	At      time.Time
	Comment bool
	Data    string // the data lines, joined without newlines; a comment's whole line
	Name    string
}

// ReadEvents reads a raw event stream line by line, as a minimal client,
// until the stream ends.
func ReadEvents(r io.Reader) []Event {
	var out []Event
	br := bufio.NewReader(r)
	var cur Event
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return out
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if cur.Data != "" || cur.Comment {
				cur.At = time.Now()
				out = append(out, cur)
			}
			cur = Event{}
		case strings.HasPrefix(line, ":"):
			out = append(out, Event{At: time.Now(), Comment: true, Data: line})
		case strings.HasPrefix(line, "data: "):
			cur.Data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		}
	}
}

// MustParse parses a config from YAML text with an empty environment.
func MustParse(t testing.TB, yamlText string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yamlText), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// MustParseEnv parses a config from YAML text with the process's
// environment.
func MustParseEnv(t testing.TB, yamlText string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yamlText), os.Getenv)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// PostPath posts a JSON body to base+path.
func PostPath(t testing.TB, base, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// MetricLine waits for /metrics to have a sample line starting with
// prefix (a name and its labels in the exposition's order) and returns it.
func MetricLine(t testing.TB, gw *Gateway, prefix string) string {
	t.Helper()
	var last string
	for range 100 {
		resp, err := http.Get(gw.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = string(b)
		for _, line := range strings.Split(last, "\n") {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("/metrics has no %s", prefix)
	return ""
}

// GetJSON sends a GET, with key as a bearer token unless it is empty, and
// returns the status and the JSON object answered (nil if it is none).
func GetJSON(t testing.TB, url, key string) (int, map[string]any) {
	t.Helper()
	var v map[string]any
	return getInto(t, url, key, &v), v
}

// getInto GETs url with key (none: no Authorization) and decodes the
// JSON answer into v; it returns the status.
func getInto(t testing.TB, url, key string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(v)
	return resp.StatusCode
}
