package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/sse"
)

// LeverConfig is the gateway config the lever table runs against: the
// sim's medium and small tiers as in the lesson, with a "medium" alias
// (with prompt caching, which the prefix-cache rows need: the sim caches
// only marked prefixes) and a "medium-capped" alias for the answer cap.
const LeverConfig = `
heartbeat: 30s
providers:
  sim: {type: sim, seed: 7}
models:
  medium:
    prompt_caching: true
    deployments: [{provider: sim, model: medium}]
  medium-capped:
    max_tokens: 100
    deployments: [{provider: sim, model: medium}]
  small:
    deployments: [{provider: sim, model: small}]
`

// Lever is one row of the lesson's table, measured.
type Lever struct {
	Name, How                string
	N                        int
	FirstWord50, FirstWord95 time.Duration
	Total50, Total95         time.Duration
	Cost50, Cost95           float64 // USD per request
}

// LeverOptions sizes the run.
type LeverOptions struct {
	Requests, Concurrency int
	// Cost returns what the gateway metered for a request ID.
	Cost func(requestID string) float64
	Log  io.Writer
}

type leverSample struct {
	first, total time.Duration
	cost         float64
}

// RunLevers measures each lever against the gateway at url.
func RunLevers(ctx context.Context, url string, o LeverOptions) ([]Lever, error) {
	if o.Requests <= 0 {
		o.Requests = 20
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 10
	}
	client := NewClient(o.Concurrency * 2)
	defer client.CloseIdleConnections()
	const answer = "tokens=300"
	system := strings.Repeat("You are the support assistant of an online shop that sells outdoor gear. Be accurate and kind. ", 12)
	body := func(model, msg string, stream, deterministic bool, sys string) string {
		temp := ""
		if deterministic {
			temp = `"temperature":0,`
		}
		msgs := ""
		if sys != "" {
			msgs = fmt.Sprintf(`{"role":"system","content":%q},`, sys)
		}
		return fmt.Sprintf(`{"model":%q,"stream":%v,%s"messages":[%s{"role":"user","content":%q}]}`, model, stream, temp, msgs, msg)
	}
	var levers []Lever
	run := func(name, how string, prepare func() error, mk func(i int) string, stream bool) error {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "lever: %s\n", name)
		}
		if prepare != nil {
			if err := prepare(); err != nil {
				return err
			}
		}
		samples, err := leverBatch(ctx, client, url, o, mk, stream)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		levers = append(levers, summarize(name, how, samples))
		return nil
	}
	q := func(i int, extra string) string {
		return fmt.Sprintf("Question %d: where does the time go in a chat request? [sim %s%s]", i, answer, extra)
	}
	steps := []struct {
		name, how string
		prepare   func() error
		mk        func(i int) string
		stream    bool
	}{
		{"baseline", "medium tier, 300-token answer, not streamed", nil, func(i int) string { return body("medium", q(i, ""), false, false, "") }, false},
		{"stream the answer", "the same, streamed", nil, func(i int) string { return body("medium", q(i+1000, ""), true, false, "") }, true},
		{"ask for a shorter answer", "streamed, answer capped at 100 tokens", nil, func(i int) string { return body("medium-capped", q(i+2000, ""), true, false, "") }, true},
		{"smaller model", "streamed, small tier", nil, func(i int) string { return body("small", q(i+3000, ""), true, false, "") }, true},
		{"cache hit", "streamed, the same deterministic request again",
			func() error {
				_, err := leverOne(ctx, client, url, body("medium", q(4000, ""), true, true, ""), o.Cost, true)
				return err
			},
			func(int) string { return body("medium", q(4000, ""), true, true, "") }, true},
		{"coalesced duplicate", "streamed, identical deterministic requests in flight together", nil,
			func(i int) string { return body("medium", q(5000+i/o.Concurrency, " ttft=600ms"), true, true, "") }, true},
		{"long prompt, not cached", "streamed, a 280-token system prompt new to the provider (the prefix cache's baseline)", nil,
			func(i int) string {
				return body("medium", q(7000+i, ""), true, false, fmt.Sprintf("Session %d. ", i)+system)
			}, true},
		{"prefix cache", "streamed, the same 280-token system prompt, cached by the provider",
			func() error {
				_, err := leverOne(ctx, client, url, body("medium", q(6000, ""), true, false, system), o.Cost, true)
				return err
			},
			func(i int) string { return body("medium", q(6001+i, ""), true, false, system) }, true},
	}
	for _, s := range steps {
		if err := run(s.name, s.how, s.prepare, s.mk, s.stream); err != nil {
			return nil, err
		}
	}
	// The cache hit's tail, from more samples, one at a time.
	var first []float64
	for range 200 {
		s, err := leverOne(ctx, client, url, body("medium", q(4000, ""), true, true, ""), nil, true)
		if err != nil {
			return nil, err
		}
		first = append(first, ms(s.first))
	}
	levers = append(levers, Lever{Name: "cache hit, 200 in a row", How: "first word p50 / p99", N: 200,
		FirstWord50: time.Duration(pct(first, 50) * float64(time.Millisecond)), FirstWord95: time.Duration(pct(first, 99) * float64(time.Millisecond))})
	return levers, nil
}

// leverBatch sends o.Requests requests, o.Concurrency at a time, starting
// each wave together (so identical requests of a wave are in flight at
// once).
func leverBatch(ctx context.Context, c *http.Client, url string, o LeverOptions, mk func(int) string, stream bool) ([]leverSample, error) {
	var out []leverSample
	var mu sync.Mutex
	var firstErr error
	for start := 0; start < o.Requests; start += o.Concurrency {
		var wg sync.WaitGroup
		for i := start; i < min(start+o.Concurrency, o.Requests); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := leverOne(ctx, c, url, mk(i), o.Cost, stream)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				out = append(out, s)
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return nil, firstErr
		}
	}
	return out, nil
}

func leverOne(ctx context.Context, c *http.Client, url, body string, cost func(string) float64, stream bool) (leverSample, error) {
	var s leverSample
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return s, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		io.Copy(io.Discard, resp.Body)
		s.total = time.Since(start)
		s.first = s.total // nothing to read until the whole answer arrives
	} else {
		rd := sse.NewReader(resp.Body, 0)
		for {
			ev, err := rd.Next()
			if err != nil {
				return s, fmt.Errorf("stream: %v", err)
			}
			if bytes.Equal(ev.Data, []byte("[DONE]")) {
				break
			}
			if s.first == 0 && bytes.Contains(ev.Data, contentMarker) && !bytes.Contains(ev.Data, []byte(`"content":""`)) {
				s.first = time.Since(start)
			}
		}
		s.total = time.Since(start)
	}
	if cost != nil {
		s.cost = cost(resp.Header.Get("X-Request-Id"))
	}
	return s, nil
}

func summarize(name, how string, ss []leverSample) Lever {
	var first, total, cost []float64
	for _, s := range ss {
		first = append(first, ms(s.first))
		total = append(total, ms(s.total))
		cost = append(cost, s.cost)
	}
	d := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return Lever{Name: name, How: how, N: len(ss),
		FirstWord50: d(pct(first, 50)), FirstWord95: d(pct(first, 95)),
		Total50: d(pct(total, 50)), Total95: d(pct(total, 95)),
		Cost50: pct(cost, 50), Cost95: pct(cost, 95)}
}

// LeverTable renders the measured table next to the lesson's.
func LeverTable(ls []Lever, command string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured with `%s` against the built-in sim (medium tier: TTFT about 600 ms, 80 tokens/s; small: about 300 ms, 150 tokens/s; timings jittered), %d requests per lever. Cost is what the gateway metered, in USD per request, at the sim's illustrative prices.\n\n", command, ls[0].N)
	b.WriteString("| lever | how | first word p50 / p95 | total p50 / p95 | cost p50 / p95 |\n|---|---|---|---|---|\n")
	f := func(d time.Duration) string {
		if d < 10*time.Millisecond {
			return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
		}
		if d < time.Second {
			return fmt.Sprintf("%d ms", d.Milliseconds())
		}
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	for _, l := range ls[:len(ls)-1] {
		fmt.Fprintf(&b, "| %s | %s | %s / %s | %s / %s | $%.6f / $%.6f |\n", l.Name, l.How, f(l.FirstWord50), f(l.FirstWord95), f(l.Total50), f(l.Total95), l.Cost50, l.Cost95)
	}
	last := ls[len(ls)-1]
	fmt.Fprintf(&b, "\nCache hits, %d in a row: first word p50 %s, **p99 %s**.\n", last.N, f(last.FirstWord50), f(last.FirstWord95))
	return b.String()
}
