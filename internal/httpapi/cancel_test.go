package httpapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/openai"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/sse"
)

// order records, in order, what happened to one request.
type order struct {
	mu      sync.Mutex
	events  []string
	metered chan struct{}
}

func (o *order) add(ev string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, ev)
}

func (o *order) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.events...)
}

// Record is the ending's metering: the first thing that persists it.
func (o *order) Record(context.Context, *metering.Record) {
	o.add("metered")
	close(o.metered)
}

// closeRecorder is an upstream connection that records its closing.
type closeRecorder struct {
	net.Conn
	o    *order
	once sync.Once
}

func (c *closeRecorder) Close() error {
	c.once.Do(func() { c.o.add("upstream connection closed") })
	return c.Conn.Close()
}

// TestUpstreamClosedBeforeEnding, on real sockets (client → gateway →
// OpenAI-compatible upstream): when the client leaves, mid-stream or
// before the first token, the gateway closes its upstream connection
// before the ending is metered (and the upstream sees it close), so that
// nothing the ending does sits between the client's close and the
// upstream's.
func TestUpstreamClosedBeforeEnding(t *testing.T) {
	for _, mode := range []string{"mid-stream", "before the first token"} {
		t.Run(mode, func(t *testing.T) {
			o := &order{metered: make(chan struct{})}
			arrived, upstreamSaw := make(chan struct{}), make(chan struct{})
			stop := make(chan struct{}) // a failed test's upstream ends too
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Read to its end: net/http watches for the close only then.
				io.Copy(io.Discard, r.Body)
				close(arrived)
				defer close(upstreamSaw)
				if mode == "mid-stream" {
					w.Header().Set("Content-Type", "text/event-stream")
					for i := 0; r.Context().Err() == nil; i++ {
						fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"w%d "},"finish_reason":null}]}`+"\n\n", i)
						w.(http.Flusher).Flush()
						select {
						case <-r.Context().Done():
						case <-time.After(5 * time.Millisecond):
						}
					}
				}
				select {
				case <-r.Context().Done():
				case <-stop:
				}
			}))
			defer up.Close()
			defer close(stop)
			tr := provider.NewTransport()
			dial := tr.DialContext
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &closeRecorder{Conn: c, o: o}, nil
			}
			defer tr.CloseIdleConnections()
			p := openai.New(openai.Config{HTTPConfig: provider.HTTPConfig{Name: "up", BaseURL: up.URL + "/v1", Client: &http.Client{Transport: tr}}})
			r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "up", Model: "m", Provider: p}}}}})
			if err != nil {
				t.Fatal(err)
			}
			gw := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: o}))
			defer gw.Close()

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Content-Type", "application/json")
			if mode == "mid-stream" {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				rd := sse.NewReader(resp.Body, 0)
				for range 2 {
					if _, err := rd.Next(); err != nil {
						t.Fatalf("reading the stream: %v", err)
					}
				}
				cancel()
				resp.Body.Close()
			} else {
				go func() {
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}()
				<-arrived
				cancel()
			}
			for _, w := range []struct {
				name string
				ch   chan struct{}
			}{{"the upstream to see the close", upstreamSaw}, {"the ending to be metered", o.metered}} {
				select {
				case <-w.ch:
				case <-time.After(10 * time.Second):
					t.Fatalf("waited 10 s for %s; so far: %v", w.name, o.list())
				}
			}
			if got, want := o.list(), []string{"upstream connection closed", "metered"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("order %q, want %q", got, want)
			}
		})
	}
}
