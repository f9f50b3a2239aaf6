package cli_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/cli"
	"github.com/firstword/firstword/internal/config"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// gateway is a running firstword on a real socket.
type gateway struct {
	*cli.App
	URL string
}

// startGateway builds firstword from YAML text (with {{UP}} replaced by
// the upstream's URL) and serves it with App.Serve on a loopback socket.
func startGateway(t testing.TB, yamlText, upstream string) *gateway {
	t.Helper()
	yamlText = strings.ReplaceAll(yamlText, "{{UP}}", upstream)
	cfg, err := config.Parse("test.yaml", []byte(yamlText), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return startApp(t, cfg)
}

func startApp(t testing.TB, cfg *config.Config) *gateway {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	app, err := cli.Build(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		app.Close()
	})
	return &gateway{App: app, URL: "http://" + ln.Addr().String()}
}

// upstream is a fake provider on a real socket that records when each of
// its requests saw the client (the gateway) go away.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	closed chan time.Time
}

func newUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{closed: make(chan time.Time, 16)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		go func() {
			<-r.Context().Done()
			u.closed <- time.Now()
		}()
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

// sseWrite writes raw bytes and flushes.
func sseWrite(w http.ResponseWriter, s string) bool {
	if _, err := io.WriteString(w, s); err != nil {
		return false
	}
	return http.NewResponseController(w).Flush() == nil
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
}

// chunkJSON is an OpenAI chunk event carrying text.
func chunkJSON(text string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
}

const finishJSON = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
	`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}` + "\n\n" +
	"data: [DONE]\n\n"

// minimalConfig is the minimal file, exactly, with the upstream's
// address substituted.
const minimalConfig = `listen: 127.0.0.1:8080
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

// post sends a chat completion request.
func post(t *testing.T, url, body string, hdr ...string) *http.Response {
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

// event is one SSE event or comment read by a test client, with when it
// arrived.
type event struct {
	at      time.Time
	comment bool
	data    string
	name    string
}

// readEvents reads a raw event stream line by line, as a minimal client.
func readEvents(r io.Reader) []event {
	var out []event
	br := bufio.NewReader(r)
	var cur event
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return out
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if cur.data != "" || cur.comment {
				cur.at = time.Now()
				out = append(out, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, ":"):
			out = append(out, event{at: time.Now(), comment: true, data: line})
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		}
	}
}

func mustParse(t testing.TB, yamlText string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yamlText), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func mustParseEnv(t testing.TB, yamlText string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yamlText), os.Getenv)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func postPath(t *testing.T, base, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// metricLine waits for /metrics to have a sample line starting with
// prefix (a name and its labels in the exposition's order) and returns it.
func metricLine(t *testing.T, gw *gateway, prefix string) string {
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
