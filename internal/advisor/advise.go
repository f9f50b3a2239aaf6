package advisor

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Alias is what the advisor reads of an alias's config.
type Alias struct {
	// MaxTokens is its answer cap (0: none).
	MaxTokens int
	// FirstTokenTimeout is each attempt's first-token timeout.
	FirstTokenTimeout time.Duration
	// Cache: the response cache's TTL and whether it caches every
	// request (Nondeterministic) or only deterministic ones; CacheOff: it
	// caches none.
	CacheTTL         time.Duration
	CacheOff         bool
	Nondeterministic bool
	// PromptCaching marks the stable prefix for the provider's cache.
	PromptCaching bool
	// ThinkingBudget caps the thinking (0: no cap).
	ThinkingBudget int
}

// Price is a deployment's price per token.
type Price struct{ Input, CachedInput, Output float64 }

// Options are the config's facts the predictions need.
type Options struct {
	Aliases map[string]Alias
	// Price is a deployment's price (false: unknown, priced at 0).
	Price func(deployment string) (Price, bool)
	// ModelCalls are the pre-call steps that are model calls of their
	// own (config: model_call), by stage name.
	ModelCalls map[string]bool
}

// Saving is what a lever would save: milliseconds at p50 and p95 of the
// time to first word and the time to complete, and dollars per request
// (mean) and as a share of the measured cost.
type Saving struct {
	TTFWP50   float64 `json:"ttfw_p50_ms"`
	TTFWP95   float64 `json:"ttfw_p95_ms"`
	TTCP50    float64 `json:"ttc_p50_ms"`
	TTCP95    float64 `json:"ttc_p95_ms"`
	Cost      float64 `json:"cost_per_request"`
	CostShare float64 `json:"cost_share"`
}

// Lever is one prediction.
type Lever struct {
	Lever  string `json:"lever"`
	Title  string `json:"title"`
	Saving Saving `json:"saving"`
	// Affected counts the requests the lever changes (answers cut, prompts
	// routed, cache hits...).
	Affected int `json:"affected"`
	// Detail says what the prediction assumed, in words.
	Detail string `json:"detail"`
	// Set is what to set on the alias to turn it on (its config keys);
	// Config is the same as YAML, under models:.
	Set    map[string]any `json:"set"`
	Config string         `json:"config"`
}

// Measured are the alias's measured figures the savings are taken from.
type Measured struct {
	TTFWP50 float64 `json:"ttfw_p50_ms"`
	TTFWP95 float64 `json:"ttfw_p95_ms"`
	TTCP50  float64 `json:"ttc_p50_ms"`
	TTCP95  float64 `json:"ttc_p95_ms"`
	Cost    float64 `json:"cost_per_request"`
	// TokensPerSecond is the median writing rate of its answers.
	TokensPerSecond float64 `json:"tokens_per_second"`
}

// Advice is one alias's levers, with two rankings of their names: by the
// saving at p95 of the time to first word, and of the time to complete
// (levers that save nothing there are left out of that ranking).
type Advice struct {
	Alias    string   `json:"alias"`
	Requests int      `json:"requests"`
	Measured Measured `json:"measured"`
	Levers   []Lever  `json:"levers"`
	ByTTFW   []string `json:"by_ttfw"`
	ByTTC    []string `json:"by_ttc"`
	// Notes say what could not be predicted, and why.
	Notes []string `json:"notes,omitempty"`
}

// minSamples is the fewest requests an alias needs for advice.
const minSamples = 20

// Advise predicts each lever's saving for each alias with enough samples
// (by alias, as Recorder.Samples gives them), aliases in name order.
func Advise(samples map[string][]Sample, opt Options) []Advice {
	names := make([]string, 0, len(samples))
	for n, ss := range samples {
		if len(ss) >= minSamples {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]Advice, 0, len(names))
	for _, n := range names {
		out = append(out, advise(n, samples, opt))
	}
	return out
}

// outcome is a request's time to first word and to complete (ms; -1:
// none) and cost, measured or predicted.
type outcome struct{ ttfw, ttc, cost float64 }

type alias struct {
	name  string
	ss    []Sample
	base  []outcome
	rate  float64 // answer tokens per second
	cfg   Alias
	opt   Options
	notes []string
}

func advise(name string, all map[string][]Sample, opt Options) Advice {
	a := &alias{name: name, ss: all[name], cfg: opt.Aliases[name], opt: opt}
	a.base = make([]outcome, len(a.ss))
	for i := range a.ss {
		a.base[i] = measured(&a.ss[i])
	}
	a.rate = writingRate(a.ss)
	adv := Advice{Alias: name, Requests: len(a.ss)}
	adv.Measured = Measured{TTFWP50: pct(a.base, ttfwOf, 50), TTFWP95: pct(a.base, ttfwOf, 95),
		TTCP50: pct(a.base, ttcOf, 50), TTCP95: pct(a.base, ttcOf, 95), Cost: meanCost(a.base), TokensPerSecond: round(a.rate)}
	for _, l := range []*Lever{a.askForLess(), a.smallerModel(all), a.cache(), a.prefixCache(), a.parallelSteps(), a.thinkLess(), a.timeout()} {
		if l != nil {
			adv.Levers = append(adv.Levers, *l)
		}
	}
	adv.Levers = append(adv.Levers, a.fewerCalls()...)
	adv.ByTTFW = ranking(adv.Levers, func(s Saving) float64 { return s.TTFWP95 })
	adv.ByTTC = ranking(adv.Levers, func(s Saving) float64 { return s.TTCP95 })
	adv.Notes = a.notes
	return adv
}

func measured(s *Sample) outcome {
	o := outcome{ttfw: -1, ttc: -1, cost: s.Cost}
	if s.TTFW > 0 {
		o.ttfw = ms(s.TTFW)
	}
	if s.Complete && s.Total > 0 {
		o.ttc = ms(s.Total)
	}
	return o
}

// lever replays the samples with change applied to each (it returns the
// request's new outcome, and whether it changed it) and names the saving.
func (a *alias) lever(name, title string, change func(i int, o outcome) (outcome, bool)) *Lever {
	next := make([]outcome, len(a.base))
	n := 0
	for i, o := range a.base {
		c, ok := change(i, o)
		if ok {
			n++
		} else {
			c = o
		}
		next[i] = c
	}
	base := meanCost(a.base)
	s := Saving{
		TTFWP50: round(pct(a.base, ttfwOf, 50) - pct(next, ttfwOf, 50)),
		TTFWP95: round(pct(a.base, ttfwOf, 95) - pct(next, ttfwOf, 95)),
		TTCP50:  round(pct(a.base, ttcOf, 50) - pct(next, ttcOf, 50)),
		TTCP95:  round(pct(a.base, ttcOf, 95) - pct(next, ttcOf, 95)),
		Cost:    base - meanCost(next),
	}
	if base > 0 {
		s.CostShare = round(s.Cost / base)
	}
	return &Lever{Lever: name, Title: title, Saving: s, Affected: n}
}

// answerTokens is what a request's answer wrote, thinking left out.
func answerTokens(s *Sample) int { return max(s.Output-s.Reasoning, 0) }

// writingRate is the median rate, in answer tokens per second, of the
// samples that wrote at least two tokens over a measured time.
func writingRate(ss []Sample) float64 {
	var rates []float64
	for i := range ss {
		s := &ss[i]
		if n := answerTokens(s); n >= 2 && s.Gen > 0 && !s.CacheHit {
			rates = append(rates, float64(n-1)/s.Gen.Seconds())
		}
	}
	return median(rates)
}

func (a *alias) price(s *Sample) Price {
	if a.opt.Price == nil {
		return Price{}
	}
	p, _ := a.opt.Price(s.Deployment)
	return p
}

// askForLess caps the answer at the p50 of the answer lengths: an answer
// longer than the cap ends there, saving its extra tokens at the
// measured writing rate and their price. The first word does not move.
func (a *alias) askForLess() *Lever {
	var lens []float64
	for i := range a.ss {
		if !a.ss[i].CacheHit && a.ss[i].Complete {
			lens = append(lens, float64(answerTokens(&a.ss[i])))
		}
	}
	if len(lens) < minSamples || a.rate <= 0 {
		a.notes = append(a.notes, "ask for less: too few complete answers with a measured writing rate")
		return nil
	}
	limit := int(math.Round(percentile(lens, 50)))
	p75 := int(math.Round(percentile(lens, 75)))
	if limit < 1 || a.cfg.MaxTokens > 0 && a.cfg.MaxTokens <= limit {
		return nil
	}
	l := a.lever("ask_for_less", fmt.Sprintf("Ask for less: cap answers at %d tokens", limit), func(i int, o outcome) (outcome, bool) {
		s := &a.ss[i]
		cut := answerTokens(s) - limit
		if cut <= 0 || s.CacheHit || !s.Complete {
			return o, false
		}
		o.ttc -= float64(cut) / a.rate * 1000
		o.cost -= float64(cut) * a.price(s).Output
		return o, true
	})
	l.Detail = fmt.Sprintf("answers are %d tokens at p50 and %d at p75, written at %.0f tokens/s; a cap at the p50 ends %d of %d answers early (at p75 it would end fewer, and save less). The first word does not move. Whether a shorter answer is still a good one is not measured here: brevity (\"Answer in at most three sentences.\") asks for it without cutting.",
		limit, p75, a.rate, l.Affected, len(lens))
	a.set(l, map[string]any{"max_tokens": limit})
	return l
}

// smallerModel routes the short prompts (input at most the p50) to the
// cheapest other alias with measured traffic whose price is lower: their
// first token comes at its median TTFT, their answer at its writing rate,
// priced at its price.
func (a *alias) smallerModel(all map[string][]Sample) *Lever {
	// The cheapest alias cheaper than this one; without prices, the
	// fastest writer faster than it.
	mine := a.meanOutputPrice(a.ss)
	names := make([]string, 0, len(all))
	for n, ss := range all {
		if n != a.name && len(ss) >= 5 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	best, bestPrice, bestRate := "", mine, a.rate*1.2
	for _, n := range names {
		p, r := a.meanOutputPrice(all[n]), writingRate(all[n])
		if mine > 0 && p < bestPrice || mine == 0 && p == 0 && r > bestRate {
			best, bestPrice, bestRate = n, p, r
		}
	}
	if best == "" {
		a.notes = append(a.notes, "smaller model: no cheaper alias has measured traffic in the window: send some requests to the smaller tier to measure it")
		return nil
	}
	small := all[best]
	var ttfts, inputs []float64
	for i := range small {
		if small[i].TTFT > 0 && !small[i].CacheHit {
			ttfts = append(ttfts, ms(small[i].TTFT-small[i].CallStart))
		}
	}
	for i := range a.ss {
		inputs = append(inputs, float64(a.ss[i].Input))
	}
	ttft, rate := median(ttfts), writingRate(small)
	if ttft <= 0 || rate <= 0 {
		return nil
	}
	short := int(math.Round(percentile(inputs, 50)))
	var sp Price
	if a.opt.Price != nil {
		sp, _ = a.opt.Price(small[0].Deployment)
	}
	l := a.lever("smaller_model", fmt.Sprintf("Smaller model: send prompts of at most %d tokens to %s", short, best), func(i int, o outcome) (outcome, bool) {
		s := &a.ss[i]
		if s.Input > short || s.CacheHit || s.TTFT <= 0 {
			return o, false
		}
		first := ms(s.CallStart) + ttft
		if o.ttfw >= 0 {
			o.ttfw += first - ms(s.TTFT)
		}
		if o.ttc >= 0 {
			o.ttc = first + float64(max(answerTokens(s)-1, 0))/rate*1000 + (ms(s.Total) - ms(s.TTFT) - ms(s.Gen))
		}
		o.cost = float64(s.Input)*sp.Input + float64(s.Output)*sp.Output
		return o, true
	})
	l.Detail = fmt.Sprintf("%s measured its model's first token at %.0f ms (median, from the call) and %.0f tokens/s, against %.0f tokens/s here; the rule routes the %d prompts of at most %d tokens (the p50). Whether its answers are good enough for them is not measured here.",
		best, ttft, rate, a.rate, l.Affected, short)
	a.set(l, map[string]any{"rules": []any{map[string]any{"name": "short-prompts", "max_input_tokens": short, "use": best}}})
	return l
}

// set names the config that turns l on.
func (a *alias) set(l *Lever, keys map[string]any) {
	l.Set = keys
	b, err := yaml.Marshal(map[string]any{a.name: keys})
	if err == nil {
		l.Config = strings.TrimSpace(string(b))
	}
}

// meanOutputPrice is the samples' mean output price per token.
func (a *alias) meanOutputPrice(ss []Sample) float64 {
	sum := 0.0
	for i := range ss {
		sum += a.price(&ss[i]).Output
	}
	return sum / float64(max(len(ss), 1))
}

// cache answers a request from the cache when an identical one (same
// tenant, alias and content) completed within the cache's TTL before it:
// the hit's first word and last byte come at the measured hit time (1 ms
// when no hit was seen), at no cost.
func (a *alias) cache() *Lever {
	ttl := a.cfg.CacheTTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	var hits []float64
	for i := range a.ss {
		if a.ss[i].CacheHit && a.ss[i].TTFW > 0 {
			hits = append(hits, ms(a.ss[i].Total))
		}
	}
	hit := median(hits)
	if hit <= 0 {
		hit = 1
	}
	seen := map[uint64]time.Time{}
	repeats := make([]bool, len(a.ss))
	for i := range a.ss {
		s := &a.ss[i]
		if s.RepeatKey == 0 {
			continue
		}
		if t, ok := seen[s.RepeatKey]; ok && s.Time.Sub(t) <= ttl && !s.CacheHit {
			repeats[i] = true
		}
		if s.Complete {
			seen[s.RepeatKey] = s.Time
		}
	}
	l := a.lever("cache", "Cache repeated requests", func(i int, o outcome) (outcome, bool) {
		if !repeats[i] {
			return o, false
		}
		return outcome{ttfw: hit, ttc: hit, cost: 0}, true
	})
	if l.Affected == 0 {
		return nil
	}
	l.Detail = fmt.Sprintf("%d of %d requests repeat one that completed within the cache's TTL (%s) and were not served from the cache; a hit takes %.1f ms. Only repeats the cache would take: a request that is not deterministic is served from the cache only with nondeterministic: true.",
		l.Affected, len(a.ss), ttl, hit)
	a.set(l, map[string]any{"cache": map[string]any{"enabled": true, "nondeterministic": true, "ttl": ttl.String()}})
	return l
}

// prefixCache reads a repeated stable prefix from the provider's prompt
// cache: the first token comes earlier by the measured time per input
// token (a least-squares fit of TTFT on the uncached input tokens) times
// the prefix, and the prefix is billed at the cached-input price.
func (a *alias) prefixCache() *Lever {
	if a.cfg.PromptCaching {
		return nil
	}
	slope := ttftPerToken(a.ss)
	seen := map[uint64]time.Time{}
	l := a.lever("prefix_cache", "Prompt-prefix caching", func(i int, o outcome) (outcome, bool) {
		s := &a.ss[i]
		if s.PrefixKey == 0 || s.PrefixTokens == 0 || s.CacheHit {
			return o, false
		}
		t, ok := seen[s.PrefixKey]
		seen[s.PrefixKey] = s.Time
		if !ok || s.Time.Sub(t) > 5*time.Minute || s.Cached >= s.PrefixTokens {
			return o, false
		}
		cut := slope * float64(s.PrefixTokens-s.Cached)
		if o.ttfw >= 0 {
			o.ttfw -= cut
		}
		if o.ttc >= 0 {
			o.ttc -= cut
		}
		p := a.price(s)
		o.cost -= float64(s.PrefixTokens-s.Cached) * (p.Input - p.CachedInput)
		return o, true
	})
	if l.Affected == 0 {
		return nil
	}
	l.Detail = fmt.Sprintf("%d requests repeat a stable prefix (system prompt and tools) seen in the 5 minutes before; the first token was measured to take %.3f ms more per uncached input token (%s), and the provider bills cached input at its cached price. Providers skip prefixes under their minimum (1,024 tokens on most Anthropic models).",
		l.Affected, slope, fitNote(slope))
	a.set(l, map[string]any{"prompt_caching": true})
	return l
}

func fitNote(slope float64) string {
	if slope <= 0 {
		return "no relation measured, so no time saving is predicted"
	}
	return "a least-squares fit over the window"
}

// ttftPerToken fits TTFT = a + b * uncached input tokens over the samples
// and returns b in ms per token (0 when the fit finds none).
func ttftPerToken(ss []Sample) float64 {
	var n, sx, sy, sxx, sxy float64
	for i := range ss {
		s := &ss[i]
		if s.TTFT <= 0 || s.CacheHit {
			continue
		}
		x, y := float64(s.Input-s.Cached), ms(s.TTFT)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	d := n*sxx - sx*sx
	if n < minSamples || d <= 0 {
		return 0
	}
	return max((n*sxy-sx*sy)/d, 0)
}

// parallelSteps runs the pre-call steps side by side: the wait for them
// becomes the slowest one's instead of their span.
func (a *alias) parallelSteps() *Lever {
	gap := make([]float64, len(a.ss))
	for i := range a.ss {
		steps := a.ss[i].Steps
		if len(steps) < 2 {
			continue
		}
		first, last, slowest := steps[0].Start, steps[0].End, time.Duration(0)
		for _, st := range steps {
			first, last = min(first, st.Start), max(last, st.End)
			slowest = max(slowest, st.End-st.Start)
		}
		gap[i] = ms(last - first - slowest)
	}
	l := a.lever("parallel_steps", "Run the context steps in parallel", func(i int, o outcome) (outcome, bool) {
		if gap[i] < 0.5 {
			return o, false
		}
		if o.ttfw >= 0 {
			o.ttfw -= gap[i]
		}
		if o.ttc >= 0 {
			o.ttc -= gap[i]
		}
		return o, true
	})
	if l.Affected == 0 {
		return nil
	}
	l.Detail = fmt.Sprintf("%d requests waited for context steps one after another: the span of the steps less the slowest one, %.0f ms at the median. firstword's own context sources already run in parallel; a step that waits for another (or a client that calls its lookups in turn before the gateway) is what this finds.",
		l.Affected, median(nonZero(gap)))
	l.Config = "# chat.sources: history, retrieval and lookups run in parallel there"
	return l
}

// fewerCalls removes each pre-call step that is a model call of its own:
// the wait for the pre-call steps becomes the span of the others (a step
// that ran beside a slower one saves nothing).
func (a *alias) fewerCalls() []Lever {
	var names []string
	for n := range a.opt.ModelCalls {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Lever
	for _, name := range names {
		if !a.opt.ModelCalls[name] {
			continue
		}
		cut := make([]float64, len(a.ss))
		for i := range a.ss {
			cut[i] = ms(span(a.ss[i].Steps, "") - span(a.ss[i].Steps, name))
		}
		l := a.lever("fewer_calls", fmt.Sprintf("Fewer calls: drop the model call %s", name), func(i int, o outcome) (outcome, bool) {
			if cut[i] < 0.5 {
				return o, false
			}
			if o.ttfw >= 0 {
				o.ttfw -= cut[i]
			}
			if o.ttc >= 0 {
				o.ttc -= cut[i]
			}
			return o, true
		})
		if l.Affected == 0 {
			continue
		}
		l.Detail = fmt.Sprintf("%s is a model call of its own (model_call: true) before the answer's: without it the pre-call steps would have ended %.0f ms sooner at the median, in the %d requests where it was the slowest. Whether the answer needs what it adds is not measured here: a rule, a cache in front of it, or folding it into the main prompt are the usual ways to drop it.",
			name, median(nonZero(cut)), l.Affected)
		l.Config = "# a change to the application or to chat.sources: drop " + name + ", or fold it into the main call"
		out = append(out, *l)
	}
	return out
}

// span is the time from the first of the steps' starts to the last of
// their ends, leaving out the step named without ("": none).
func span(steps []Step, without string) time.Duration {
	var first, last time.Duration
	seen := false
	for _, st := range steps {
		if st.Name == without {
			continue
		}
		if !seen {
			first, last, seen = st.Start, st.End, true
		}
		first, last = min(first, st.Start), max(last, st.End)
	}
	return last - first
}

// thinkLess caps the thinking at the p50 of the thinking tokens: a
// request that thought more stops there, saving the extra tokens at its
// measured thinking rate (thinking delays the first word and the last)
// and their price.
func (a *alias) thinkLess() *Lever {
	var toks []float64
	for i := range a.ss {
		if a.ss[i].Reasoning > 0 && a.ss[i].Thinking > 0 {
			toks = append(toks, float64(a.ss[i].Reasoning))
		}
	}
	if len(toks) < minSamples {
		return nil
	}
	limit := int(math.Round(percentile(toks, 50)))
	if a.cfg.ThinkingBudget > 0 && a.cfg.ThinkingBudget <= limit {
		return nil
	}
	l := a.lever("think_less", fmt.Sprintf("Think less: cap thinking at %d tokens", limit), func(i int, o outcome) (outcome, bool) {
		s := &a.ss[i]
		cut := s.Reasoning - limit
		if cut <= 0 || s.Thinking <= 0 {
			return o, false
		}
		d := float64(cut) / float64(s.Reasoning) * ms(s.Thinking)
		if o.ttfw >= 0 {
			o.ttfw -= d
		}
		if o.ttc >= 0 {
			o.ttc -= d
		}
		o.cost -= float64(cut) * a.price(s).Output
		return o, true
	})
	l.Detail = fmt.Sprintf("%d answers thought (%d tokens at p50); a budget at the p50 cuts the %d that thought more, at each one's measured thinking rate. How a shorter thought changes the answer is not measured here.",
		len(toks), limit, l.Affected)
	a.set(l, map[string]any{"thinking": map[string]any{"max_budget_tokens": limit}})
	return l
}

// timeout sets the first-token timeout from the measured p99 TTFT: a
// timeout under it abandons answers that were coming (each such request
// paid the timeout and the next attempt); one far over it leaves a hung
// upstream waited for. The prediction for a tight one: the abandoned
// requests would have had the p99 TTFT instead of the timeout and the
// next attempt's first token.
func (a *alias) timeout() *Lever {
	var ttfts []float64
	for i := range a.ss {
		if s := &a.ss[i]; s.TTFT > 0 && s.FirstTokenTimeouts == 0 && !s.CacheHit {
			ttfts = append(ttfts, ms(s.TTFT))
		}
	}
	if len(ttfts) < minSamples || a.cfg.FirstTokenTimeout <= 0 {
		return nil
	}
	p99 := percentile(ttfts, 99)
	set := ms(a.cfg.FirstTokenTimeout)
	want := time.Duration(math.Ceil(p99*1.2/100)*100) * time.Millisecond
	switch {
	case set < p99:
		l := a.lever("first_token_timeout", fmt.Sprintf("Raise the first-token timeout to %s", want), func(i int, o outcome) (outcome, bool) {
			s := &a.ss[i]
			if s.FirstTokenTimeouts == 0 || s.TTFT <= 0 {
				return o, false
			}
			// It waited the timeout, then the next attempt's first token.
			d := ms(s.TTFT) - p99
			if d <= 0 {
				return o, false
			}
			if o.ttfw >= 0 {
				o.ttfw -= d
			}
			if o.ttc >= 0 {
				o.ttc -= d
			}
			return o, true
		})
		l.Detail = fmt.Sprintf("the first-token timeout (%s) is under the measured p99 TTFT (%.0f ms): %d requests abandoned an attempt that was likely coming and paid the timeout and a second first token. Set it from the measured p99 (the lesson's rule), or let adaptive_first_token follow it.",
			a.cfg.FirstTokenTimeout, p99, l.Affected)
		a.set(l, map[string]any{"first_token_timeout": want.String()})
		return l
	case set > 3*p99 && set-p99 > 1000:
		a.notes = append(a.notes, fmt.Sprintf("first-token timeout: %s is more than three times the measured p99 TTFT (%.0f ms): a hung upstream is waited for that long before the next deployment. It saves nothing in this traffic (no attempt hung); %s would bound the hang.",
			a.cfg.FirstTokenTimeout, p99, want))
	}
	return nil
}

// ranking names the levers by their saving, largest first, leaving out
// those that save under a millisecond.
func ranking(ls []Lever, by func(Saving) float64) []string {
	idx := make([]int, 0, len(ls))
	for i := range ls {
		if by(ls[i].Saving) >= 1 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(x, y int) int {
		a, b := by(ls[x].Saving), by(ls[y].Saving)
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = ls[j].Lever
	}
	return out
}

func ttfwOf(o outcome) float64 { return o.ttfw }
func ttcOf(o outcome) float64  { return o.ttc }

// pct is the p-th percentile of the outcomes' field (those measured).
func pct(os []outcome, field func(outcome) float64, p float64) float64 {
	vs := make([]float64, 0, len(os))
	for _, o := range os {
		if v := field(o); v >= 0 {
			vs = append(vs, v)
		}
	}
	return percentile(vs, p)
}

// percentile interpolates between the closest ranks (0 for none).
func percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	r := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(r))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(r-float64(lo))
}

func median(vs []float64) float64 { return percentile(vs, 50) }

func nonZero(vs []float64) []float64 {
	var out []float64
	for _, v := range vs {
		if v > 0 {
			out = append(out, v)
		}
	}
	return out
}

func meanCost(os []outcome) float64 {
	if len(os) == 0 {
		return 0
	}
	sum := 0.0
	for _, o := range os {
		sum += o.cost
	}
	return sum / float64(len(os))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round(v float64) float64 { return math.Round(v*1000) / 1000 }
