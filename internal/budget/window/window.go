// Package window keeps the latency budget's live picture: percentiles of
// every stage, TTFW and TTC (and, for models that think, the time to the
// first thought and the thinking time) over the last minutes, from mergeable DDSketch
// quantile sketches (1% relative error), the critical paths requests took,
// and the last requests' waterfalls. It compares them with the configured
// targets and names the stage that most overspends its budget.
package window

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/firstword/firstword/internal/budget"
)

// Target is a latency target at a percentile: 50, 95 or 99.
type Target struct {
	Percentile float64
	Value      time.Duration
}

// Targets are the budget: TTFW, TTC and per-stage targets.
type Targets struct {
	TTFW, TTC *Target
	Stages    map[string]Target
}

// Window aggregates requests over a sliding window. Safe for concurrent
// use.
type Window struct {
	width   time.Duration
	slot    time.Duration
	targets Targets
	keep    int

	mu     sync.Mutex
	slots  map[scope][]*slot // by the requests' tenant and surface; a view merges those it covers
	recent []Request         // a ring of the last keep requests
	next   int               // where the next request goes in recent
}

type slot struct {
	start  time.Time
	n      int
	ttfw   *ddsketch.DDSketch
	ttc    *ddsketch.DDSketch
	think  *thinkStats // nil until a request thought
	stages map[string]*stageStats
	paths  map[string]int
}

// thinkStats are the requests whose model thought: the time to the first
// thought, the thinking time and, per request with a first word, the
// thinking's share of the wait for it.
type thinkStats struct {
	ttfthought, thinking, share *ddsketch.DDSketch
}

func newThinkStats() *thinkStats {
	return &thinkStats{ttfthought: newSketch(), thinking: newSketch(), share: newSketch()}
}

func (t *thinkStats) merge(o *thinkStats) {
	t.ttfthought.MergeWith(o.ttfthought)
	t.thinking.MergeWith(o.thinking)
	t.share.MergeWith(o.share)
}

type stageStats struct {
	sketch *ddsketch.DDSketch
	// share holds, per request with a first word, the stage's share of
	// the wait for it (see shareBeforeWord).
	share *ddsketch.DDSketch
	// critical counts requests where it was on the critical path.
	critical int
}

func newStageStats() *stageStats { return &stageStats{sketch: newSketch(), share: newSketch()} }

// Request is one request's waterfall.
type Request struct {
	ID           string               `json:"id"`
	Tenant       string               `json:"tenant,omitempty"`
	User         string               `json:"-"`
	Time         time.Time            `json:"time"`
	Surface      string               `json:"surface"`
	Model        string               `json:"model"`
	Status       string               `json:"status"`
	TTFWMs       float64              `json:"ttfw_ms"`
	TTFThoughtMs float64              `json:"ttfthought_ms,omitempty"`
	ThinkingMs   float64              `json:"thinking_ms,omitempty"`
	TTCMs        float64              `json:"ttc_ms"`
	Stages       []budget.StageTiming `json:"stages"`
	CriticalPath []string             `json:"critical_path"`
}

// New returns a Window of the given width (e.g. 5 minutes), in slots of a
// fifth of it, keeping the last keep requests' waterfalls.
func New(width time.Duration, targets Targets, keep int) *Window {
	if width <= 0 {
		width = 5 * time.Minute
	}
	if keep <= 0 {
		keep = 50
	}
	return &Window{width: width, slot: width / 5, targets: targets, keep: keep, slots: map[scope][]*slot{}}
}

func newSketch() *ddsketch.DDSketch {
	s, _ := ddsketch.NewDefaultDDSketch(0.01)
	return s
}

// current returns a scope's slot for now, rotating out slots older than
// the window. Call with mu held.
func (w *Window) current(now time.Time, key scope) *slot {
	slots := w.slots[key]
	start := now.Truncate(w.slot)
	if n := len(slots); n > 0 && slots[n-1].start.Equal(start) {
		return slots[n-1]
	}
	cut := 0
	for cut < len(slots) && now.Sub(slots[cut].start) >= w.width {
		cut++
	}
	slots = append(slots[:0], slots[cut:]...)
	s := &slot{start: start, ttfw: newSketch(), ttc: newSketch(), stages: map[string]*stageStats{}, paths: map[string]int{}}
	w.slots[key] = append(slots, s)
	return s
}

// scope names the slots of one tenant's ("" for all) requests on one
// surface ("" for all).
type scope struct{ tenant, surface string }

// Observe adds a finished request of a tenant. status is how it ended;
// TTC counts only requests that completed (or were cut by the timeout).
func (w *Window) Observe(now time.Time, id, tenant, user, surface, model, status string, rec *budget.Recorder) {
	stages := rec.Stages()
	timings := rec.Timings()
	ttfw, ttc := rec.TTFW(), rec.TTC()
	ttfthought, thinking := rec.TTFThought(), rec.Thinking()
	path := budget.CriticalPath(stages, ttfw)
	joined := strings.Join(path, " → ")
	var buf [16]float64
	shares := buf[:0]
	for i := range stages {
		shares = append(shares, shareBeforeWord(stages, i, ttfw))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// One scope is written, the request's own; Report merges the scopes
	// a view covers (a request is observed far more often than read).
	s := w.current(now, scope{tenant, surface})
	s.n++
	if ttfw > 0 {
		s.ttfw.Add(ms(ttfw))
		s.paths[joined]++
	}
	if ttc > 0 && (status == "complete" || status == "timeout") {
		s.ttc.Add(ms(ttc))
	}
	if ttfthought > 0 {
		if s.think == nil {
			s.think = newThinkStats()
		}
		s.think.ttfthought.Add(ms(ttfthought))
		if thinking > 0 {
			s.think.thinking.Add(ms(thinking))
		}
		if ttfw > 0 {
			s.think.share.Add(min(float64(thinking)/float64(ttfw), 1))
		}
	}
	for i, st := range stages {
		ss := s.stages[st.Name]
		if ss == nil {
			ss = newStageStats()
			s.stages[st.Name] = ss
		}
		ss.sketch.Add(math.Max(ms(st.Duration()), 0))
		if shares[i] >= 0 {
			ss.share.Add(shares[i])
		}
		if slices.Contains(path, st.Name) {
			ss.critical++
		}
	}
	r := Request{ID: id, Tenant: tenant, User: user, Time: now.UTC(), Surface: surface, Model: model, Status: status, TTFWMs: ms(ttfw),
		TTFThoughtMs: timings.TTFThoughtMs, ThinkingMs: timings.ThinkingMs, TTCMs: ms(ttc), Stages: timings.Stages, CriticalPath: path}
	if len(w.recent) < w.keep {
		w.recent = append(w.recent, r)
	} else {
		w.recent[w.next] = r
	}
	w.next = (w.next + 1) % w.keep
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// shareBeforeWord is the share of a request's wait for its first word that
// the stages named as stages[i] took: their time before the first word
// over the TTFW, at most 1. It is -1 when there was no first word, or when
// an earlier stage has the name (the first occurrence counts them all).
//
// Why per request: the share used to be the stage's p50 over TTFW's p50,
// and percentiles of different populations do not divide. Requests
// without a stage (cache hits have no ttft) pull TTFW's p50 down but not
// the stage's; failures (no first word) push the stage's p50 up but not
// TTFW's; so "shares" of 3000% came out. A ratio within one request is
// between 0 and 1 by construction, and the report's median of them reads
// as "in a typical request, this stage took that much of the wait".
func shareBeforeWord(stages []budget.Stage, i int, ttfw time.Duration) float64 {
	if ttfw <= 0 {
		return -1
	}
	name := stages[i].Name
	for _, st := range stages[:i] {
		if st.Name == name {
			return -1
		}
	}
	var before time.Duration
	for _, st := range stages[i:] {
		if st.Name == name {
			// Retries of a stage add up; hedged attempts that overlap
			// would count twice, which the cap below absorbs.
			before += max(min(st.End, ttfw)-max(st.Start, 0), 0)
		}
	}
	return min(float64(before)/float64(ttfw), 1)
}

// SmallSample is the count of requests under which a report is read as
// min, median and max: a p95 of a few samples is one of them, and hides
// the slow one.
const SmallSample = 20

// Row is one line of the report: percentiles in milliseconds.
type Row struct {
	Name  string  `json:"name"`
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	// Min and Max are the fastest and slowest, within the sketch's 1%:
	// below SmallSample requests they say more than percentiles do.
	Min float64 `json:"min_ms,omitempty"`
	Max float64 `json:"max_ms,omitempty"`
	// Target, when set: the percentile it applies to and its value.
	TargetPercentile float64 `json:"target_percentile,omitempty"`
	TargetMs         float64 `json:"target_ms,omitempty"`
	// Over is the observed value at the target's percentile divided by
	// the target (above 1: over budget).
	Over float64 `json:"over,omitempty"`
	// ShareOfTTFW is how much of the wait for the first word the stage
	// takes in a typical request: over the requests with a first word
	// that ran the stage, the median of the stage's time before the first
	// word divided by the request's TTFW (0 to 1; parallel stages each
	// count their own time, so shares do not add up to 1). CriticalShare
	// is how often the stage was on the critical path to the first word.
	ShareOfTTFW   float64 `json:"share_of_ttfw,omitempty"`
	CriticalShare float64 `json:"critical_share,omitempty"`
	Group         bool    `json:"group,omitempty"`
}

// Report is the window's picture.
type Report struct {
	WindowSeconds float64 `json:"window_seconds"`
	Surface       string  `json:"surface,omitempty"`
	Requests      int     `json:"requests"`
	TTFW          Row     `json:"ttfw"`
	TTC           Row     `json:"ttc"`
	// TTFThought is the time to the first thought and Thinking the time
	// from it to the first answer token, over the requests whose model
	// thought (Count 0: none did). Thinking's ShareOfTTFW is how much of
	// the wait for the first word was thinking in a typical one of them:
	// the time to first word is still what the user feels.
	TTFThought    Row       `json:"ttfthought"`
	Thinking      Row       `json:"thinking"`
	Stages        []Row     `json:"stages"`
	CriticalPath  string    `json:"critical_path"`
	CriticalShare float64   `json:"critical_path_share"`
	Overspend     string    `json:"most_over_budget,omitempty"`
	Recent        []Request `json:"recent,omitempty"`
}

// merge adds one scope's slots within the window to a report's sums.
func (w *Window) merge(now time.Time, slots []*slot, rep *Report, ttfw, ttc *ddsketch.DDSketch, think *thinkStats, stages map[string]*stageStats, paths map[string]int, words *int) {
	for _, s := range slots {
		if now.Sub(s.start) >= w.width {
			continue // rotated out at the scope's next request
		}
		rep.Requests += s.n
		ttfw.MergeWith(s.ttfw)
		ttc.MergeWith(s.ttc)
		if s.think != nil {
			think.merge(s.think)
		}
		for name, ss := range s.stages {
			agg := stages[name]
			if agg == nil {
				agg = newStageStats()
				stages[name] = agg
			}
			agg.sketch.MergeWith(ss.sketch)
			agg.share.MergeWith(ss.share)
			agg.critical += ss.critical
		}
		for p, n := range s.paths {
			paths[p] += n
			*words += n
		}
	}
}

// Report merges the window's slots of one tenant's requests ("" for every
// tenant's) on one surface ("" for all). recent bounds the waterfalls
// returned, which are the tenant's only, and one user's if user is set
// (the percentiles are the tenant's).
func (w *Window) Report(now time.Time, tenant, user, surface string, recent int) Report {
	w.mu.Lock()
	defer w.mu.Unlock()
	rep := Report{WindowSeconds: w.width.Seconds(), Surface: surface}
	ttfw, ttc := newSketch(), newSketch()
	think := newThinkStats()
	stages := map[string]*stageStats{}
	paths := map[string]int{}
	words := 0
	for key, slots := range w.slots {
		if tenant != "" && key.tenant != tenant || surface != "" && key.surface != surface {
			continue
		}
		w.merge(now, slots, &rep, ttfw, ttc, think, stages, paths, &words)
	}
	rep.TTFW = row("ttfw", ttfw, w.targets.TTFW)
	rep.TTC = row("ttc", ttc, w.targets.TTC)
	rep.TTFThought = row("ttfthought", think.ttfthought, nil)
	rep.Thinking = row("thinking", think.thinking, nil)
	rep.Thinking.ShareOfTTFW = median(think.share)
	worst := 1.0
	for name, ss := range stages {
		var t *Target
		if v, ok := w.targets.Stages[name]; ok {
			t = &v
		}
		r := row(name, ss.sketch, t)
		r.ShareOfTTFW = median(ss.share)
		if words > 0 {
			r.CriticalShare = float64(ss.critical) / float64(words)
		}
		r.Group = strings.HasPrefix(name, "upstream ") || name == "context"
		if r.Over > worst {
			worst, rep.Overspend = r.Over, name
		}
		rep.Stages = append(rep.Stages, r)
	}
	for _, r := range []Row{rep.TTFW, rep.TTC} {
		if r.Over > worst {
			worst, rep.Overspend = r.Over, r.Name
		}
	}
	sort.Slice(rep.Stages, func(i, j int) bool {
		a, b := rep.Stages[i], rep.Stages[j]
		if (a.ShareOfTTFW > 0) != (b.ShareOfTTFW > 0) {
			return a.ShareOfTTFW > 0
		}
		if a.P50 != b.P50 {
			return a.P50 > b.P50
		}
		return a.Name < b.Name // a stable order for equal times
	})
	best := 0
	for p, n := range paths {
		if n > best || (n == best && p < rep.CriticalPath) {
			best, rep.CriticalPath = n, p
		}
	}
	if words > 0 {
		rep.CriticalShare = float64(best) / float64(words)
	}
	for k := 1; k <= len(w.recent) && len(rep.Recent) < recent; k++ {
		i := (w.next - k + len(w.recent)) % len(w.recent) // newest first
		rq := &w.recent[i]
		if (surface == "" || rq.Surface == surface) && (tenant == "" || rq.Tenant == tenant) && (user == "" || rq.User == user) {
			rep.Recent = append(rep.Recent, *rq)
		}
	}
	slices.Reverse(rep.Recent)
	return rep
}

func row(name string, s *ddsketch.DDSketch, t *Target) Row {
	r := Row{Name: name, Count: int(s.GetCount())}
	if r.Count == 0 {
		if t != nil {
			r.TargetPercentile, r.TargetMs = t.Percentile, ms(t.Value)
		}
		return r
	}
	q, _ := s.GetValuesAtQuantiles([]float64{0.5, 0.95, 0.99})
	r.P50, r.P95, r.P99 = round(q[0]), round(q[1]), round(q[2])
	lo, _ := s.GetMinValue()
	hi, _ := s.GetMaxValue()
	r.Min, r.Max = round(lo), round(hi)
	if t != nil && t.Value > 0 {
		r.TargetPercentile, r.TargetMs = t.Percentile, ms(t.Value)
		v, _ := s.GetValueAtQuantile(t.Percentile / 100)
		r.Over = math.Round(v/ms(t.Value)*1000) / 1000
	}
	return r
}

// median is the median of a sketch of shares (0 to 1), 0 if empty.
func median(s *ddsketch.DDSketch) float64 {
	if s.GetCount() == 0 {
		return 0
	}
	// The sketch's 1% relative error could lift a median of 1 above it.
	v, _ := s.GetValueAtQuantile(0.5)
	return min(round(v), 1)
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }
