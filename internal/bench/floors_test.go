package bench

import (
	"strings"
	"sync/atomic"
	"testing"

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
