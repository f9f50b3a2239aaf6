package yardstick

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/bench"
)

// Upstream is firstword's fake OpenAI-compatible upstream (bench.Upstream)
// serving every POST path, with a memory of probes: a request whose
// prompt carries a registered probe id gets the probe's scenario, and the
// upstream notes when the request arrived and when its client (the
// target) went away.
type Upstream struct {
	URL string

	srv    *http.Server
	normal *bench.Upstream
	slow   *bench.Upstream
	silent *bench.Upstream
	mu     sync.Mutex
	probes map[string]*probe
}

// Pace is how the upstream streams requests that are not probes.
type Pace struct {
	TTFT   time.Duration
	Gap    time.Duration
	Chunks int
}

type scenario int

const (
	// scenarioSlow streams a chunk every 20 ms for half a minute: the
	// client leaves mid-stream.
	scenarioSlow scenario = iota
	// scenarioSilent sends nothing for half a minute: the client leaves
	// before the first token.
	scenarioSilent
	// scenarioDrop sends dropAfter chunks, then cuts the connection.
	scenarioDrop
)

const dropAfter = 5

// probe is one fault measurement's request as the upstream saw it.
type probe struct {
	scen     scenario
	arrived  chan struct{} // closed when the request came in
	gone     chan struct{} // closed when its client went away mid-answer
	goneAt   time.Time
	arriveOn sync.Once
	goneOn   sync.Once // a target that retries sends the probe again
}

var probeID = regexp.MustCompile(`probe-[0-9a-f]{16}`)

// StartUpstream serves the fake upstream on addr ("127.0.0.1:0" picks a
// port) until ctx ends.
func StartUpstream(ctx context.Context, addr string, pace Pace) (*Upstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	u := &Upstream{URL: "http://" + ln.Addr().String(), probes: map[string]*probe{},
		normal: &bench.Upstream{TTFT: pace.TTFT, Gap: pace.Gap, Chunks: pace.Chunks},
		slow:   &bench.Upstream{Gap: 20 * time.Millisecond, Chunks: 1500},
		silent: &bench.Upstream{TTFT: 30 * time.Second, Chunks: 1}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("POST /", u.serve)
	u.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go u.srv.Serve(ln)
	context.AfterFunc(ctx, func() { u.srv.Close() })
	return u, nil
}

// Close stops the upstream.
func (u *Upstream) Close() error { return u.srv.Close() }

// newProbe registers a probe and returns the prompt that carries its id.
func (u *Upstream) newProbe(s scenario) (string, *probe) {
	var b [8]byte
	rand.Read(b[:])
	id := "probe-" + hex.EncodeToString(b[:])
	p := &probe{scen: s, arrived: make(chan struct{}), gone: make(chan struct{})}
	u.mu.Lock()
	u.probes[id] = p
	u.mu.Unlock()
	return "benchmark " + id, p
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	var p *probe
	if id := probeID.Find(body); id != nil {
		u.mu.Lock()
		p = u.probes[string(id)]
		u.mu.Unlock()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if p == nil {
		u.normal.ServeHTTP(w, r)
		return
	}
	p.arriveOn.Do(func() { close(p.arrived) })
	ctx := r.Context()
	// The request's context ends when the client's connection closes, or
	// after the handler returns: only the first means the client left.
	gone := func() {
		at := time.Now()
		p.goneOn.Do(func() {
			p.goneAt = at
			close(p.gone)
		})
	}
	stop := context.AfterFunc(ctx, gone)
	defer stop()
	// The slow and silent answers last half a minute: one that returns
	// sooner does so because its client left, which a failed write can
	// show before the request's context does.
	start := time.Now()
	switch p.scen {
	case scenarioSlow:
		u.slow.ServeHTTP(w, r)
		if time.Since(start) < 29*time.Second {
			gone()
		}
	case scenarioSilent:
		u.silent.ServeHTTP(w, r)
		if time.Since(start) < 29*time.Second {
			gone()
		}
	case scenarioDrop:
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range dropAfter {
			fmt.Fprintf(w, `data: {"id":"chatcmpl-drop","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"content":" drop%d"},"finish_reason":null}]}`+"\n\n", i)
			if rc.Flush() != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		panic(http.ErrAbortHandler) // the connection is cut, no end marker
	}
}
