package yardstick

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseThreshold(t *testing.T) {
	known := []string{"firstword", "direct", "refproxy", "firstword-chat", "a-2ms"}
	for _, tc := range []struct {
		expr string
		want Threshold // Expr is filled in
	}{
		{"firstword:ttfw.p95>800ms", Threshold{Target: "firstword", Metric: "ttfw", Stat: "p95", Op: ">", Figure: 800}},
		{"firstword:ttfw.p95 > 1.5s", Threshold{Target: "firstword", Metric: "ttfw", Stat: "p95", Op: ">", Figure: 1500}},
		{"firstword:ttfw.p95>=250", Threshold{Target: "firstword", Metric: "ttfw", Stat: "p95", Op: ">=", Figure: 250}},
		{"firstword:ttfw.p50>direct+2ms", Threshold{Target: "firstword", Metric: "ttfw", Stat: "p50", Op: ">", Ref: "direct", RefOp: "+", Figure: 2}},
		{"firstword:ttc.p99>direct-500us", Threshold{Target: "firstword", Metric: "ttc", Stat: "p99", Op: ">", Ref: "direct", RefOp: "-", Figure: 0.5}},
		{"firstword:rps<refproxy*0.9", Threshold{Target: "firstword", Metric: "rps", Op: "<", Ref: "refproxy", RefOp: "*", Figure: 0.9}},
		{"firstword:rps<=120/s", Threshold{Target: "firstword", Metric: "rps", Op: "<=", Figure: 120}},
		{"firstword@10:errors>5%", Threshold{Target: "firstword", Level: 10, Metric: "errors", Op: ">", Figure: 0.05}},
		{"firstword:errors>0.05", Threshold{Target: "firstword", Metric: "errors", Op: ">", Figure: 0.05}},
		{"firstword:rss>300MB", Threshold{Target: "firstword", Metric: "rss", Op: ">", Figure: 300}},
		{"firstword:gap.p99>direct*2", Threshold{Target: "firstword", Metric: "gap", Stat: "p99", Op: ">", Ref: "direct", RefOp: "*", Figure: 2}},
		{"firstword:tokens_per_s.p50<50", Threshold{Target: "firstword", Metric: "tokens_per_s", Stat: "p50", Op: "<", Figure: 50}},
		// A '-' in a name: the whole known name is the reference...
		{"direct:ttfw.p50<firstword-chat", Threshold{Target: "direct", Metric: "ttfw", Stat: "p50", Op: "<", Ref: "firstword-chat"}},
		{"direct:ttfw.p50<a-2ms", Threshold{Target: "direct", Metric: "ttfw", Stat: "p50", Op: "<", Ref: "a-2ms"}},
		// ... and a '-' splits where what follows is a figure.
		{"direct:ttfw.p50<firstword-chat-2ms", Threshold{Target: "direct", Metric: "ttfw", Stat: "p50", Op: "<", Ref: "firstword-chat", RefOp: "-", Figure: 2}},
	} {
		got, err := ParseThreshold(tc.expr, known)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		tc.want.Expr = tc.expr
		if diff := cmp.Diff(tc.want, *got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.expr, diff)
		}
	}
}

// TestParseThresholdErrors: a bad expression is refused with words that
// name the bad part and, where it helps, what is known.
func TestParseThresholdErrors(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"ttfw.p95>800ms", "no ':' after the target"},
		{"firstword:ttfw.p95", "no operator"},
		{"firstword:ttfw.p95==800ms", "the operator must be <, <=, > or >="},
		{"firstword:ttfw.p95>", "no VALUE after >"},
		{"first word:ttfw.p95>1ms", `target "first word"`},
		{"firstword@x:ttfw.p95>1ms", "@x: want a concurrency level"},
		{"firstword:ttwf.p95>1ms", `unknown metric "ttwf": known are ttfb.{p50,p95,p99,mean,min,max}, ttfw.`},
		{"firstword:ttfw.p90>1ms", `unknown statistic "p90" of ttfw: known are p50, p95, p99, mean, min, max`},
		{"firstword:ttfw>1ms", "ttfw needs a statistic"},
		{"firstword:rps.p50>1", "rps is one figure: write rps without .p50"},
		{"firstword:ttfw.p95>800xs", `value "800xs": want a time such as 800ms or 1.5s`},
		{"firstword:ttfw.p95>1e3", `value "1e3"`},
		{"firstword:errors>5", "a share is at most 100%"},
		{"firstword:ttfw.p95>direct+fast", `after direct +: want a time`},
		{"firstword:rps<refproxy*-1", "want a positive factor"},
		{"firstword:rps<refproxy*0", "want a positive factor"},
		{"firstword:ttfw.p95>-5ms", "want a figure (a time such as 800ms or 1.5s) or a target's NAME"},
		{"firstword:ttfw.p95>NaN", ""}, // a reference to a target NaN: refused by Validate
	} {
		_, err := ParseThreshold(tc.expr, nil)
		switch {
		case tc.want == "" && err == nil:
		case err == nil:
			t.Errorf("%s: no error, want %q", tc.expr, tc.want)
		case tc.want == "" || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.expr):
			t.Errorf("%s: error %q, want it to quote the expression and say %q", tc.expr, err, tc.want)
		}
	}
}

func TestValidateThreshold(t *testing.T) {
	targets := []TargetInfo{{Name: "a"}, {Name: "b", PID: 42}}
	for _, tc := range []struct{ expr, want string }{
		{"a:ttfw.p95>1ms", ""},
		{"a@10:ttfw.p95>b+1ms", ""},
		{"b:cpu>2ms", ""},
		{"c:ttfw.p95>1ms", "no target c: the targets are a, b"},
		{"a:ttfw.p95>NaN", "no target NaN"},
		{"a:ttfw.p95>a*2", "compares a with itself"},
		{"a@50:ttfw.p95>1ms", "no level @50: the levels are 1,10"},
		{"a:rss>100MB", "give --pid a=PID"},
		{"b:cpu>a*2", "give --pid a=PID"},
	} {
		th, err := ParseThreshold(tc.expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = th.Validate(targets, []int{1, 10})
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", tc.expr, err, tc.want)
		}
	}
}

// judgeReport is two targets at two levels: b is a's TTFW + 10 ms, with
// intervals of ±3 ms, and fails one request in ten at level 10.
func judgeReport() *Report {
	dist := func(p50 float64) Dist {
		return Dist{N: 20, P50: p50, P95: p50 + 20, P99: p50 + 40, CI50: [2]float64{p50 - 3, p50 + 3},
			CI95: [2]float64{p50 + 15, p50 + 25}, CI99: [2]float64{p50 + 30, p50 + 50}, Mean: p50 + 2, Min: p50 - 5, Max: p50 + 45}
	}
	cell := func(target string, conc int, ttfw float64, failed int) Cell {
		return Cell{Target: target, Concurrency: conc, PeakInFlight: conc, Requests: 20, OK: 20 - failed,
			Errors: map[string]int{}, TTFW: dist(ttfw), TTC: dist(ttfw + 200), Throughput: 4 * float64(conc)}
	}
	r := &Report{Targets: []TargetInfo{{Name: "a"}, {Name: "b"}}, Load: LoadInfo{Concurrency: []int{1, 10}}}
	r.Cells = []Cell{cell("a", 1, 50, 0), cell("b", 1, 60, 0), cell("a", 10, 55, 0), cell("b", 10, 65, 2)}
	r.Cells[3].Errors["http_500"] = 2
	return r
}

// TestJudgeGolden: the verdicts as printed, on the point estimate and on
// the interval, for absolute and relative limits.
func TestJudgeGolden(t *testing.T) {
	exprs := []string{
		"a:ttfw.p95>800ms", // passes everywhere
		"b:ttfw.p50>a+5ms", // b is 10 ms above a: fails on the point, not on the interval (b [57–63] overlaps a+5 [52–58])
		"b:ttfw.p50>a+2ms", // fails both ways: [57–63] past [49–55]
		"a:rps<b*0.9",      // equal rates: a < b*0.9 never
		"b@10:errors>5%",   // 10% at level 10
		"a:ttfw.mean>50.5", // no interval for the mean: judged on the point in both modes
		"a:ttfw.p99<=1s",   // fails: p99 is at most 1 s
		"b:cpu>1ms",        // not measured (no --pid): fails
	}
	var ths []*Threshold
	for _, e := range exprs {
		th, err := ParseThreshold(e, nil)
		if err != nil {
			t.Fatal(err)
		}
		ths = append(ths, th)
	}
	var b bytes.Buffer
	for _, judge := range []string{JudgePoint, JudgeInterval} {
		r := judgeReport()
		r.Judge(ths, judge, 0.01)
		r.Checks.write(&b)
	}
	checkGolden(t, "checks.golden", b.Bytes())
}

// TestJudgeMaxErrors: the error share passes --max-errors only when it is
// above it, pooled over a target's levels; a target with no request
// measured fails.
func TestJudgeMaxErrors(t *testing.T) {
	for _, tc := range []struct {
		max  float64
		pass bool
	}{{0.01, false}, {0.05, true}, {0.049, false}, {1, true}} {
		r := judgeReport() // b: 2 of 40 failed, 5%
		r.Judge(nil, JudgePoint, tc.max)
		if r.Checks.Pass != tc.pass || r.Checks.Results[0].Pass != true || r.Checks.Results[1].Pass != tc.pass {
			t.Errorf("--max-errors %v: %+v, want pass %v", tc.max, r.Checks, tc.pass)
		}
	}
	r := judgeReport()
	r.Targets = append(r.Targets, TargetInfo{Name: "c"})
	r.Judge(nil, JudgePoint, 1)
	if r.Checks.Pass || !strings.Contains(r.Checks.Results[2].Detail, "no request measured") {
		t.Errorf("a target with no requests: %+v", r.Checks.Results)
	}
}

// FuzzParseThreshold: no expression panics the parser; one it accepts
// has a known metric and operator, a finite figure and parses again to
// the same threshold.
func FuzzParseThreshold(f *testing.F) {
	for _, s := range []string{"firstword:ttfw.p95>800ms", "firstword:ttfw.p50>direct+2ms", "firstword:rps<refproxy*0.9",
		"a@10:errors>=5%", "a:gap.p99<b-1.5s", "a:rss>300MB", "a-b:ttc.max<=a-b-2", ":>", "a:ttfw.p95>.", "a:x.y<z*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := ParseThreshold(s, []string{"direct", "a-b"})
		if err != nil {
			if !strings.Contains(err.Error(), "--fail-if") {
				t.Fatalf("%q: error %q does not name the flag", s, err)
			}
			return
		}
		if findMetric(th.Metric) == nil || !strings.HasPrefix(th.Op, "<") && !strings.HasPrefix(th.Op, ">") {
			t.Fatalf("%q: parsed to %+v", s, th)
		}
		if th.Figure != th.Figure || th.Figure < 0 {
			t.Fatalf("%q: figure %v", s, th.Figure)
		}
		// Its canonical form reads back to the same threshold.
		again, err := ParseThreshold(th.String(), []string{"direct", "a-b"})
		if err != nil {
			t.Fatalf("%q: its form %q is refused: %v", s, th.String(), err)
		}
		again.Expr = th.Expr
		if *again != *th {
			t.Fatalf("%q: read back from %q as %+v, want %+v", s, th.String(), again, th)
		}
	})
}
