package bench

import (
	"sync/atomic"
	"testing"
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
