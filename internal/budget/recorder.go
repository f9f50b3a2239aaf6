// Package budget records where each request's time goes: every stage as an
// interval on the request's clock, plus the two numbers that rule
// everything, time to first word (TTFW) and time to complete (TTC), and,
// for a model that thinks, the time to its first thought and how long it
// thought before the first word. One
// Recorder per request feeds the Server-Timing header, the /v1/chat done
// event, the request log, metrics and traces.
package budget

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stage is one named interval of a request. Stages may overlap (the
// context sources run in parallel); Start and End are offsets from the
// request's arrival.
type Stage struct {
	Name  string        `json:"name"`
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Note says how the stage ended when that matters ("timeout",
	// "skipped", "first_token_timeout"...).
	Note string `json:"note,omitempty"`
	// Group marks a stage that contains others (the context group, an
	// upstream attempt): shown in waterfalls, left out of critical paths.
	Group bool `json:"group,omitempty"`
}

// Duration is End - Start.
func (s Stage) Duration() time.Duration { return s.End - s.Start }

// Recorder collects a request's stages. It is safe for concurrent use by
// the goroutines of one request.
type Recorder struct {
	start time.Time

	mu      sync.Mutex
	stages  []Stage
	sorted  []Stage // stages by start, as of sortedN stages
	sortedN int
	ttfw    time.Duration
	ttc     time.Duration
	// ttfthought and thinking: see Thought.
	ttfthought, thinking time.Duration
}

// New starts a recorder for a request that arrived at start.
func New(start time.Time) *Recorder {
	return &Recorder{start: start, stages: make([]Stage, 0, 6)}
}

// Start is when the request arrived.
func (r *Recorder) Start() time.Time { return r.start }

// Since is the offset of t from the request's arrival.
func (r *Recorder) Since(t time.Time) time.Duration { return t.Sub(r.start) }

// Add records a stage that ran from start to end.
func (r *Recorder) Add(name string, start, end time.Time, note string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.stages = append(r.stages, Stage{Name: name, Start: start.Sub(r.start), End: end.Sub(r.start), Note: note})
	r.mu.Unlock()
}

// AddGroup records a stage that contains other stages.
func (r *Recorder) AddGroup(name string, start, end time.Time, note string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.stages = append(r.stages, Stage{Name: name, Start: start.Sub(r.start), End: end.Sub(r.start), Note: note, Group: true})
	r.mu.Unlock()
}

// Begin starts a stage now; the returned function ends it.
func (r *Recorder) Begin(name string) func(note string) {
	if r == nil {
		return func(string) {}
	}
	t := time.Now()
	return func(note string) { r.Add(name, t, time.Now(), note) }
}

// FirstWord records when the first visible text was flushed to the
// client. Only the first call counts.
func (r *Recorder) FirstWord(t time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.ttfw == 0 {
		r.ttfw = t.Sub(r.start)
	}
	r.mu.Unlock()
}

// Thought records that the model thought: its first thought reached the
// client at t, and it thought for thinking before its first answer token
// (0 if none came). Only the first call counts.
func (r *Recorder) Thought(t time.Time, thinking time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.ttfthought == 0 {
		r.ttfthought, r.thinking = t.Sub(r.start), thinking
	}
	r.mu.Unlock()
}

// Complete records when the last byte was sent.
func (r *Recorder) Complete(t time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.ttc = t.Sub(r.start)
	r.mu.Unlock()
}

// TTFW is the time to first word, 0 if no text was sent.
func (r *Recorder) TTFW() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ttfw
}

// TTFThought is the time to the first thought, 0 if the model did not
// think (see Thought).
func (r *Recorder) TTFThought() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ttfthought
}

// Thinking is how long the model thought, from its first thought to its
// first answer token (see Thought).
func (r *Recorder) Thinking() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.thinking
}

// TTC is the time to complete, 0 until Complete.
func (r *Recorder) TTC() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ttc
}

// Stages returns the stages recorded so far, by start time. The slice is
// shared by every caller until the next stage is added: read it only.
func (r *Recorder) Stages() []Stage {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Stages are only appended: the sorted copy stands until the next.
	if r.sortedN != len(r.stages) || r.sorted == nil {
		r.sorted = slices.Clone(r.stages)
		slices.SortStableFunc(r.sorted, func(a, b Stage) int { return int(a.Start - b.Start) })
		r.sortedN = len(r.stages)
	}
	return r.sorted
}

// ServerTiming renders the stages that ended by until as a Server-Timing
// header value (durations in milliseconds), so that browser devtools show
// them. Repeated names (several attempts) get a numeric suffix.
func (r *Recorder) ServerTiming(until time.Time) string {
	limit := until.Sub(r.start)
	stages := r.Stages()
	b := make([]byte, 0, 40*len(stages))
	for i, s := range stages {
		if s.End > limit {
			continue
		}
		name := token(s.Name)
		// The n-th use of a name (in the order of the stages) gets -n.
		n := 1
		for _, p := range stages[:i] {
			if p.End <= limit && token(p.Name) == name {
				n++
			}
		}
		if n > 1 {
			name += "-" + strconv.Itoa(n)
		}
		b = AppendServerTiming(b, name, s.Duration(), s.Note)
	}
	return string(b)
}

// AppendServerTiming appends one metric of a Server-Timing header value
// to b (after a comma when b holds others): name;dur=MS;desc="note", the
// name and note made safe for the header.
func AppendServerTiming(b []byte, name string, d time.Duration, note string) []byte {
	if len(b) > 0 {
		b = append(b, ", "...)
	}
	b = append(b, token(name)...)
	b = append(b, ";dur="...)
	b = strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', -1, 64)
	if note != "" {
		b = append(b, `;desc="`...)
		b = append(b, token(note)...)
		b = append(b, '"')
	}
	return b
}

// token makes a name safe for a header token.
func token(s string) string {
	ok := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/') {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '/' {
			return r
		}
		return '_'
	}, s)
}

// Timings is the JSON form of a request's timings, in milliseconds.
type Timings struct {
	TTFWMs float64 `json:"ttfw_ms"`
	// TTFThoughtMs and ThinkingMs: see Recorder.Thought (absent when the
	// model did not think).
	TTFThoughtMs float64       `json:"ttfthought_ms,omitempty"`
	ThinkingMs   float64       `json:"thinking_ms,omitempty"`
	TTCMs        float64       `json:"ttc_ms"`
	Stages       []StageTiming `json:"stages"`
}

// StageTiming is a stage in milliseconds from the request's arrival.
type StageTiming struct {
	Name    string  `json:"name"`
	StartMs float64 `json:"start_ms"`
	EndMs   float64 `json:"end_ms"`
	Note    string  `json:"note,omitempty"`
	Group   bool    `json:"group,omitempty"`
}

// Timings returns the request's timings.
func (r *Recorder) Timings() Timings {
	stages := r.Stages()
	r.mu.Lock()
	t := Timings{TTFWMs: ms(r.ttfw), TTFThoughtMs: ms(r.ttfthought), ThinkingMs: ms(r.thinking), TTCMs: ms(r.ttc), Stages: make([]StageTiming, 0, len(stages))}
	r.mu.Unlock()
	for _, s := range stages {
		t.Stages = append(t.Stages, StageTiming{Name: s.Name, StartMs: ms(s.Start), EndMs: ms(s.End), Note: s.Note, Group: s.Group})
	}
	return t
}

// JSON returns Timings as JSON.
func (r *Recorder) JSON() []byte { return r.AppendJSON(nil) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// CriticalPath returns the chain of stages that decided when the first
// word was sent: walking back from TTFW, each step is the stage (not a
// group) that ended last before the current point. Stages in parallel with
// a longer one are not on it. Empty when no word was sent.
func CriticalPath(stages []Stage, ttfw time.Duration) []string {
	if ttfw <= 0 {
		return nil
	}
	const slack = 500 * time.Microsecond
	var path []string
	cur := ttfw
	used := make([]bool, len(stages))
	for cur > 0 {
		best := -1
		for i, s := range stages {
			if used[i] || s.Group || s.Start >= cur || s.End > cur+slack {
				continue
			}
			if best < 0 || s.End > stages[best].End || (s.End == stages[best].End && s.Duration() > stages[best].Duration()) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		used[best] = true
		path = append(path, stages[best].Name)
		cur = stages[best].Start
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}
