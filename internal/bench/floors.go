package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/sse"
)

// SlowCPUResult is the slow-streams phase: CPU per chunk delivered while
// many streams at a real model's pace are open, per round.
type SlowCPUResult struct {
	Streams int
	Window  time.Duration
	// Per round, in alternating order: the gateway's and ReverseProxy's CPU
	// per chunk, and the chunks delivered in the window.
	Gateway, Proxy             []time.Duration
	GatewayChunks, ProxyChunks []int64
	// Parsed is ReverseProxy reading every event on its way, with each
	// of Parsers (bench-proxy --parse), in the same rounds.
	Parsed []ParsedCPU
}

// ParsedCPU is one parsing ReverseProxy's CPU per chunk and chunks per
// window, per round.
type ParsedCPU struct {
	Parser string
	CPU    []time.Duration
	Chunks []int64
}

// slowCPU opens n streams at the slow upstream's pace through url, waits
// until they are all open and settled, and returns p's CPU time per chunk
// the clients received over window.
func slowCPU(ctx context.Context, p *Process, url, model string, n int, window time.Duration) (time.Duration, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := NewClient(n)
	defer c.CloseIdleConnections()
	var chunks, open, failed atomic.Int64
	var firstErr atomic.Value
	sem := make(chan struct{}, 100)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			err := countChunks(ctx, c, url, model, &chunks, func() { open.Add(1); <-sem })
			if err != nil && ctx.Err() == nil {
				// A stream cut short is counted, not fatal: the chunks
				// delivered are what the CPU is divided by.
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for open.Load() < int64(n) {
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("only %d of %d slow streams opened", open.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // the opening's own work settles
	c0, err := p.CPU()
	if err != nil {
		return 0, 0, err
	}
	n0 := chunks.Load()
	time.Sleep(window)
	c1, err := p.CPU()
	if err != nil {
		return 0, 0, err
	}
	delivered := chunks.Load() - n0
	cancel()
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil && failed.Load() > int64(n)/100 {
		return 0, 0, fmt.Errorf("%d of %d streams failed: %w", failed.Load(), n, err)
	}
	if delivered == 0 {
		return 0, 0, fmt.Errorf("no chunks delivered in the window")
	}
	return (c1 - c0) / time.Duration(delivered), delivered, nil
}

// countChunks reads one stream, counting its content events; opened is
// called once the response headers arrived.
func countChunks(ctx context.Context, c *http.Client, url, model string, chunks *atomic.Int64, opened func()) error {
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(requestBody(model)))
	if err != nil {
		opened()
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	opened()
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if bytes.Contains(ev.Data, contentMarker) && !bytes.Contains(ev.Data, []byte(`"content":""`)) {
			chunks.Add(1)
		}
	}
}

// ChatResult compares /v1/chat's first word with /v1/chat/completions'
// on the same gateway (SQLite store), in alternating rounds.
type ChatResult struct {
	Concurrency, N    int
	Chat, Completions Dist
	// Per round: chat's first-word p50 and p99 minus completions'.
	Added50, Added99 []float64
}

// chatFirstWord sends one /v1/chat turn (a new conversation) and returns
// the time to its first delta and to its done event.
func chatFirstWord(ctx context.Context, c *http.Client, url, model string) (Sample, error) {
	var s Sample
	resp, start, err := postJSON(ctx, c, url+"/v1/chat", `{"model":"`+model+`","message":"benchmark"}`)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err != nil {
			return s, fmt.Errorf("chat stream: %v", err)
		}
		switch ev.Type {
		case "delta":
			if s.TTFT == 0 {
				s.TTFT = time.Since(start)
			}
		case "done":
			s.Total = time.Since(start)
			io.Copy(io.Discard, resp.Body)
			return s, nil
		case "error":
			return s, fmt.Errorf("chat error event: %s", ev.Data)
		}
	}
}

// CancelResult is the cancellation phase: how long after the client
// closed the upstream saw its connection closed, per target and moment.
type CancelResult struct {
	Concurrency, N int
	// Mid-stream (after the first chunks) and before the first token, in
	// milliseconds: p50 and p95.
	GatewayMid, ProxyMid, GatewayPre, ProxyPre Percentiles
	// The streams that failed before their close, or whose upstream never
	// saw the close within 5 s.
	Missed int
}

// Percentiles in milliseconds.
type Percentiles struct{ P50, P95 float64 }

// cancelUpstream is a fake upstream in the bench's own process, so that
// the client's close and the upstream's noticing it are read on one
// clock. Each request names itself in its message ("cancel-ID"); in "mid"
// requests the upstream streams a chunk every 10 ms, in "pre" ones it
// sends nothing.
type cancelUpstream struct {
	mu      sync.Mutex
	arrived map[string]chan struct{}
	closed  map[string]chan time.Time
}

var cancelID = regexp.MustCompile(`cancel-(mid|pre)-[0-9]+`)

func newCancelUpstream() *cancelUpstream {
	return &cancelUpstream{arrived: map[string]chan struct{}{}, closed: map[string]chan time.Time{}}
}

// expect registers a request before it is sent.
func (u *cancelUpstream) expect(id string) (arrived chan struct{}, closed chan time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	arrived, closed = make(chan struct{}), make(chan time.Time, 1)
	u.arrived[id], u.closed[id] = arrived, closed
	return arrived, closed
}

func (u *cancelUpstream) forget(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.arrived, id)
	delete(u.closed, id)
}

func (u *cancelUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := string(cancelID.Find(body))
	u.mu.Lock()
	arrived, closed := u.arrived[id], u.closed[id]
	u.mu.Unlock()
	if arrived == nil {
		http.Error(w, "unknown request", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	close(arrived)
	if strings.HasPrefix(id, "cancel-mid") {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"content":" tok%d"},"finish_reason":null}]}`+"\n\n", i)
			rc.Flush()
			select {
			case <-ctx.Done():
				closed <- time.Now()
				return
			case <-tick.C:
			}
		}
	}
	<-ctx.Done()
	closed <- time.Now()
}

// cancelRound opens conc streams at once through url and closes each
// client side, mid-stream (after three chunks) or before the first token
// (once the upstream has the request), and returns how long after each
// close the upstream saw it close, in milliseconds.
func cancelRound(ctx context.Context, u *cancelUpstream, c *http.Client, url, mode string, conc int, seq *atomic.Int64) ([]float64, int, error) {
	var mu sync.Mutex
	var out []float64
	missed, failed := 0, 0
	var firstErr error
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("cancel-%s-%d", mode, seq.Add(1))
			d, err := cancelOne(ctx, u, c, url, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == errNotClosed:
				missed++
			case err != nil:
				// A stream that failed before its close is not a sample;
				// too many fail the phase.
				failed++
				if firstErr == nil {
					firstErr = err
				}
			case err == nil:
				out = append(out, ms(d))
			}
		}()
	}
	wg.Wait()
	if failed > conc/10 {
		return out, missed, fmt.Errorf("%d of %d streams failed: %w", failed, conc, firstErr)
	}
	return out, missed + failed, nil
}

var errNotClosed = fmt.Errorf("the upstream did not see the close")

func cancelOne(ctx context.Context, u *cancelUpstream, c *http.Client, url, id string) (time.Duration, error) {
	arrived, closed := u.expect(id)
	defer u.forget(id)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body := `{"model":"cancel","stream":true,"messages":[{"role":"user","content":"` + id + `"}]}`
	req, err := http.NewRequestWithContext(rctx, "POST", url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	var t0 time.Time
	if strings.HasPrefix(id, "cancel-pre") {
		go func() {
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			return 0, fmt.Errorf("%s: the upstream never got the request", id)
		}
		time.Sleep(5 * time.Millisecond)
		t0 = time.Now()
		cancel()
	} else {
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return 0, fmt.Errorf("%s: status %d: %s", id, resp.StatusCode, b)
		}
		rd := sse.NewReader(resp.Body, 0)
		for n := 0; n < 3; {
			ev, err := rd.Next()
			if err != nil {
				resp.Body.Close()
				return 0, fmt.Errorf("%s: after %d chunks: %v", id, n, err)
			}
			if bytes.Contains(ev.Data, contentMarker) {
				n++
			}
		}
		t0 = time.Now()
		cancel()
		resp.Body.Close()
	}
	select {
	case t1 := <-closed:
		return t1.Sub(t0), nil
	case <-time.After(5 * time.Second):
		return 0, errNotClosed
	}
}

// startCancelUpstream serves u on a loopback port of this process.
func startCancelUpstream(u *cancelUpstream) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: u}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

func percentiles(v []float64) Percentiles { return Percentiles{pct(v, 50), pct(v, 95)} }

// median is the middle value, or the mean of the two middle ones.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianDuration(v []time.Duration) time.Duration {
	f := make([]float64, len(v))
	for i, d := range v {
		f[i] = float64(d)
	}
	return time.Duration(median(f))
}

// chatPhase measures /v1/chat (each request a new conversation) and
// /v1/chat/completions on the same gateway and upstream, conc at a time,
// in alternating rounds.
func chatPhase(ctx context.Context, url string, conc, n int) (*ChatResult, error) {
	c := NewClient(conc)
	defer c.CloseIdleConnections()
	// Warm both: the store's first writes and the connections.
	if _, err := batchOf(conc, conc, func() (Sample, error) { return chatFirstWord(ctx, c, url, "real") }); err != nil {
		return nil, err
	}
	res := &ChatResult{Concurrency: conc, N: n}
	const rounds = 4
	var chats, comps []Sample
	for r := range rounds {
		per := n / rounds
		if r == rounds-1 {
			per = n - (rounds-1)*(n/rounds)
		}
		ch, err := batchOf(conc, per, func() (Sample, error) { return chatFirstWord(ctx, c, url, "real") })
		if err != nil {
			return nil, fmt.Errorf("/v1/chat: %w", err)
		}
		co, err := batchOf(conc, per, func() (Sample, error) { return Stream(ctx, c, url, "real", false) })
		if err != nil {
			return nil, fmt.Errorf("/v1/chat/completions: %w", err)
		}
		dc, do := dist(ch), dist(co)
		res.Added50 = append(res.Added50, dc.TTFT50-do.TTFT50)
		res.Added99 = append(res.Added99, dc.TTFT99-do.TTFT99)
		chats, comps = append(chats, ch...), append(comps, co...)
	}
	res.Chat, res.Completions = dist(chats), dist(comps)
	return res, nil
}

// cancelPhase closes conc concurrent streams client side through the
// gateway and through ReverseProxy (both in front of u), mid-stream and
// before the first token, in alternating rounds.
func cancelPhase(ctx context.Context, u *cancelUpstream, gateway, proxy string, conc, rounds int) (*CancelResult, error) {
	c := NewClient(conc)
	defer c.CloseIdleConnections()
	var seq atomic.Int64
	res := &CancelResult{Concurrency: conc, N: conc * rounds}
	var gm, pm, gp, pp []float64
	for range rounds {
		for _, m := range []struct {
			url, mode string
			out       *[]float64
		}{{gateway, "mid", &gm}, {proxy, "mid", &pm}, {gateway, "pre", &gp}, {proxy, "pre", &pp}} {
			d, missed, err := cancelRound(ctx, u, c, m.url, m.mode, conc, &seq)
			if err != nil {
				return nil, err
			}
			*m.out = append(*m.out, d...)
			res.Missed += missed
		}
	}
	res.GatewayMid, res.ProxyMid, res.GatewayPre, res.ProxyPre = percentiles(gm), percentiles(pm), percentiles(gp), percentiles(pp)
	return res, nil
}

func (r *Report) floorsMarkdown(b *strings.Builder) {
	b.WriteString("\n### Same-run floors\n\n")
	b.WriteString("Each figure against Go's `httputil.ReverseProxy` measured in the same run, in alternating rounds; latency figures are medians over the rounds of each round's p50 minus the direct path's.\n\n")
	b.WriteString("| floor | firstword | ReverseProxy | TCP relay | |\n|---|---|---|---|---|\n")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	for _, l := range r.Latency {
		if l.Proxy == nil {
			continue
		}
		g, p, t := median(l.GatewayAdded), median(l.ProxyAdded), median(l.RelayAdded)
		switch l.Concurrency {
		case 1:
			fmt.Fprintf(b, "| added TTFT p50, concurrency 1: within +0.15 ms of ReverseProxy | %+.2f ms | %+.2f ms | %+.2f ms | %s (%+.2f ms) |\n", g, p, t, verdict(g <= p+0.15), g-p)
		default:
			fmt.Fprintf(b, "| added TTFT p50, concurrency %d: at most ReverseProxy's | %+.2f ms | %+.2f ms | %+.2f ms | %s (%+.2f ms) |\n", l.Concurrency, g, p, t, verdict(g <= p), g-p)
		}
	}
	if t := r.Through; t.Proxy > 0 {
		fmt.Fprintf(b, "| zero-delay throughput: at least ReverseProxy's | %.0f streams/s (%v CPU each) | %.0f streams/s (%v) | | %s (%.2f×) |\n",
			t.Gateway, t.GatewayCPUPerReq.Round(time.Microsecond), t.Proxy, t.ProxyCPUPerReq.Round(time.Microsecond), verdict(t.Gateway >= t.Proxy), t.Gateway/t.Proxy)
		for _, p := range t.Parsed {
			fmt.Fprintf(b, "| the same, for reference, against ReverseProxy reading each event (%s) | | %.0f streams/s (%v) | | %.2f× |\n",
				parserNames[p.Parser], p.Rate, p.CPUPerReq.Round(time.Microsecond), t.Gateway/p.Rate)
		}
	}
	if s := r.Slow; s != nil {
		g, p := medianDuration(s.Gateway), medianDuration(s.Proxy)
		fmt.Fprintf(b, "| CPU per chunk, %d streams at 10 chunks/s: at most ReverseProxy's | %.1f µs (rounds: %s) | %.1f µs (%s) | | %s (%.2f×) |\n",
			s.Streams, us(g), usList(s.Gateway), us(p), usList(s.Proxy), verdict(g <= p), float64(g)/float64(p))
		for _, q := range s.Parsed {
			m := medianDuration(q.CPU)
			fmt.Fprintf(b, "| the same, for reference, against ReverseProxy reading each event (%s) | | %.1f µs (%s) | | %.2f× |\n",
				parserNames[q.Parser], us(m), usList(q.CPU), float64(g)/float64(m))
		}
	}
	if m := r.Memory; m.Fresh != nil && m.ProxyPerStream > 0 {
		fmt.Fprintf(b, "| RSS per open stream, fresh process: at most ReverseProxy's | %.1f KiB | %.1f KiB | | %s (%.2f×) |\n",
			m.Fresh.PerStream/1024, m.ProxyPerStream/1024, verdict(m.Fresh.PerStream <= m.ProxyPerStream), m.Fresh.PerStream/m.ProxyPerStream)
	}
	if c := r.Chat; c != nil {
		a50, a99 := median(c.Added50), median(c.Added99)
		fmt.Fprintf(b, "| /v1/chat first word over /v1/chat/completions, concurrency %d, SQLite: ≤ +1 ms p50, ≤ +5 ms p99 | p50 %+.2f ms, p99 %+.2f ms | | | %s |\n",
			c.Concurrency, a50, a99, verdict(a50 <= 1 && a99 <= 5))
	}
	if c := r.Cancel; c != nil {
		fmt.Fprintf(b, "| upstream closed after the client left, mid-stream, p50 / p95: at most ReverseProxy's | %.2f / %.2f ms | %.2f / %.2f ms | | %s |\n",
			c.GatewayMid.P50, c.GatewayMid.P95, c.ProxyMid.P50, c.ProxyMid.P95, verdict(c.GatewayMid.P50 <= c.ProxyMid.P50 && c.GatewayMid.P95 <= c.ProxyMid.P95))
		fmt.Fprintf(b, "| the same before the first token | %.2f / %.2f ms | %.2f / %.2f ms | | %s |\n",
			c.GatewayPre.P50, c.GatewayPre.P95, c.ProxyPre.P50, c.ProxyPre.P95, verdict(c.GatewayPre.P50 <= c.ProxyPre.P50 && c.GatewayPre.P95 <= c.ProxyPre.P95))
	}
}

func (r *Report) chatMarkdown(b *strings.Builder) {
	c := r.Chat
	fmt.Fprintf(b, "\n### /v1/chat against /v1/chat/completions (concurrency %d, %d requests each, SQLite store, new conversations)\n\n", c.Concurrency, c.N)
	b.WriteString("| endpoint | first word p50 | p99 | total p50 |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| /v1/chat/completions | %.2f ms | %.2f ms | %.2f ms |\n", c.Completions.TTFT50, c.Completions.TTFT99, c.Completions.Total50)
	fmt.Fprintf(b, "| /v1/chat | %.2f ms | %.2f ms | %.2f ms |\n", c.Chat.TTFT50, c.Chat.TTFT99, c.Chat.Total50)
	fmt.Fprintf(b, "\nPer round, /v1/chat's first word minus /v1/chat/completions': p50 %s ms; p99 %s ms.\n", msList(c.Added50), msList(c.Added99))
}

func (r *Report) cancelMarkdown(b *strings.Builder) {
	c := r.Cancel
	fmt.Fprintf(b, "\n### Cancellation (%d concurrent streams closed by the client, %d per target and moment)\n\n", c.Concurrency, c.N)
	b.WriteString("Time from the client's close to the upstream's request context ending (its connection closed), read on one clock (the upstream runs in the load generator's process).\n\n")
	b.WriteString("| moment | firstword p50 / p95 | ReverseProxy p50 / p95 |\n|---|---|---|\n")
	fmt.Fprintf(b, "| mid-stream | %.2f / %.2f ms | %.2f / %.2f ms |\n", c.GatewayMid.P50, c.GatewayMid.P95, c.ProxyMid.P50, c.ProxyMid.P95)
	fmt.Fprintf(b, "| before the first token | %.2f / %.2f ms | %.2f / %.2f ms |\n", c.GatewayPre.P50, c.GatewayPre.P95, c.ProxyPre.P50, c.ProxyPre.P95)
	if c.Missed > 0 {
		fmt.Fprintf(b, "\n%d streams failed before their close or their upstream never saw it within 5 s (not in the percentiles).\n", c.Missed)
	}
}

func (r *Report) slowMarkdown(b *strings.Builder) {
	s := r.Slow
	fmt.Fprintf(b, "\n### CPU per chunk at a real model's pace (%d streams, 10 chunks a second each, %v windows)\n\n", s.Streams, s.Window)
	b.WriteString("The process's CPU time (/proc/PID/stat) over the window divided by the chunks the clients received in it, alternating rounds.\n\n")
	b.WriteString("| path | CPU per chunk, median | rounds | chunks per window |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| firstword | %.1f µs | %s | %v |\n", us(medianDuration(s.Gateway)), usList(s.Gateway), s.GatewayChunks)
	fmt.Fprintf(b, "| httputil.ReverseProxy | %.1f µs | %s | %v |\n", us(medianDuration(s.Proxy)), usList(s.Proxy), s.ProxyChunks)
	for _, p := range s.Parsed {
		fmt.Fprintf(b, "| httputil.ReverseProxy reading each event (%s) | %.1f µs | %s | %v |\n", parserNames[p.Parser], us(medianDuration(p.CPU)), usList(p.CPU), p.Chunks)
	}
}

// parserNames say what each of Parsers is, in a report.
var parserNames = map[string]string{
	"firstword": "firstword's own reader",
	"stdlib":    "bufio and encoding/json",
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func usList(v []time.Duration) string {
	s := make([]string, len(v))
	for i, d := range v {
		s[i] = fmt.Sprintf("%.1f", us(d))
	}
	return strings.Join(s, ", ")
}

func msList(v []float64) string {
	s := make([]string, len(v))
	for i, f := range v {
		s[i] = fmt.Sprintf("%+.2f", f)
	}
	return strings.Join(s, ", ")
}
