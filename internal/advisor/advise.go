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
	// FirstTokenTimeout is each attempt's first-token timeout; Adaptive:
	// it follows the measured p99 (adaptive_first_token).
	FirstTokenTimeout time.Duration
	Adaptive          bool
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

// own reports whether a sample's tokens and times are its own answer's:
// complete, not a cache hit, not a share of another's stream.
func own(s *Sample) bool { return s.Complete && !s.CacheHit && !s.Coalesced }

// answerTokens is what a request's answer wrote, thinking left out.
func answerTokens(s *Sample) int { return max(s.Output-s.Reasoning, 0) }

// writing is how long s took to write n of its answer tokens, in ms: at
// its own rate, or the alias's median one when its own is not measured.
func (a *alias) writing(s *Sample, n int) float64 {
	if t := answerTokens(s); t >= 2 && s.Gen > 0 {
		return float64(n) * ms(s.Gen) / float64(t-1)
	}
	return float64(n) / a.rate * 1000
}

// writingRate is the median rate, in answer tokens per second, of the
// samples that wrote at least two tokens over a measured time.
func writingRate(ss []Sample) float64 {
	var rates []float64
	for i := range ss {
		s := &ss[i]
		if n := answerTokens(s); n >= 2 && s.Gen > 0 && own(s) {
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
		if own(&a.ss[i]) {
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
		if cut <= 0 || !own(s) {
			return o, false
		}
		o.ttc = max(o.ttc-a.writing(s, cut), 0)
		o.cost = max(o.cost-float64(cut)*a.price(s).Output, 0)
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
		if mine > 0 && p > 0 && p < bestPrice || mine == 0 && p == 0 && r > bestRate {
			best, bestPrice, bestRate = n, p, r
		}
	}
	if best == "" {
		a.notes = append(a.notes, "smaller model: no cheaper alias has measured traffic in the window: send some requests to the smaller tier to measure it")
		return nil
	}
	small := all[best]
	var ttfts, inputs []float64
	var sp Price // the small alias's mean price, by its own samples
	for i := range small {
		if own(&small[i]) && small[i].TTFT > 0 && small[i].FirstTokenTimeouts == 0 {
			ttfts = append(ttfts, ms(small[i].TTFT-small[i].CallStart))
		}
		p := a.price(&small[i])
		sp.Input += p.Input / float64(len(small))
		sp.Output += p.Output / float64(len(small))
	}
	for i := range a.ss {
		if own(&a.ss[i]) {
			inputs = append(inputs, float64(a.ss[i].Input))
		}
	}
	ttft, rate := median(ttfts), writingRate(small)
	short := int(math.Round(percentile(inputs, 50)))
	if ttft <= 0 || rate <= 0 || short < 1 {
		return nil
	}
	l := a.lever("smaller_model", fmt.Sprintf("Smaller model: send prompts of at most %d tokens to %s", short, best), func(i int, o outcome) (outcome, bool) {
		s := &a.ss[i]
		if s.Input > short || !own(s) || s.TTFT <= 0 {
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
	// A hit is served after the request's pre-call steps: the measured
	// hit time, or 1 ms after the call would have started.
	hit := median(hits)
	hitAt := func(s *Sample) float64 {
		if hit > 0 {
			return hit
		}
		return ms(s.CallStart) + 1
	}
	// A repeat is a hit if the earlier request had completed (its answer
	// saved) when it arrived, within the TTL.
	done := map[uint64]time.Time{}
	repeats := make([]bool, len(a.ss))
	for i := range a.ss {
		s := &a.ss[i]
		if s.RepeatKey == 0 {
			continue
		}
		if t, ok := done[s.RepeatKey]; ok && !t.After(s.Time) && s.Time.Sub(t) <= ttl && !s.CacheHit && !s.Coalesced {
			repeats[i] = true
		}
		if s.Complete {
			end := s.Time.Add(s.Total)
			if t, ok := done[s.RepeatKey]; !ok || end.Before(t) || t.Add(ttl).Before(s.Time) {
				done[s.RepeatKey] = end
			}
		}
	}
	l := a.lever("cache", "Cache repeated requests", func(i int, o outcome) (outcome, bool) {
		if !repeats[i] {
			return o, false
		}
		h := hitAt(&a.ss[i])
		if o.ttfw >= 0 {
			o.ttfw = min(o.ttfw, h)
		}
		if o.ttc >= 0 {
			o.ttc = min(o.ttc, h)
		}
		o.cost = 0
		return o, true
	})
	if l.Affected == 0 {
		return nil
	}
	took := "1 ms after the request's pre-call steps (no hit was measured)"
	if hit > 0 {
		took = fmt.Sprintf("%.1f ms (measured)", hit)
	}
	l.Detail = fmt.Sprintf("%d of %d requests repeat one that had completed within the cache's TTL (%s) when they arrived, and were not served from the cache; a hit takes %s. A request that is not deterministic is served from the cache only with nondeterministic: true.",
		l.Affected, len(a.ss), ttl, took)
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
		toks := float64(min(s.PrefixTokens, s.Input) - s.Cached)
		if toks <= 0 {
			return o, false
		}
		cut := slope * toks
		if o.ttfw >= 0 {
			o.ttfw = max(o.ttfw-cut, 0)
		}
		if o.ttc >= 0 {
			o.ttc = max(o.ttc-cut, 0)
		}
		p := a.price(s)
		o.cost = max(o.cost-toks*(p.Input-p.CachedInput), 0)
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
		if s.TTFT <= 0 || !own(s) || s.FirstTokenTimeouts > 0 {
			continue
		}
		x, y := float64(s.Input-s.Cached), ms(s.TTFT-s.CallStart)
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
		if own(&a.ss[i]) && a.ss[i].Reasoning > 0 && a.ss[i].Thinking > 0 {
			toks = append(toks, float64(a.ss[i].Reasoning))
		}
	}
	if len(toks) < minSamples {
		return nil
	}
	// A budget under 1,024 tokens is refused by the providers (and the
	// config): the cap is the p50, at least that.
	p50 := int(math.Round(percentile(toks, 50)))
	limit := max(p50, 1024)
	if a.cfg.ThinkingBudget > 0 && a.cfg.ThinkingBudget <= limit || percentile(toks, 95) <= float64(limit) {
		return nil
	}
	l := a.lever("think_less", fmt.Sprintf("Think less: cap thinking at %d tokens", limit), func(i int, o outcome) (outcome, bool) {
		s := &a.ss[i]
		cut := s.Reasoning - limit
		if cut <= 0 || s.Thinking <= 0 || !own(s) {
			return o, false
		}
		d := float64(cut) / float64(s.Reasoning) * ms(s.Thinking)
		if o.ttfw >= 0 {
			o.ttfw = max(o.ttfw-d, 0)
		}
		if o.ttc >= 0 {
			o.ttc = max(o.ttc-d, 0)
		}
		o.cost = max(o.cost-float64(cut)*a.price(s).Output, 0)
		return o, true
	})
	l.Detail = fmt.Sprintf("%d answers thought (%d tokens at p50); a budget of %d tokens (the p50, and at least the 1,024 providers take) cuts the %d that thought more, at each one's measured thinking rate. The effort makes the cap apply to requests that ask for none. How a shorter thought changes the answer is not measured here.",
		len(toks), p50, limit, l.Affected)
	// The cap applies to requests that ask no budget only with an effort
	// to cap: medium, unless the alias sets one.
	a.set(l, map[string]any{"thinking": map[string]any{"effort": "medium", "max_budget_tokens": limit}})
	return l
}

// timeout sets the first-token timeout from the model's measured first
// token (from its call). A timeout that abandoned more than 1% of the
// requests' first attempts is tight: each such request waited the timeout
// and then the next attempt's first token. What the abandoned attempt
// would have taken is never seen, only that it passed the timeout: the
// model's first token is taken to be log-normal (as latencies are), fitted
// to the median and the 90th percentile of the attempts not cut, placed
// below the share that was cut; the advised timeout is 1.2 times that
// fit's p99 (at least the current one), and the cut requests are
// predicted at the fit's values between the old timeout and the new,
// spread over them. One over three times the p99 is noted: a hung
// upstream is waited for that long. An adaptive timeout follows the p99
// already.
func (a *alias) timeout() *Lever {
	if a.cfg.Adaptive || a.cfg.FirstTokenTimeout <= 0 {
		return nil
	}
	var ttfts []float64
	cut := 0
	for i := range a.ss {
		s := &a.ss[i]
		switch {
		case s.CacheHit || s.Coalesced || s.TTFT <= 0:
		case s.FirstTokenTimeouts > 0:
			cut++
		default:
			ttfts = append(ttfts, ms(s.TTFT-s.CallStart))
		}
	}
	if len(ttfts) < minSamples {
		return nil
	}
	p99 := percentile(ttfts, 99)
	set := ms(a.cfg.FirstTokenTimeout)
	if float64(cut) > 0.01*float64(len(a.ss)) {
		q := float64(cut) / float64(cut+len(ttfts))
		fit, ok := fitBelow(percentile(ttfts, 50), percentile(ttfts, 90), 1-q)
		// A fit of a few attempts below a timeout that cut most can put
		// the p99 anywhere: past 20 times the p99 seen, it is not used.
		if f99 := fit.quantile(0.99); ok && f99 <= 20*p99 {
			p99 = max(p99, f99)
		} else {
			ok = false
		}
		want := time.Duration(math.Ceil(max(p99, set)*1.2/100)*100) * time.Millisecond
		// The cut attempts' own first tokens: spread over the fit between
		// the old timeout and the new, the k-th of n cut requests at its
		// (k+½)/n quantile there, so that the percentiles come out as the
		// fit's (all at the old timeout without a fit).
		var cutIdx []int
		for i := range a.ss {
			if s := &a.ss[i]; s.FirstTokenTimeouts > 0 && s.TTFT > 0 && !s.CacheHit && !s.Coalesced {
				cutIdx = append(cutIdx, i)
			}
		}
		firsts := make(map[int]float64, len(cutIdx))
		for k, i := range cutIdx {
			firsts[i] = set
			if ok {
				firsts[i] = fit.quantileBetween(set, ms(want), (float64(k)+0.5)/float64(len(cutIdx)))
			}
		}
		first := set
		if ok {
			first = fit.meanBetween(set, ms(want))
		}
		l := a.lever("first_token_timeout", fmt.Sprintf("Raise the first-token timeout to %s", want), func(i int, o outcome) (outcome, bool) {
			s := &a.ss[i]
			f, cut := firsts[i]
			if !cut {
				return o, false
			}
			// It waited the timeout(s), then the next attempt's first token.
			d := ms(s.TTFT-s.CallStart) - f
			if d <= 0 {
				return o, false
			}
			if o.ttfw >= 0 {
				o.ttfw = max(o.ttfw-d, 0)
			}
			if o.ttc >= 0 {
				o.ttc = max(o.ttc-d, 0)
			}
			return o, true
		})
		if l.Affected == 0 {
			return nil
		}
		how := fmt.Sprintf("The model's first token, fitted as log-normal to the attempts not cut and the share cut, is %.0f ms at p99; an abandoned attempt is predicted to have answered at %.0f ms on average.", p99, first)
		if !ok {
			how = fmt.Sprintf("The attempts not cut are %.0f ms at p99, too few or too alike to tell what the cut ones would have taken: they are predicted at the timeout, and the saving is a floor. Raise it, then re-measure.", p99)
		}
		l.Detail = fmt.Sprintf("the first-token timeout (%s) abandoned the first attempt of %d of %d requests, which then waited for a second first token. %s Set the timeout from the measured p99 (the lesson's rule), or let adaptive_first_token follow it.",
			a.cfg.FirstTokenTimeout, cut, len(a.ss), how)
		a.set(l, map[string]any{"first_token_timeout": want.String()})
		return l
	}
	if set > 3*p99 && set-p99 > 1000 {
		a.notes = append(a.notes, fmt.Sprintf("first-token timeout: %s is more than three times the model's measured p99 first token (%.0f ms): a hung upstream is waited for that long before the next deployment. It saves nothing in this traffic (no attempt hung); %s would bound the hang.",
			a.cfg.FirstTokenTimeout, p99, time.Duration(math.Ceil(p99*1.2/100)*100)*time.Millisecond))
	}
	return nil
}

// logNormal is a fitted log-normal distribution of a time in ms.
type logNormal struct{ mu, sigma float64 }

// fitBelow fits a log-normal to the median m and 90th percentile p90 of
// the samples that are the lowest share of the whole (the rest were cut,
// unseen).
func fitBelow(m, p90, share float64) (logNormal, bool) {
	if m <= 0 || p90 <= m || share <= 0 || share > 1 {
		return logNormal{}, false
	}
	z1, z2 := normalQuantile(0.5*share), normalQuantile(0.9*share)
	sigma := (math.Log(p90) - math.Log(m)) / (z2 - z1)
	if sigma <= 0 || math.IsNaN(sigma) || math.IsInf(sigma, 0) {
		return logNormal{}, false
	}
	return logNormal{mu: math.Log(m) - sigma*z1, sigma: sigma}, true
}

func (f logNormal) quantile(p float64) float64 {
	return math.Exp(f.mu + f.sigma*normalQuantile(p))
}

// meanBetween is the mean of the values between lo and hi.
func (f logNormal) meanBetween(lo, hi float64) float64 {
	za, zb := (math.Log(lo)-f.mu)/f.sigma, (math.Log(hi)-f.mu)/f.sigma
	p := normalCDF(zb) - normalCDF(za)
	if p < 1e-9 {
		return lo
	}
	return math.Exp(f.mu+f.sigma*f.sigma/2) * (normalCDF(f.sigma-za) - normalCDF(f.sigma-zb)) / p
}

// quantileBetween is the value at share u (0 to 1) of the way through
// the distribution between lo and hi.
func (f logNormal) quantileBetween(lo, hi, u float64) float64 {
	pa, pb := normalCDF((math.Log(lo)-f.mu)/f.sigma), normalCDF((math.Log(hi)-f.mu)/f.sigma)
	if pb-pa < 1e-9 {
		return lo
	}
	return math.Exp(f.mu + f.sigma*normalQuantile(pa+u*(pb-pa)))
}

func normalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

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
