package bench

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/hostcpu"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{-1, 5}, 2},
	}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestCancelRound runs the cancellation phase's round against the
// cancelling upstream itself, on real sockets: every stream, closed
// mid-stream or before the first token, yields one sample, taken after
// the close (never negative), and none is missed.
func TestCancelRound(t *testing.T) {
	u := newCancelUpstream()
	url, stop, err := startCancelUpstream(u)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := NewClient(4)
	defer c.CloseIdleConnections()
	var seq atomic.Int64
	for _, mode := range []string{"mid", "pre"} {
		d, missed, err := cancelRound(t.Context(), u, c, url, mode, 4, &seq)
		if err != nil || missed != 0 || len(d) != 4 {
			t.Fatalf("%s: %d samples, %d missed, %v; want 4, 0, nil", mode, len(d), missed, err)
		}
		for _, v := range d {
			if v < 0 {
				t.Errorf("%s: a close seen %v ms before it was made", mode, v)
			}
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.arrived) != 0 || len(u.closed) != 0 {
		t.Errorf("%d requests still registered", len(u.arrived)+len(u.closed))
	}
}

// TestMarkdownHost: the report says how much of the machine's time the
// hypervisor took, and warns when that makes its figures noisy.
func TestMarkdownHost(t *testing.T) {
	for _, tc := range []struct {
		steal float64
		want  string
		noisy bool
	}{{0.31, "2 CPUs, 31% of their time stolen by the hypervisor;", true}, {0.02, "2 CPUs, 2% of their time stolen by the hypervisor;", false}} {
		md := (&Report{CPUs: 2, Host: &hostcpu.Usage{Steal: tc.steal, Busy: 0.5}}).Markdown("firstword bench")
		if !strings.Contains(md, tc.want) || strings.Contains(md, "noisy") != tc.noisy {
			t.Errorf("steal %v: report without %q or with the wrong warning:\n%s", tc.steal, tc.want, md)
		}
	}
	if md := (&Report{CPUs: 2}).Markdown("firstword bench"); strings.Contains(md, "stolen") {
		t.Errorf("no host sample, yet the report names steal:\n%s", md)
	}
}

// TestMarkdownParsedBaselines: the parsing ReverseProxies are shown next
// to the floors they explain, as firstword's ratio to each.
func TestMarkdownParsedBaselines(t *testing.T) {
	r := &Report{CPUs: 2,
		Through: ThroughputResult{Concurrency: 32, Seconds: 10, Direct: 7000, Gateway: 3200, Proxy: 4000, GatewayCPUPerReq: 300 * time.Microsecond, ProxyCPUPerReq: 180 * time.Microsecond,
			Parsed: []ParsedThroughput{{Parser: "firstword", Rate: 3600, CPUPerReq: 220 * time.Microsecond}, {Parser: "stdlib", Rate: 3200, CPUPerReq: 270 * time.Microsecond}}},
		Slow: &SlowCPUResult{Streams: 1000, Window: 4 * time.Second,
			Gateway: []time.Duration{30 * time.Microsecond}, Proxy: []time.Duration{24 * time.Microsecond}, GatewayChunks: []int64{40000}, ProxyChunks: []int64{40000},
			Parsed: []ParsedCPU{{Parser: "firstword", CPU: []time.Duration{28 * time.Microsecond}, Chunks: []int64{40000}}, {Parser: "stdlib", CPU: []time.Duration{33 * time.Microsecond}, Chunks: []int64{40000}}}},
	}
	md := r.Markdown("firstword bench")
	for _, want := range []string{
		"| httputil.ReverseProxy reading each event (firstword's own reader) | 3600 | 51.4% | 220µs | 0 |",
		"| httputil.ReverseProxy reading each event (bufio and encoding/json) | 33.0 µs | 33.0 | [40000] |",
		"| the same, for reference, against ReverseProxy reading each event (bufio and encoding/json) | | 3200 streams/s (270µs) | | 1.00× |",
		"| the same, for reference, against ReverseProxy reading each event (firstword's own reader) | | 28.0 µs (28.0) | | 1.07× |",
		"| CPU per chunk, 1000 streams at 10 chunks/s: at most ReverseProxy's | 30.0 µs (rounds: 30.0) | 24.0 µs (24.0) | | **not met** (1.25×) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report without %q:\n%s", want, md)
		}
	}
}
