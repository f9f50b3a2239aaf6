// Package bench measures firstword against a direct connection to the same
// fake upstream, in one run: added time to first token and added total
// time at p50/p99, streams per second, CPU per request and memory per open
// stream. The gateway runs as its own process so that its CPU and memory
// can be read from /proc.
package bench

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Upstream is a fake OpenAI-compatible streaming server with fixed timing.
// Its chunks are rendered once, so its own cost is as small as possible
// and the same on both paths.
type Upstream struct {
	TTFT   time.Duration
	Gap    time.Duration
	Chunks int
	// Thinking is how many thinking chunks (delta.reasoning_content, as
	// DeepSeek and vLLM stream it) come before the Chunks of answer.
	Thinking int
	// Hold keeps each stream open after its first chunk until Release.
	Hold bool

	once    sync.Once
	chunks  [][]byte
	tail    []byte
	release chan struct{}
}

func (u *Upstream) init() {
	u.once.Do(func() {
		for i := range u.Thinking {
			u.chunks = append(u.chunks, fmt.Appendf(nil,
				`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"reasoning_content":" thought%d"},"logprobs":null,"finish_reason":null}]}`+"\n\n", i))
		}
		for i := range u.Chunks {
			u.chunks = append(u.chunks, fmt.Appendf(nil,
				`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"content":" tok%d"},"logprobs":null,"finish_reason":null}]}`+"\n\n", i))
		}
		u.tail = []byte(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":` + fmt.Sprint(u.Chunks) + `,"total_tokens":` + fmt.Sprint(u.Chunks+10) + `}}` + "\n\n" +
			"data: [DONE]\n\n")
		u.release = make(chan struct{})
	})
}

// Release ends every held stream.
func (u *Upstream) Release() {
	u.init()
	close(u.release)
}

func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.init()
	if r.Body != nil {
		buf := make([]byte, 512)
		for {
			if _, err := r.Body.Read(buf); err != nil {
				break
			}
		}
	}
	ctx := r.Context()
	rc := http.NewResponseController(w)
	var timer *time.Timer
	wait := func(d time.Duration) bool {
		if d <= 0 {
			return ctx.Err() == nil
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	if !wait(u.TTFT) {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i, c := range u.chunks {
		if i > 0 && !wait(u.Gap) {
			return
		}
		if _, err := w.Write(c); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if u.Hold && i == 0 {
			select {
			case <-ctx.Done():
				return
			case <-u.release:
			}
		}
	}
	w.Write(u.tail)
	rc.Flush()
}

// The slow upstream's pace: 10 chunks a second, for 12 seconds.
const (
	SlowGap    = 100 * time.Millisecond
	SlowChunks = 120
)

// Upstreams serves the benchmark's three fake upstreams under path
// prefixes: /real (TTFT 50 ms, 100 chunks 5 ms apart), /zero (20 chunks, no
// delay), /hold (one chunk, then held open until the process ends) and
// /slow (a real model's pace: SlowChunks chunks SlowGap apart).
func Upstreams() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/real/", http.StripPrefix("/real", &Upstream{TTFT: 50 * time.Millisecond, Gap: 5 * time.Millisecond, Chunks: 100}))
	mux.Handle("/zero/", http.StripPrefix("/zero", &Upstream{Chunks: 20}))
	mux.Handle("/hold/", http.StripPrefix("/hold", &Upstream{Chunks: 2, Hold: true}))
	mux.Handle("/slow/", http.StripPrefix("/slow", &Upstream{Gap: SlowGap, Chunks: SlowChunks}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	return mux
}
