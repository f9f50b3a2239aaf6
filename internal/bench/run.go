package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/hostcpu"
)

// Options sets the sizes of a run.
type Options struct {
	// Exe is the firstword binary; the gateway (and the ReverseProxy
	// baseline) are started from it as child processes.
	Exe string
	// LatencyRequests per path at concurrency 1; at concurrency 50 each
	// path runs LatencyRequests×5.
	LatencyRequests int
	// ThroughputConcurrency and ThroughputDuration shape the zero-delay
	// phase (per path, split in two rounds).
	ThroughputConcurrency int
	ThroughputDuration    time.Duration
	// IdleStreams is the number of concurrent open streams for memory.
	IdleStreams int
	// ReverseProxy adds Go's httputil.ReverseProxy as a baseline.
	ReverseProxy bool
	// GatewayEnv is added to the gateway's environment (e.g. GOMAXPROCS=1).
	GatewayEnv []string
	// SlowStreams streams at 10 chunks a second are held open while the
	// gateway's and ReverseProxy's CPU is read over SlowWindow, in
	// SlowRounds alternating rounds.
	SlowStreams int
	SlowWindow  time.Duration
	SlowRounds  int
	// ChatRequests per endpoint at concurrency 50 in the chat phase.
	ChatRequests int
	// CancelRounds of 50 concurrent streams per target and moment.
	CancelRounds int
	// Phases selects what to measure: "latency", "throughput", "memory",
	// "slowcpu", "chat", "cancel"; empty means all.
	Phases []string
	Log    io.Writer
}

func (o Options) runs(phase string) bool {
	return len(o.Phases) == 0 || slices.Contains(o.Phases, phase)
}

// Report is a run's results.
type Report struct {
	When      time.Time
	GoVersion string
	CPUs      int
	Latency   []LatencyResult
	Through   ThroughputResult
	Memory    MemoryResult
	Slow      *SlowCPUResult
	Chat      *ChatResult
	Cancel    *CancelResult
	// Host is the machine's CPU over the run (nil where /proc/stat is not).
	Host *hostcpu.Usage
}

// LatencyResult compares one concurrency level.
type LatencyResult struct {
	Concurrency int
	N           int
	Direct      Dist
	Gateway     Dist
	Proxy       *Dist // httputil.ReverseProxy, when measured
	Relay       *Dist // a TCP relay (the extra hop alone), with Proxy
	// Per round: each path's TTFT p50 minus the direct path's in the same
	// round, in milliseconds (Proxy and Relay empty when not measured).
	GatewayAdded, ProxyAdded, RelayAdded []float64
}

// Dist holds percentiles of a path, in milliseconds.
type Dist struct {
	TTFT50, TTFT99, Total50, Total99, Gap50, Gap99 float64
}

// ThroughputResult is the zero-delay phase.
type ThroughputResult struct {
	Concurrency                          int
	Seconds                              float64
	Direct, Gateway, Proxy               float64 // streams per second
	GatewayCPUPerReq, ProxyCPUPerReq     time.Duration
	GatewayRequests, DirectRequests      int64
	GatewayErrors, DirectErrors, PErrors int64
	// Parsed is ReverseProxy reading every event on its way, with each
	// of Parsers, in the same rounds.
	Parsed []ParsedThroughput
}

// ParsedThroughput is one parsing ReverseProxy's throughput.
type ParsedThroughput struct {
	Parser    string
	Rate      float64 // streams per second
	CPUPerReq time.Duration
	Errors    int64
}

// MemoryResult is the idle-streams phase.
type MemoryResult struct {
	Streams   int
	RSSBefore int64
	RSSAfter  int64
	PerStream float64 // bytes
	// From the gateway's POST /admin/gc, per open stream.
	HeapPerStream, StackPerStream, GoroutinesPerStream float64
	// ProxyPerStream is httputil.ReverseProxy's RSS per open stream in the
	// same phase (0 when not measured).
	ProxyPerStream float64
	// Fresh is the same measure in a gateway that served nothing before.
	Fresh *MemoryResult
}

type runtimeStats struct {
	Goroutines int   `json:"goroutines"`
	HeapAlloc  int64 `json:"heap_alloc"`
	StackInuse int64 `json:"stack_inuse"`
}

func readRuntime(url string) (runtimeStats, error) {
	var rs runtimeStats
	resp, err := http.Post(url+"/admin/gc", "", nil)
	if err != nil {
		return rs, err
	}
	defer resp.Body.Close()
	return rs, json.NewDecoder(resp.Body).Decode(&rs)
}

type paths struct {
	direct, gateway, proxy string
}

// Run measures everything. The three fake upstreams run in this process;
// the gateway runs as a child process.
func Run(ctx context.Context, o Options) (*Report, error) {
	before, herr := hostcpu.Read()
	rep, err := run(ctx, o)
	if after, err := hostcpu.Read(); rep != nil && herr == nil && err == nil {
		u := hostcpu.Between(before, after)
		rep.Host = &u
	}
	return rep, err
}

func run(ctx context.Context, o Options) (*Report, error) {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	// The fake upstreams run in a process of their own, so that every hop
	// on both paths crosses a process boundary, as in production.
	uaddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	up, err := StartProcess(ctx, uaddr, "/healthz", nil, o.Exe, "bench-upstream", "--addr", uaddr)
	if err != nil {
		return nil, err
	}
	defer up.Stop()
	urls := map[string]string{"real": up.URL + "/real", "zero": up.URL + "/zero", "hold": up.URL + "/hold"}

	urls["slow"] = up.URL + "/slow"
	// The cancellation phase's upstream runs in this process: the client's
	// close and the upstream's seeing it are read on one clock.
	cup := newCancelUpstream()
	curl, stopCancel, err := startCancelUpstream(cup)
	if err != nil {
		return nil, err
	}
	defer stopCancel()
	dir, err := os.MkdirTemp("", "firstword-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`listen: %s
store: {driver: sqlite, path: %s/bench.db}
providers:
  real: {type: openai, base_url: %s/v1}
  zero: {type: openai, base_url: %s/v1}
  hold: {type: openai, base_url: %s/v1}
  slow: {type: openai, base_url: %s/v1}
  cancel: {type: openai, base_url: %s/v1}
models:
  real: {deployments: [{provider: real, model: bench}]}
  zero: {deployments: [{provider: zero, model: bench}]}
  hold: {deployments: [{provider: hold, model: bench}]}
  slow: {deployments: [{provider: slow, model: bench}]}
  cancel: {deployments: [{provider: cancel, model: bench}]}
`, addr, dir, urls["real"], urls["zero"], urls["hold"], urls["slow"], curl)
	f, err := os.CreateTemp(dir, "firstword-bench-*.yaml")
	if err != nil {
		return nil, err
	}
	f.WriteString(cfg)
	f.Close()
	gw, err := StartProcess(ctx, addr, "/healthz", o.GatewayEnv, o.Exe, "serve", "--config", f.Name())
	if err != nil {
		return nil, err
	}
	defer gw.Stop()
	var proxy, rproxy, hproxy, relay *Process
	if o.ReverseProxy {
		if hproxy, err = startProxy(ctx, o, urls["hold"]); err != nil {
			return nil, err
		}
		defer hproxy.Stop()
		if rproxy, err = startProxy(ctx, o, urls["real"]); err != nil {
			return nil, err
		}
		defer rproxy.Stop()
		if relay, err = startProxy(ctx, o, up.URL, "--tcp"); err != nil {
			return nil, err
		}
		defer relay.Stop()
		if proxy, err = startProxy(ctx, o, urls["zero"]); err != nil {
			return nil, err
		}
		defer proxy.Stop()
	}

	rep := &Report{When: time.Now().UTC(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}

	// Warm up both paths.
	wc := NewClient(8)
	for range 20 {
		Stream(ctx, wc, urls["zero"], "zero", false)
		Stream(ctx, wc, gw.URL, "zero", false)
	}

	for _, conc := range []int{1, 50} {
		if !o.runs("latency") {
			break
		}
		n := o.LatencyRequests
		if conc > 1 {
			n *= 5
		}
		logf("latency: concurrency %d, %d requests per path (TTFT 50ms, 100 chunks 5ms apart)", conc, n)
		targets := []string{urls["real"], gw.URL}
		if rproxy != nil {
			targets = append(targets, rproxy.URL, relay.URL+"/real")
		}
		d, added, err := latency(ctx, conc, n, targets, "real")
		if err != nil {
			return nil, err
		}
		lr := LatencyResult{Concurrency: conc, N: n, Direct: d[0], Gateway: d[1], GatewayAdded: added[1]}
		if rproxy != nil {
			lr.Proxy, lr.Relay = &d[2], &d[3]
			lr.ProxyAdded, lr.RelayAdded = added[2], added[3]
		}
		rep.Latency = append(rep.Latency, lr)
	}

	if o.runs("throughput") {
		tc := o.ThroughputConcurrency
		logf("throughput: concurrency %d, %v per path (zero-delay upstream, 20 chunks)", tc, o.ThroughputDuration)
		rep.Through.Concurrency = tc
		rep.Through.Seconds = o.ThroughputDuration.Seconds()
		half := o.ThroughputDuration / 2
		var dReq, gReq, pReq, dErr, gErr, pErr int64
		var gCPU, pCPU time.Duration
		var parsers []*Process
		qReq, qErr, qCPU := make([]int64, len(Parsers)), make([]int64, len(Parsers)), make([]time.Duration, len(Parsers))
		if proxy != nil {
			for _, name := range Parsers {
				pp, err := startProxy(ctx, o, urls["zero"], "--parse", name)
				if err != nil {
					return nil, err
				}
				defer pp.Stop()
				parsers = append(parsers, pp)
			}
		}
		for range 2 {
			r, e := throughput(ctx, tc, half, urls["zero"], "zero")
			dReq, dErr = dReq+r, dErr+e
			c0, _ := gw.CPU()
			r, e = throughput(ctx, tc, half, gw.URL, "zero")
			c1, _ := gw.CPU()
			gReq, gErr, gCPU = gReq+r, gErr+e, gCPU+c1-c0
			if proxy != nil {
				c0, _ := proxy.CPU()
				r, e = throughput(ctx, tc, half, proxy.URL, "zero")
				c1, _ := proxy.CPU()
				pReq, pErr, pCPU = pReq+r, pErr+e, pCPU+c1-c0
			}
			for i, pp := range parsers {
				c0, _ := pp.CPU()
				r, e = throughput(ctx, tc, half, pp.URL, "zero")
				c1, _ := pp.CPU()
				qReq[i], qErr[i], qCPU[i] = qReq[i]+r, qErr[i]+e, qCPU[i]+c1-c0
			}
		}
		for _, pp := range parsers {
			pp.Stop() // idle from here on, but not in the later phases' way
		}
		secs := o.ThroughputDuration.Seconds()
		rep.Through.Direct, rep.Through.Gateway = float64(dReq)/secs, float64(gReq)/secs
		rep.Through.DirectRequests, rep.Through.GatewayRequests = dReq, gReq
		rep.Through.DirectErrors, rep.Through.GatewayErrors, rep.Through.PErrors = dErr, gErr, pErr
		if gReq > 0 {
			rep.Through.GatewayCPUPerReq = gCPU / time.Duration(gReq)
		}
		if proxy != nil {
			rep.Through.Proxy = float64(pReq) / secs
			if pReq > 0 {
				rep.Through.ProxyCPUPerReq = pCPU / time.Duration(pReq)
			}
		}
		for i := range parsers {
			pt := ParsedThroughput{Parser: Parsers[i], Rate: float64(qReq[i]) / secs, Errors: qErr[i]}
			if qReq[i] > 0 {
				pt.CPUPerReq = qCPU[i] / time.Duration(qReq[i])
			}
			rep.Through.Parsed = append(rep.Through.Parsed, pt)
		}

	}
	if o.runs("chat") {
		conc := 50
		logf("chat: /v1/chat against /v1/chat/completions, concurrency %d, %d requests each (SQLite store)", conc, o.ChatRequests)
		cr, err := chatPhase(ctx, gw.URL, conc, o.ChatRequests)
		if err != nil {
			return nil, fmt.Errorf("chat phase: %w", err)
		}
		rep.Chat = cr
	}
	if o.runs("cancel") && o.ReverseProxy {
		logf("cancel: 50 concurrent streams closed by the client, mid-stream and before the first token, %d rounds per target", o.CancelRounds)
		cproxy, err := startProxy(ctx, o, curl)
		if err != nil {
			return nil, err
		}
		cr, err := cancelPhase(ctx, cup, gw.URL, cproxy.URL, 50, o.CancelRounds)
		cproxy.Stop()
		if err != nil {
			return nil, fmt.Errorf("cancel phase: %w", err)
		}
		rep.Cancel = cr
	}
	if o.runs("slowcpu") && o.ReverseProxy {
		logf("slowcpu: %d streams at 10 chunks/s, CPU over %v, %d rounds per path", o.SlowStreams, o.SlowWindow, o.SlowRounds)
		sproxy, err := startProxy(ctx, o, urls["slow"])
		if err != nil {
			return nil, err
		}
		defer sproxy.Stop()
		sr := &SlowCPUResult{Streams: o.SlowStreams, Window: o.SlowWindow}
		parsers := make([]*Process, len(Parsers))
		for i, name := range Parsers {
			if parsers[i], err = startProxy(ctx, o, urls["slow"], "--parse", name); err != nil {
				return nil, err
			}
			defer parsers[i].Stop()
			sr.Parsed = append(sr.Parsed, ParsedCPU{Parser: name})
		}
		for range o.SlowRounds {
			g, gn, err := slowCPU(ctx, gw, gw.URL, "slow", o.SlowStreams, o.SlowWindow)
			if err != nil {
				return nil, fmt.Errorf("slow streams, gateway: %w", err)
			}
			p, pn, err := slowCPU(ctx, sproxy, sproxy.URL, "slow", o.SlowStreams, o.SlowWindow)
			if err != nil {
				return nil, fmt.Errorf("slow streams, ReverseProxy: %w", err)
			}
			sr.Gateway, sr.GatewayChunks = append(sr.Gateway, g), append(sr.GatewayChunks, gn)
			sr.Proxy, sr.ProxyChunks = append(sr.Proxy, p), append(sr.ProxyChunks, pn)
			for i, pp := range parsers {
				q, qn, err := slowCPU(ctx, pp, pp.URL, "slow", o.SlowStreams, o.SlowWindow)
				if err != nil {
					return nil, fmt.Errorf("slow streams, ReverseProxy with the %s parser: %w", Parsers[i], err)
				}
				sr.Parsed[i].CPU, sr.Parsed[i].Chunks = append(sr.Parsed[i].CPU, q), append(sr.Parsed[i].Chunks, qn)
			}
		}
		sproxy.Stop()
		for _, pp := range parsers {
			pp.Stop()
		}
		rep.Slow = sr
	}
	if !o.runs("memory") {
		return rep, nil
	}
	logf("memory: %d concurrent idle streams, in the gateway that served the phases above and in a fresh one", o.IdleStreams)
	mem, err := idle(ctx, gw, o.IdleStreams, true)
	if err != nil {
		return nil, err
	}
	// A gateway that has served load keeps its grown heap, whose free
	// pages new streams reuse without adding RSS; a fresh one shows the
	// whole cost.
	faddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	fresh, err := StartProcess(ctx, faddr, "/healthz", o.GatewayEnv, o.Exe, "serve", "--config", f.Name(), "--addr", faddr)
	if err != nil {
		return nil, err
	}
	fm, err := idle(ctx, fresh, o.IdleStreams, true)
	fresh.Stop()
	if err != nil {
		return nil, fmt.Errorf("fresh gateway: %w", err)
	}
	mem.Fresh = &fm
	if hproxy != nil {
		pm, err := idle(ctx, hproxy, o.IdleStreams, false)
		if err != nil {
			return nil, fmt.Errorf("reverse proxy: %w", err)
		}
		mem.ProxyPerStream = pm.PerStream
	}
	rep.Memory = mem
	return rep, nil
}

// startProxy starts a bench-proxy (ReverseProxy, or with --tcp a TCP
// relay, with --parse NAME reading every event with that parser) in front
// of upstream, on a free address; flags go before its own.
func startProxy(ctx context.Context, o Options, upstream string, flags ...string) (*Process, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	args := append(append([]string{"bench-proxy"}, flags...), "--addr", addr, "--upstream", upstream)
	return StartProcess(ctx, addr, "/healthz", o.GatewayEnv, o.Exe, args...)
}

// latency runs n requests on each target at the given concurrency,
// alternating the targets in rounds so that all see the same machine. It
// returns each target's percentiles over all rounds, and per round its TTFT
// p50 minus the first target's.
func latency(ctx context.Context, conc, n int, targets []string, model string) ([]Dist, [][]float64, error) {
	c := NewClient(conc)
	samples := make([][]Sample, len(targets))
	added := make([][]float64, len(targets))
	rounds := 6
	for r := range rounds {
		per := n / rounds
		if r == rounds-1 {
			per = n - (rounds-1)*(n/rounds)
		}
		var base float64
		for i, t := range targets {
			s, err := batch(ctx, c, conc, per, t, model)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", t, err)
			}
			samples[i] = append(samples[i], s...)
			p50 := dist(s).TTFT50
			if i == 0 {
				base = p50
			}
			added[i] = append(added[i], p50-base)
		}
	}
	out := make([]Dist, len(targets))
	for i := range samples {
		out[i] = dist(samples[i])
	}
	return out, added, nil
}

func batch(ctx context.Context, c *http.Client, conc, n int, url, model string) ([]Sample, error) {
	return batchOf(conc, n, func() (Sample, error) { return Stream(ctx, c, url, model, true) })
}

// batchOf runs one n times, conc at a time.
func batchOf(conc, n int, one func() (Sample, error)) ([]Sample, error) {
	var mu sync.Mutex
	var out []Sample
	var firstErr error
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				s, err := one()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					out = append(out, s)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

func throughput(ctx context.Context, conc int, d time.Duration, url, model string) (ok, failed int64) {
	c := NewClient(conc)
	deadline := time.Now().Add(d)
	var okN, errN atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := Stream(ctx, c, url, model, false); err != nil {
					errN.Add(1)
				} else {
					okN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	c.CloseIdleConnections()
	return okN.Load(), errN.Load()
}

// idle opens n streams through p, holds them, and measures p's RSS; with
// stats, also the heap, stacks and goroutines from p's /admin/runtime.
func idle(ctx context.Context, gw *Process, n int, stats bool) (MemoryResult, error) {
	res := MemoryResult{Streams: n}
	time.Sleep(time.Second)
	var rt0 runtimeStats
	if stats {
		var err error
		if rt0, err = readRuntime(gw.URL); err != nil {
			return res, err
		}
	}
	before, err := gw.RSS()
	if err != nil {
		return res, err
	}
	c := NewClient(n)
	var mu sync.Mutex
	var bodies []io.Closer
	var firstErr error
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			b, err := OpenIdle(ctx, c, gw.URL, "hold")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			bodies = append(bodies, b)
		}()
	}
	wg.Wait()
	defer func() {
		for _, b := range bodies {
			b.Close()
		}
		c.CloseIdleConnections()
	}()
	if firstErr != nil {
		return res, fmt.Errorf("opening idle streams: %w (%d open)", firstErr, len(bodies))
	}
	time.Sleep(2 * time.Second)
	after, err := gw.RSS()
	if err != nil {
		return res, err
	}
	res.RSSBefore, res.RSSAfter = before, after
	res.PerStream = float64(after-before) / float64(n)
	if !stats {
		return res, nil
	}
	rt1, err := readRuntime(gw.URL)
	if err != nil {
		return res, err
	}
	res.HeapPerStream = float64(rt1.HeapAlloc-rt0.HeapAlloc) / float64(n)
	res.StackPerStream = float64(rt1.StackInuse-rt0.StackInuse) / float64(n)
	res.GoroutinesPerStream = float64(rt1.Goroutines-rt0.Goroutines) / float64(n)
	return res, nil
}

func dist(ss []Sample) Dist {
	var ttft, total, gaps []float64
	for _, s := range ss {
		ttft = append(ttft, ms(s.TTFT))
		total = append(total, ms(s.Total))
		for _, g := range s.Gaps {
			gaps = append(gaps, ms(g))
		}
	}
	return Dist{
		TTFT50: pct(ttft, 50), TTFT99: pct(ttft, 99),
		Total50: pct(total, 50), Total99: pct(total, 99),
		Gap50: pct(gaps, 50), Gap99: pct(gaps, 99),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the nearest-rank percentile.
func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Markdown renders the report.
func (r *Report) Markdown(command string) string {
	var b strings.Builder
	host := ""
	if r.Host != nil {
		host = fmt.Sprintf(", %.0f%% of their time stolen by the hypervisor", 100*r.Host.Steal)
	}
	fmt.Fprintf(&b, "Measured %s with `%s` (%s, %d CPUs%s; load generator, fake upstreams and gateway on the same machine).\n\n", r.When.Format("2006-01-02 15:04 UTC"), command, r.GoVersion, r.CPUs, host)
	if r.Host != nil && r.Host.Note() != "" {
		fmt.Fprintf(&b, "**%s**\n\n", r.Host.Note())
	}
	if len(r.Latency) > 0 {
		r.latencyMarkdown(&b)
	}
	if t := r.Through; t.Direct > 0 {
		r.throughputMarkdown(&b)
	}
	if r.Memory.RSSAfter > 0 {
		r.memoryMarkdown(&b)
	}
	if r.Slow != nil {
		r.slowMarkdown(&b)
	}
	if r.Chat != nil {
		r.chatMarkdown(&b)
	}
	if r.Cancel != nil {
		r.cancelMarkdown(&b)
	}
	r.floorsMarkdown(&b)
	return b.String()
}

func (r *Report) latencyMarkdown(b *strings.Builder) {
	b.WriteString("### Added latency (upstream: TTFT 50 ms, 100 chunks 5 ms apart)\n\n")
	b.WriteString("Percentiles of what the client saw; *added* is the gateway's percentile minus the direct path's, measured in alternating rounds in the same run.\n\n")
	b.WriteString("| concurrency | requests/path | TTFT p50 direct → gateway (added) | TTFT p99 direct → gateway (added) | total p50 added | total p99 added | chunk gap p50 / p99 direct | gateway |\n|---|---|---|---|---|---|---|---|\n")
	for _, l := range r.Latency {
		fmt.Fprintf(b, "| %d | %d | %.2f → %.2f ms (**%+.2f ms**) | %.2f → %.2f ms (%+.2f ms) | %+.2f ms | %+.2f ms | %.2f / %.2f ms | %.2f / %.2f ms |\n",
			l.Concurrency, l.N, l.Direct.TTFT50, l.Gateway.TTFT50, l.Gateway.TTFT50-l.Direct.TTFT50,
			l.Direct.TTFT99, l.Gateway.TTFT99, l.Gateway.TTFT99-l.Direct.TTFT99,
			l.Gateway.Total50-l.Direct.Total50, l.Gateway.Total99-l.Direct.Total99,
			l.Direct.Gap50, l.Direct.Gap99, l.Gateway.Gap50, l.Gateway.Gap99)
	}
	if len(r.Latency) == 0 || r.Latency[0].Proxy == nil {
		return
	}
	b.WriteString("\nFor reference, in the same rounds: Go's `httputil.ReverseProxy` (parses nothing), and a TCP relay that copies bytes both ways (no HTTP at all: the cost of the extra hop alone):\n\n| path | concurrency | TTFT p50 added | TTFT p99 added | total p50 added | chunk gap p50 / p99 |\n|---|---|---|---|---|---|\n")
	for _, ref := range []struct {
		name string
		d    func(LatencyResult) *Dist
	}{{"ReverseProxy", func(l LatencyResult) *Dist { return l.Proxy }}, {"TCP relay", func(l LatencyResult) *Dist { return l.Relay }}} {
		for _, l := range r.Latency {
			if p := ref.d(l); p != nil {
				fmt.Fprintf(b, "| %s | %d | %+.2f ms | %+.2f ms | %+.2f ms | %.2f / %.2f ms |\n", ref.name, l.Concurrency, p.TTFT50-l.Direct.TTFT50, p.TTFT99-l.Direct.TTFT99, p.Total50-l.Direct.Total50, p.Gap50, p.Gap99)
			}
		}
	}
}

func (r *Report) throughputMarkdown(b *strings.Builder) {
	t := r.Through
	fmt.Fprintf(b, "\n### Throughput (zero-delay upstream, 20 chunks, concurrency %d, %.0f s per path)\n\n", t.Concurrency, t.Seconds)
	b.WriteString("| path | streams/s | share of direct | CPU per request | errors |\n|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| direct | %.0f | 100%% | | %d |\n", t.Direct, t.DirectErrors)
	fmt.Fprintf(b, "| firstword | %.0f | **%.1f%%** | %v | %d |\n", t.Gateway, 100*t.Gateway/t.Direct, t.GatewayCPUPerReq.Round(time.Microsecond), t.GatewayErrors)
	if t.Proxy > 0 {
		fmt.Fprintf(b, "| httputil.ReverseProxy (parses nothing) | %.0f | %.1f%% | %v | %d |\n", t.Proxy, 100*t.Proxy/t.Direct, t.ProxyCPUPerReq.Round(time.Microsecond), t.PErrors)
	}
	for _, p := range t.Parsed {
		fmt.Fprintf(b, "| httputil.ReverseProxy reading each event (%s) | %.0f | %.1f%% | %v | %d |\n", parserNames[p.Parser], p.Rate, 100*p.Rate/t.Direct, p.CPUPerReq.Round(time.Microsecond), p.Errors)
	}
}

func (r *Report) memoryMarkdown(b *strings.Builder) {
	m := r.Memory
	fmt.Fprintf(b, "\n### Memory (%d concurrent open, idle streams)\n\n", m.Streams)
	fmt.Fprintf(b, "The gateway that served the phases above: RSS %.1f MiB before, %.1f MiB with the streams open: **%.1f KiB per open stream**. Per stream, after a collection: %.1f KiB of live heap, %.1f KiB of goroutine stacks (%.0f goroutines: the server connection, its background reader, and the upstream connection's read and write loops).\n",
		float64(m.RSSBefore)/(1<<20), float64(m.RSSAfter)/(1<<20), m.PerStream/1024, m.HeapPerStream/1024, m.StackPerStream/1024, m.GoroutinesPerStream)
	if f := m.Fresh; f != nil {
		fmt.Fprintf(b, "\nA fresh gateway (started for this phase, nothing served before): RSS %.1f MiB before, %.1f MiB with the streams open: **%.1f KiB per open stream** (%.1f KiB of live heap, %.1f KiB of stacks).\n",
			float64(f.RSSBefore)/(1<<20), float64(f.RSSAfter)/(1<<20), f.PerStream/1024, f.HeapPerStream/1024, f.StackPerStream/1024)
	}
	if m.ProxyPerStream > 0 {
		fmt.Fprintf(b, "\nGo's `httputil.ReverseProxy` holding the same streams (a fresh process): %.1f KiB per open stream.\n", m.ProxyPerStream/1024)
	}
}
