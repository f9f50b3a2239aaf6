package budget

import (
	"slices"
	"testing"
	"time"
)

func TestCriticalPath(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	st := func(name string, start, end float64) Stage { return Stage{Name: name, Start: ms(start), End: ms(end)} }
	for _, tc := range []struct {
		name   string
		stages []Stage
		ttfw   float64
		want   []string
	}{
		{"nothing sent", []Stage{st("auth", 0, 1)}, 0, nil},
		{"a chain, tiny stages first",
			[]Stage{st("auth", 0, 0.002), st("parse", 0.003, 0.05), st("route", 0.06, 0.07), st("ttft", 0.07, 600.07)},
			600.1, []string{"auth", "parse", "route", "ttft"}},
		{"parallel sources: only the slowest",
			[]Stage{st("prepare", 0, 1), st("orders", 1, 31), st("docs", 1, 121), st("profile", 1, 61), {Name: "context", Start: ms(1), End: ms(121), Group: true}, st("prompt", 121, 122), st("ttft", 122, 722)},
			722.2, []string{"prepare", "docs", "prompt", "ttft"}},
		{"a guard alongside the context is off the path",
			[]Stage{st("prepare", 0, 1), st("guard", 1, 81), st("docs", 1, 121), st("ttft", 121, 721)},
			721, []string{"prepare", "docs", "ttft"}},
		{"stages after the first word are not on it",
			[]Stage{st("route", 0, 1), st("ttft", 1, 101), st("persist", 500, 501)},
			101, []string{"route", "ttft"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CriticalPath(tc.stages, ms(tc.ttfw)); !slices.Equal(got, tc.want) {
				t.Errorf("CriticalPath = %v, want %v", got, tc.want)
			}
		})
	}
}
