package yardstick

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A Threshold is one --fail-if condition, in one grammar:
//
//	TARGET[@LEVEL]:METRIC[.STAT] OP VALUE
//
// OP is <, <=, > or >=, and the condition says when the run fails:
// "firstword:ttfw.p95>800ms" fails when firstword's TTFW p95 is above
// 800 ms. VALUE is a figure in the metric's unit (800ms, 1.5s, 5%, 120/s),
// or another target's same figure at the same level, plus, minus or
// times a figure: "direct+2ms", "direct-2ms", "refproxy*0.9". Without
// @LEVEL the condition is judged at every level of the run.
type Threshold struct {
	Expr   string `json:"expr"`
	Target string `json:"target"`
	Level  int    `json:"concurrency,omitempty"` // 0: every level
	Metric string `json:"metric"`
	Stat   string `json:"stat,omitempty"` // "" for a metric with one figure
	Op     string `json:"op"`
	// Ref is the target the VALUE is relative to ("" for an absolute
	// figure); RefOp is '+', '-' or '*' (0: the reference itself).
	Ref    string  `json:"ref,omitempty"`
	RefOp  string  `json:"ref_op,omitempty"`
	Figure float64 `json:"figure"` // in the metric's unit; a factor after '*'
}

// String is th in canonical form: figures in the metric's unit,
// without a suffix (ms for times, a fraction for shares).
func (th *Threshold) String() string {
	s := th.Target
	if th.Level != 0 {
		s += "@" + strconv.Itoa(th.Level)
	}
	s += ":" + th.Metric
	if th.Stat != "" {
		s += "." + th.Stat
	}
	fig := strconv.FormatFloat(th.Figure, 'f', -1, 64)
	switch {
	case th.Ref == "":
		return s + th.Op + fig
	case th.RefOp == "":
		return s + th.Op + th.Ref
	}
	return s + th.Op + th.Ref + th.RefOp + fig
}

// unit is how a metric's figures are written and shown.
type unit int

const (
	unitMs     unit = iota // milliseconds; VALUE a duration (800ms, 1.5s) or a bare number of ms
	unitPerSec             // per second; VALUE 120 or 120/s
	unitShare              // a share; VALUE 5% or 0.05
	unitMB                 // megabytes; VALUE 300 or 300MB
	unitCount              // a count
)

func (u unit) String() string {
	return [...]string{"ms", "/s", "share", "MB", "count"}[u]
}

// figure is one measured value and, where the report has one, its 95%
// interval.
type figure struct {
	v     float64
	ci    [2]float64
	hasCI bool
}

// metric is a figure a threshold can name: get reads it from a cell,
// false when the cell has no such measurement.
type metric struct {
	name, about string
	unit        unit
	stats       []string // nil: one figure, no .STAT
	needsPID    bool
	get         func(c *Cell, stat string) (figure, bool)
}

var distStats = []string{"p50", "p95", "p99", "mean", "min", "max"}

// distFigure reads stat from d; the quantiles carry their intervals.
func distFigure(d Dist, stat string) (figure, bool) {
	if d.N == 0 {
		return figure{}, false
	}
	switch stat {
	case "p50":
		return figure{d.P50, d.CI50, true}, true
	case "p95":
		return figure{d.P95, d.CI95, true}, true
	case "p99":
		return figure{d.P99, d.CI99, true}, true
	case "mean":
		return figure{v: d.Mean}, true
	case "min":
		return figure{v: d.Min}, true
	case "max":
		return figure{v: d.Max}, true
	}
	return figure{}, false
}

func distMetric(name, about string, u unit, get func(*Cell) Dist) metric {
	return metric{name: name, about: about, unit: u, stats: distStats,
		get: func(c *Cell, stat string) (figure, bool) { return distFigure(get(c), stat) }}
}

func scalar(v float64) (figure, bool) { return figure{v: v}, true }

// metrics are the figures of a cell, named as in the JSON.
var metrics = []metric{
	distMetric("ttfb", "time to first byte", unitMs, func(c *Cell) Dist { return c.TTFB }),
	distMetric("ttfw", "time to first word", unitMs, func(c *Cell) Dist { return c.TTFW }),
	distMetric("ttc", "time to complete", unitMs, func(c *Cell) Dist { return c.TTC }),
	distMetric("tokens_per_s", "decode rate per request", unitPerSec, func(c *Cell) Dist { return c.TokensPerSec }),
	{name: "gap", about: "gap between text chunks", unit: unitMs, stats: []string{"p50", "p99"}, get: func(c *Cell, stat string) (figure, bool) {
		if c.Gaps == 0 {
			return figure{}, false
		}
		if stat == "p50" {
			return scalar(c.GapP50)
		}
		return scalar(c.GapP99)
	}},
	{name: "rps", about: "successful requests per second", unit: unitPerSec, get: func(c *Cell, _ string) (figure, bool) {
		return figure{v: c.Throughput}, c.Requests > 0
	}},
	{name: "errors", about: "share of requests that failed", unit: unitShare, get: func(c *Cell, _ string) (figure, bool) {
		if c.Requests == 0 {
			return figure{}, false
		}
		return scalar(float64(c.Requests-c.OK) / float64(c.Requests))
	}},
	{name: "bunched", about: "share of bunched gaps", unit: unitShare, get: func(c *Cell, _ string) (figure, bool) {
		return figure{v: c.BunchedShare}, c.Gaps > 0
	}},
	{name: "cpu", about: "CPU time per request, with --pid", unit: unitMs, needsPID: true, get: func(c *Cell, _ string) (figure, bool) {
		if c.CPUPerRequestMs == nil {
			return figure{}, false
		}
		return scalar(*c.CPUPerRequestMs)
	}},
	{name: "rss", about: "peak RSS, with --pid", unit: unitMB, needsPID: true, get: func(c *Cell, _ string) (figure, bool) {
		if c.RSSMaxMB == nil {
			return figure{}, false
		}
		return scalar(*c.RSSMaxMB)
	}},
	{name: "peak", about: "most requests in flight at once", unit: unitCount, get: func(c *Cell, _ string) (figure, bool) {
		return figure{v: float64(c.PeakInFlight)}, c.Requests > 0
	}},
}

func findMetric(name string) *metric {
	for i := range metrics {
		if metrics[i].name == name {
			return &metrics[i]
		}
	}
	return nil
}

// MetricNames lists what --fail-if can name, for help and errors:
// "ttfw.{p50,p95,…}", "rps".
func MetricNames() []string {
	var out []string
	for _, m := range metrics {
		if m.stats == nil {
			out = append(out, m.name)
		} else {
			out = append(out, m.name+".{"+strings.Join(m.stats, ",")+"}")
		}
	}
	return out
}

const thresholdForm = "TARGET:METRIC.STAT OP VALUE, e.g. firstword:ttfw.p95>800ms or firstword:ttfw.p50>direct+2ms"

// ParseThreshold parses a --fail-if expression. known, when not nil, is
// the run's target names: a VALUE that is one of them whole is a
// reference even if it holds a '-' (a target may be named a-2ms).
func ParseThreshold(expr string, known []string) (*Threshold, error) {
	th := &Threshold{Expr: expr}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("--fail-if %q: %s", expr, fmt.Sprintf(format, args...))
	}
	lhs, rest, ok := strings.Cut(expr, ":")
	if !ok {
		return nil, bad("no ':' after the target: want %s", thresholdForm)
	}
	i := strings.IndexAny(rest, "<>")
	if i < 0 {
		if strings.ContainsAny(rest, "=!") {
			return nil, bad("the operator must be <, <=, > or >=")
		}
		return nil, bad("no operator: want %s", thresholdForm)
	}
	name, value := strings.TrimSpace(rest[:i]), rest[i:]
	th.Op = value[:1]
	value = value[1:]
	if strings.HasPrefix(value, "=") {
		th.Op += "="
		value = value[1:]
	}
	value = strings.TrimSpace(value)

	target, level, hasLevel := strings.Cut(strings.TrimSpace(lhs), "@")
	if !targetName.MatchString(target) {
		return nil, bad("target %q: want a --target's NAME (letters, digits, '.', '_', '-')", target)
	}
	th.Target = target
	if hasLevel {
		n, err := strconv.Atoi(level)
		if err != nil || n < 1 {
			return nil, bad("@%s: want a concurrency level such as @10", level)
		}
		th.Level = n
	}

	mname, stat, hasStat := strings.Cut(name, ".")
	m := findMetric(mname)
	switch {
	case m == nil:
		return nil, bad("unknown metric %q: known are %s", mname, strings.Join(MetricNames(), ", "))
	case m.stats == nil && hasStat:
		return nil, bad("%s is one figure: write %s without .%s", m.name, m.name, stat)
	case m.stats != nil && !hasStat:
		return nil, bad("%s needs a statistic: %s.STAT with STAT one of %s", m.name, m.name, strings.Join(m.stats, ", "))
	case m.stats != nil && !slices.Contains(m.stats, stat):
		return nil, bad("unknown statistic %q of %s: known are %s", stat, m.name, strings.Join(m.stats, ", "))
	}
	th.Metric, th.Stat = m.name, stat

	if value == "" {
		return nil, bad("no VALUE after %s", th.Op)
	}
	if c := value[0]; c >= '0' && c <= '9' || c == '.' {
		v, err := parseFigure(value, m.unit)
		if err != nil {
			return nil, bad("value %q: %v", value, err)
		}
		th.Figure = v
		return th, nil
	}
	ref, op, fig := splitRef(value, m.unit, known)
	if !targetName.MatchString(ref) {
		return nil, bad("value %q: want a figure (%s) or a target's NAME, optionally followed by +FIGURE, -FIGURE or *FACTOR", value, unitExample(m.unit))
	}
	th.Ref, th.RefOp = ref, op
	switch op {
	case "+", "-":
		v, err := parseFigure(fig, m.unit)
		if err != nil {
			return nil, bad("value %q: after %s %s: %v", value, ref, op, err)
		}
		th.Figure = v
	case "*":
		v, err := strconv.ParseFloat(fig, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, bad("value %q: after %s*: want a positive factor such as 0.9, got %q", value, ref, fig)
		}
		th.Figure = v
	}
	return th, nil
}

// splitRef splits a relative VALUE into the target, '+', '-' or '*', and
// the figure after it. '+' and '*' cannot be in a name; '-' can, so a
// '-' splits only where what follows reads as a figure.
func splitRef(value string, u unit, known []string) (ref, op, fig string) {
	if slices.Contains(known, value) {
		return value, "", ""
	}
	if i := strings.LastIndexAny(value, "+*"); i >= 0 {
		return strings.TrimSpace(value[:i]), value[i : i+1], strings.TrimSpace(value[i+1:])
	}
	for i := strings.LastIndex(value, "-"); i > 0; i = strings.LastIndex(value[:i], "-") {
		if _, err := parseFigure(strings.TrimSpace(value[i+1:]), u); err == nil {
			return strings.TrimSpace(value[:i]), "-", strings.TrimSpace(value[i+1:])
		}
	}
	return value, "", ""
}

func unitExample(u unit) string {
	return [...]string{"a time such as 800ms or 1.5s", "a rate such as 120 or 120/s", "a share such as 5% or 0.05", "megabytes such as 300 or 300MB", "a number"}[u]
}

// parseFigure reads a figure in unit u.
func parseFigure(s string, u unit) (float64, error) {
	num := s
	scale := 1.0
	switch u {
	case unitMs:
		if strings.TrimLeft(s, "0123456789.") != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return 0, fmt.Errorf("want %s", unitExample(u))
			}
			return ms(d), nil
		}
	case unitPerSec:
		num = strings.TrimSuffix(s, "/s")
	case unitShare:
		if t, ok := strings.CutSuffix(s, "%"); ok {
			num, scale = t, 0.01
		}
	case unitMB:
		num = strings.TrimSuffix(s, "MB")
	}
	if num == "" || strings.TrimLeft(num, "0123456789.") != "" {
		return 0, fmt.Errorf("want %s", unitExample(u))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("want %s", unitExample(u))
	}
	v *= scale
	if u == unitShare && v > 1 {
		return 0, fmt.Errorf("a share is at most 100%% (1): write 5%% or 0.05")
	}
	return v, nil
}

// ParseShare reads a share such as 1% or 0.01 (--max-errors).
func ParseShare(s string) (float64, error) {
	return parseFigure(strings.TrimSpace(s), unitShare)
}

// Validate checks th against a run's targets and levels: every name it
// uses is a target, its level is measured, and a figure read with --pid
// has one.
func (th *Threshold) Validate(targets []TargetInfo, levels []int) error {
	var names []string
	byName := map[string]TargetInfo{}
	for _, t := range targets {
		names = append(names, t.Name)
		byName[t.Name] = t
	}
	var errs []error
	for _, n := range []string{th.Target, th.Ref} {
		if _, ok := byName[n]; n != "" && !ok {
			errs = append(errs, fmt.Errorf("--fail-if %q: no target %s: the targets are %s", th.Expr, n, strings.Join(names, ", ")))
		}
	}
	if th.Ref == th.Target {
		errs = append(errs, fmt.Errorf("--fail-if %q: compares %s with itself: name another target", th.Expr, th.Target))
	}
	if th.Level != 0 && !slices.Contains(levels, th.Level) {
		errs = append(errs, fmt.Errorf("--fail-if %q: no level @%d: the levels are %s", th.Expr, th.Level, joinInts(levels)))
	}
	if m := findMetric(th.Metric); m != nil && m.needsPID {
		for _, n := range []string{th.Target, th.Ref} {
			if t, ok := byName[n]; ok && t.PID == 0 {
				errs = append(errs, fmt.Errorf("--fail-if %q: %s is read from /proc: give --pid %s=PID", th.Expr, m.name, n))
			}
		}
	}
	return errors.Join(errs...)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// Judging: on the point estimate, or on the whole 95% interval.
const (
	JudgePoint    = "point"
	JudgeInterval = "interval"
)

// Checks are a run's pass/fail verdicts: its error share against
// --max-errors, and each --fail-if at each level.
type Checks struct {
	JudgedOn  string        `json:"judged_on"` // "point" or "interval"
	MaxErrors float64       `json:"max_errors"`
	Pass      bool          `json:"pass"`
	Failed    int           `json:"failed"`
	Results   []CheckResult `json:"results"`
}

// CheckResult is one verdict. Value and Limit are absent when what they
// read was not measured (a failure: a CI gate must not pass on nothing).
type CheckResult struct {
	Check       string      `json:"check"` // the --fail-if expression, or "--max-errors 1%"
	Target      string      `json:"target"`
	Concurrency int         `json:"concurrency,omitempty"` // 0: the whole run
	Value       *float64    `json:"value,omitempty"`
	Interval    *[2]float64 `json:"interval,omitempty"`
	Limit       *float64    `json:"limit,omitempty"`
	LimitRange  *[2]float64 `json:"limit_interval,omitempty"`
	Unit        string      `json:"unit"`
	Pass        bool        `json:"pass"`
	Detail      string      `json:"detail"` // as printed after PASS or FAIL
}

// Judge sets r.Checks: every target's error share, pooled over its
// levels, against maxErrors (fail above it), and each threshold at each
// level it covers, on the point estimate or, with judge JudgeInterval,
// failing only when the whole interval is past the limit.
func (r *Report) Judge(ths []*Threshold, judge string, maxErrors float64) {
	ch := &Checks{JudgedOn: judge, MaxErrors: maxErrors, Pass: true}
	check := "--max-errors " + shareText(maxErrors)
	for _, t := range r.Targets {
		res := CheckResult{Check: check, Target: t.Name, Unit: unitShare.String()}
		var n, failed int
		kinds := map[string]int{}
		for _, c := range r.Cells {
			if c.Target == t.Name {
				n += c.Requests
				failed += c.Requests - c.OK
				for k, v := range c.Errors {
					kinds[k] += v
				}
			}
		}
		if n == 0 {
			res.Detail = fmt.Sprintf("%s: no request measured", t.Name)
		} else {
			share := float64(failed) / float64(n)
			res.Value, res.Limit = &share, &maxErrors
			res.Pass = share <= maxErrors
			res.Detail = fmt.Sprintf("%s: %s of %d requests failed", t.Name, shareText(share), n)
			if failed > 0 {
				res.Detail += " (" + errorList(kinds) + ")"
			}
			if !res.Pass {
				res.Detail += ", more than --max-errors " + shareText(maxErrors)
			}
		}
		ch.add(res)
	}
	for _, th := range ths {
		levels := r.Load.Concurrency
		if th.Level != 0 {
			levels = []int{th.Level}
		}
		for _, l := range levels {
			ch.add(r.judgeAt(th, l, judge))
		}
	}
	r.Checks = ch
}

func (ch *Checks) add(res CheckResult) {
	ch.Results = append(ch.Results, res)
	if !res.Pass {
		ch.Pass = false
		ch.Failed++
	}
}

func (r *Report) cellAt(target string, level int) *Cell {
	for i := range r.Cells {
		if r.Cells[i].Target == target && r.Cells[i].Concurrency == level {
			return &r.Cells[i]
		}
	}
	return nil
}

// judgeAt judges th at one level.
func (r *Report) judgeAt(th *Threshold, level int, judge string) CheckResult {
	m := findMetric(th.Metric)
	res := CheckResult{Check: th.Expr, Target: th.Target, Concurrency: level, Unit: m.unit.String()}
	what := th.Metric
	if th.Stat != "" {
		what += " " + th.Stat
	}
	read := func(target string) (figure, bool) {
		c := r.cellAt(target, level)
		if c == nil {
			return figure{}, false
		}
		return m.get(c, th.Stat)
	}
	at := fmt.Sprintf("at concurrency %d: ", level)
	v, ok := read(th.Target)
	if !ok {
		res.Detail = at + th.Target + " " + what + " not measured"
		return res
	}
	limit := figure{v: th.Figure, ci: [2]float64{th.Figure, th.Figure}, hasCI: true}
	limitText := m.unit.format(th.Figure)
	if th.Ref != "" {
		ref, ok := read(th.Ref)
		if !ok {
			res.Value = &v.v
			res.Detail = at + th.Ref + " " + what + " not measured, to compare with"
			return res
		}
		if !ref.hasCI {
			ref.ci = [2]float64{ref.v, ref.v}
		}
		apply := func(x float64) float64 {
			switch th.RefOp {
			case "+":
				return x + th.Figure
			case "-":
				return x - th.Figure
			case "*":
				return x * th.Figure
			}
			return x
		}
		limit = figure{v: apply(ref.v), ci: [2]float64{apply(ref.ci[0]), apply(ref.ci[1])}, hasCI: ref.hasCI}
		limitText = fmt.Sprintf("%s (%s %s", m.unit.format(limit.v), th.Ref, m.unit.format(ref.v))
		switch th.RefOp {
		case "+", "-":
			limitText += " " + th.RefOp + " " + m.unit.format(th.Figure)
		case "*":
			limitText += fmt.Sprintf(" × %g", th.Figure)
		}
		limitText += ")"
	}
	res.Value, res.Limit = &v.v, &limit.v
	above := th.Op[0] == '>'
	cmp := func(a, b float64) bool {
		switch th.Op {
		case ">":
			return a > b
		case ">=":
			return a >= b
		case "<":
			return a < b
		}
		return a <= b
	}
	var fails bool
	valueText := m.unit.format(v.v)
	if judge == JudgeInterval {
		vr := v.ci
		if !v.hasCI {
			vr = [2]float64{v.v, v.v}
		}
		res.Interval, res.LimitRange = &vr, &limit.ci
		// The whole interval past the whole limit's: its near end
		// beyond the limit's far end.
		if above {
			fails = cmp(vr[0], limit.ci[1])
		} else {
			fails = cmp(vr[1], limit.ci[0])
		}
		if v.hasCI {
			valueText += " " + m.unit.formatRange(vr)
		} else {
			valueText += " (no interval: judged on the point)"
		}
		if th.Ref != "" && limit.hasCI {
			limitText += " " + m.unit.formatRange(limit.ci)
		}
	} else {
		fails = cmp(v.v, limit.v)
	}
	res.Pass = !fails
	verdict := th.Op
	if !fails {
		verdict = "not " + th.Op
		if judge == JudgeInterval && cmp(v.v, limit.v) {
			verdict = "not wholly " + th.Op
		}
	}
	res.Detail = fmt.Sprintf("%s%s %s %s %s", at, th.Target, what, valueText, verdict+" "+limitText)
	return res
}

func (u unit) format(v float64) string {
	switch u {
	case unitMs:
		return fmt.Sprintf("%.1f ms", v)
	case unitPerSec:
		return fmt.Sprintf("%.1f/s", v)
	case unitShare:
		return shareText(v)
	case unitMB:
		return fmt.Sprintf("%.1f MB", v)
	}
	return fmt.Sprintf("%g", v)
}

func (u unit) formatRange(r [2]float64) string {
	if u == unitShare {
		return "[" + shareText(r[0]) + "–" + shareText(r[1]) + "]"
	}
	return fmt.Sprintf("[%.1f–%.1f]", r[0], r[1])
}

func shareText(v float64) string {
	return strconv.FormatFloat(math.Round(1000*v)/10, 'f', -1, 64) + "%"
}

// write prints the verdicts, one line each, and a summary.
func (ch *Checks) write(w io.Writer) {
	how := "the point estimate"
	if ch.JudgedOn == JudgeInterval {
		how = "the whole 95% interval"
	}
	fmt.Fprintf(w, "\nchecks (judged on %s)\n", how)
	for _, c := range ch.Results {
		mark := "pass"
		if !c.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s  %s  %s\n", mark, c.Check, c.Detail)
	}
	if ch.Failed == 0 {
		fmt.Fprintf(w, "checks: all %d passed\n", len(ch.Results))
	} else {
		fmt.Fprintf(w, "checks: %d of %d failed\n", ch.Failed, len(ch.Results))
	}
}
