package advisor

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// simPrices are the sim tiers' prices per token (metering.SimPrices, per
// million tokens there).
var simPrices = map[string]Price{
	"sim/small":  {Input: 0.15e-6, Output: 0.60e-6},
	"sim/medium": {Input: 1.00e-6, CachedInput: 0.10e-6, Output: 4.00e-6},
}

func price(dep string) (Price, bool) { p, ok := simPrices[dep]; return p, ok }

// lesson makes the lesson's example: the medium tier (first token about
// 600 ms, 80 tokens/s) writing answers of about 300 tokens (150 to 450)
// after three lookups of 30, 120 and 60 ms in sequence; and the small tier
// (300 ms, 150 tokens/s), measured through its own alias.
func lesson(n int, seed uint64) map[string][]Sample {
	rng := rand.New(rand.NewPCG(seed, 1))
	jitter := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) * math.Exp(0.2*rng.NormFloat64()))
	}
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	out := map[string][]Sample{}
	for i := range n {
		steps := []Step{{"orders", 1 * time.Millisecond, 31 * time.Millisecond}, {"profile", 31 * time.Millisecond, 151 * time.Millisecond}, {"faq", 151 * time.Millisecond, 211 * time.Millisecond}}
		answer := 150 + rng.IntN(301)
		input := 20 + rng.IntN(200)
		call := 212 * time.Millisecond
		ttft := call + jitter(600*time.Millisecond)
		gen := time.Duration(float64(answer-1) / 80 * float64(time.Second))
		cost := float64(input)*simPrices["sim/medium"].Input + float64(answer)*simPrices["sim/medium"].Output
		out["chat"] = append(out["chat"], Sample{Time: t0.Add(time.Duration(i) * time.Second), Tenant: "local", Alias: "chat", Deployment: "sim/medium",
			Complete: true, TTFT: ttft, TTFW: ttft, Gen: gen, Total: ttft + gen, CallStart: call, Input: input, Output: answer, Cost: cost, Steps: steps})
	}
	for i := range 40 {
		answer := 150 + rng.IntN(301)
		call := time.Millisecond
		ttft := call + jitter(300*time.Millisecond)
		gen := time.Duration(float64(answer-1) / 150 * float64(time.Second))
		out["fast"] = append(out["fast"], Sample{Time: t0.Add(time.Duration(i) * time.Second), Tenant: "local", Alias: "fast", Deployment: "sim/small",
			Complete: true, TTFT: ttft, TTFW: ttft, Gen: gen, Total: ttft + gen, CallStart: call, Input: 50, Output: answer,
			Cost: 50*simPrices["sim/small"].Input + float64(answer)*simPrices["sim/small"].Output})
	}
	return out
}

func find(t *testing.T, adv []Advice, alias string) Advice {
	t.Helper()
	for _, a := range adv {
		if a.Alias == alias {
			return a
		}
	}
	t.Fatalf("no advice for %s in %+v", alias, adv)
	return Advice{}
}

func lever(a Advice, name string) *Lever {
	for i := range a.Levers {
		if a.Levers[i].Lever == name {
			return &a.Levers[i]
		}
	}
	return nil
}

// TestLessonRanking: on the lesson's example the time-to-complete ranking
// puts asking for less and the smaller model first, the parallel lookups
// (about 90 ms) far below; the time-to-first-word ranking puts the
// smaller model and the parallel lookups first, and leaves asking for
// less out (it does not move the first word).
func TestLessonRanking(t *testing.T) {
	adv := find(t, Advise(lesson(300, 7), Options{Aliases: map[string]Alias{"chat": {FirstTokenTimeout: 5 * time.Second}}, Price: price}), "chat")
	t.Logf("measured %+v", adv.Measured)
	for _, l := range adv.Levers {
		t.Logf("%-20s %+v affected %d", l.Lever, l.Saving, l.Affected)
	}
	t.Logf("by TTC %v, by TTFW %v, notes %v", adv.ByTTC, adv.ByTTFW, adv.Notes)
	if len(adv.ByTTC) < 3 || !slices.Contains(adv.ByTTC[:2], "ask_for_less") || !slices.Contains(adv.ByTTC[:2], "smaller_model") {
		t.Errorf("by TTC %v: want ask_for_less and smaller_model first", adv.ByTTC)
	}
	par := lever(adv, "parallel_steps")
	if par == nil || math.Abs(par.Saving.TTCP95-90) > 1 || math.Abs(par.Saving.TTFWP50-90) > 1 {
		t.Fatalf("parallel steps %+v: want 90 ms saved (the span 210 ms less the slowest 120 ms)", par)
	}
	for _, first := range adv.ByTTC[:2] {
		if l := lever(adv, first); l.Saving.TTCP95 < 3*par.Saving.TTCP95 {
			t.Errorf("%s saves %.0f ms at p95 TTC: want it far above the parallel lookups' %.0f ms", first, l.Saving.TTCP95, par.Saving.TTCP95)
		}
	}
	if slices.Contains(adv.ByTTFW, "ask_for_less") || len(adv.ByTTFW) < 2 || !slices.Contains(adv.ByTTFW[:2], "smaller_model") || !slices.Contains(adv.ByTTFW[:2], "parallel_steps") {
		t.Errorf("by TTFW %v: want smaller_model and parallel_steps first, ask_for_less not at all", adv.ByTTFW)
	}
	if l := lever(adv, "ask_for_less"); l.Saving.TTFWP95 != 0 || l.Saving.Cost <= 0 || l.Affected < 100 || l.Affected > 200 {
		t.Errorf("ask for less %+v: want no first-word saving, a cost saving, about half the answers cut", l)
	}
	if l := lever(adv, "smaller_model"); l.Saving.Cost <= 0 || l.Config == "" {
		t.Errorf("smaller model %+v: want a cost saving and a rule", l)
	}
}

// TestAskForLessArithmetic checks the cap's prediction on answers whose
// outcome is known: 40 answers of 100 tokens and 40 of 300, at 100
// tokens/s; a cap at the p50 (200 tokens) ends the long ones 1 s early.
func TestAskForLessArithmetic(t *testing.T) {
	t0 := time.Now()
	var ss []Sample
	for i := range 80 {
		n := 100
		if i%2 == 1 {
			n = 300
		}
		gen := time.Duration(float64(n-1) / 100 * float64(time.Second))
		ss = append(ss, Sample{Time: t0.Add(time.Duration(i) * time.Millisecond), Alias: "a", Deployment: "sim/medium", Complete: true,
			TTFT: 500 * time.Millisecond, TTFW: 500 * time.Millisecond, Gen: gen, Total: 500*time.Millisecond + gen, Output: n,
			Cost: float64(n) * simPrices["sim/medium"].Output})
	}
	adv := find(t, Advise(map[string][]Sample{"a": ss}, Options{Price: price}), "a")
	l := lever(adv, "ask_for_less")
	if l == nil {
		t.Fatalf("no ask_for_less in %+v", adv)
	}
	// p95 TTC: 3.49 s before, the capped answers' 2.49 s after.
	if math.Abs(l.Saving.TTCP95-1000) > 1 || l.Affected != 40 || l.Saving.TTFWP95 != 0 {
		t.Errorf("ask for less %+v: want 1000 ms saved at p95 TTC, 40 answers cut", l)
	}
	want := 0.5 * 100 * simPrices["sim/medium"].Output // half the answers, 100 tokens each
	if math.Abs(l.Saving.Cost-want) > want*1e-9 {
		t.Errorf("cost saving %g per request, want %g", l.Saving.Cost, want)
	}
}

// TestCacheRepeats: a repeat within the TTL of a completed answer is a
// predicted hit, one after it or of another content is not; a repeat that
// arrives while the first is still being written is not (that is
// coalescing's), and one that never completed keeps no completion time.
func TestCacheRepeats(t *testing.T) {
	t0 := time.Now()
	var ss []Sample
	for i := range 40 {
		k := uint64(i%10 + 1) // ten contents, each four times, 150 s apart
		ss = append(ss, Sample{Time: t0.Add(time.Duration(i) * 15 * time.Second), Alias: "a", Complete: true,
			TTFT: 600 * time.Millisecond, TTFW: 600 * time.Millisecond, Total: 3 * time.Second, RepeatKey: k, Cost: 0.001})
	}
	// A hit does not write the entry again: with a 3-minute TTL the
	// third of each content misses (its first answer expired) and the
	// fourth hits its answer.
	for _, tc := range []struct {
		ttl  time.Duration
		hits int
	}{{10 * time.Minute, 30}, {3 * time.Minute, 20}, {2 * time.Minute, 0}} {
		adv := find(t, Advise(map[string][]Sample{"a": ss}, Options{Aliases: map[string]Alias{"a": {CacheTTL: tc.ttl}}}), "a")
		l := lever(adv, "cache")
		switch {
		case tc.hits == 0 && l != nil:
			t.Errorf("ttl %s: %+v, want no cache lever (every repeat comes after the TTL)", tc.ttl, l)
		case tc.hits > 0 && (l == nil || l.Affected != tc.hits || l.Saving.CostShare != float64(tc.hits)/40):
			t.Errorf("ttl %s: %+v, want %d hits saving %d%% of the cost", tc.ttl, l, tc.hits, 100*tc.hits/40)
		}
	}
}

// TestTooFewSamples: no advice below minSamples requests.
func TestTooFewSamples(t *testing.T) {
	ss := lesson(minSamples-1, 1)
	if adv := Advise(map[string][]Sample{"chat": ss["chat"]}, Options{}); len(adv) != 0 {
		t.Errorf("advice from %d requests: %+v", minSamples-1, adv)
	}
}

// TestRecorderWindow: the recorder keeps the last keep samples of the
// window, per tenant and alias.
func TestRecorderWindow(t *testing.T) {
	r := NewRecorder(time.Minute, 3)
	t0 := time.Now()
	for i := range 5 {
		r.Add(Sample{Time: t0.Add(time.Duration(i) * 10 * time.Second), Tenant: "acme", Alias: "chat", Output: i})
	}
	r.Add(Sample{Time: t0, Tenant: "globex", Alias: "chat", Output: 9})
	got := r.Samples(t0.Add(70*time.Second), "acme")["chat"]
	var outs []int
	for _, s := range got {
		outs = append(outs, s.Output)
	}
	if !slices.Equal(outs, []int{2, 3, 4}) {
		t.Errorf("acme's samples %v, want the last three (2 3 4)", outs)
	}
	if n := len(r.Samples(t0.Add(70*time.Second), "")["chat"]); n != 3 {
		t.Errorf("every tenant's samples in the window: %d, want 3 (globex's is too old)", n)
	}
}

// TestFewerCalls: a pre-call step marked as a model call saves what it
// added to the wait: all of it when it ran first and alone, its excess
// over the slowest other step when it ran beside them, nothing when it
// was the faster of two in parallel.
func TestFewerCalls(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		name  string
		steps []Step
		want  float64
	}{
		{"first, then a lookup", []Step{{"classify", 0, 200 * time.Millisecond}, {"orders", 200 * time.Millisecond, 250 * time.Millisecond}}, 200},
		{"beside a faster lookup", []Step{{"classify", 0, 200 * time.Millisecond}, {"orders", 0, 50 * time.Millisecond}}, 150},
		{"beside a slower lookup", []Step{{"classify", 0, 200 * time.Millisecond}, {"orders", 0, 300 * time.Millisecond}}, 0},
	} {
		var ss []Sample
		for i := range 30 {
			ss = append(ss, Sample{Time: t0.Add(time.Duration(i) * time.Second), Alias: "a", Complete: true, TTFT: time.Second, TTFW: time.Second,
				Total: 2 * time.Second, Steps: tc.steps})
		}
		adv := find(t, Advise(map[string][]Sample{"a": ss}, Options{ModelCalls: map[string]bool{"classify": true}}), "a")
		l := lever(adv, "fewer_calls")
		switch {
		case tc.want == 0 && l != nil:
			t.Errorf("%s: %+v, want no lever", tc.name, l)
		case tc.want > 0 && (l == nil || math.Abs(l.Saving.TTFWP95-tc.want) > 0.01 || math.Abs(l.Saving.TTCP50-tc.want) > 0.01 || l.Affected != 30):
			t.Errorf("%s: %+v, want %.0f ms saved on every request", tc.name, l, tc.want)
		}
	}
}

// TestCacheRepeatsInFlight: a repeat that arrived before the first answer
// completed is no hit, and predicted hits of requests that failed do not
// add completion times.
func TestCacheRepeatsInFlight(t *testing.T) {
	t0 := time.Now()
	var ss []Sample
	for i := range 30 {
		// Each content twice, the second 1 s after the first, which takes 3 s.
		ss = append(ss, Sample{Time: t0.Add(time.Duration(i/2*10+i%2) * time.Second), Alias: "a", Complete: true,
			TTFT: 600 * time.Millisecond, TTFW: 600 * time.Millisecond, Total: 3 * time.Second, RepeatKey: uint64(i/2 + 1), Cost: 0.001})
	}
	if l := lever(find(t, Advise(map[string][]Sample{"a": ss}, Options{}), "a"), "cache"); l != nil {
		t.Errorf("repeats in flight: %+v, want no cache lever", l)
	}
	// Now each repeat comes 5 s after, and failed.
	for i := 1; i < len(ss); i += 2 {
		ss[i].Time = ss[i].Time.Add(4 * time.Second)
		ss[i].Complete, ss[i].Total = false, 0
	}
	l := lever(find(t, Advise(map[string][]Sample{"a": ss}, Options{}), "a"), "cache")
	if l == nil || l.Affected != 15 || l.Saving.TTCP50 != 0 || l.Saving.TTFWP50 <= 0 {
		t.Errorf("failed repeats: %+v, want 15 hits that save the first word and no completion time", l)
	}
}

// TestRecorderForgets: an alias with no sample left in the window is
// forgotten at the next sweep.
func TestRecorderForgets(t *testing.T) {
	r := NewRecorder(time.Minute, 10)
	t0 := time.Now()
	r.Add(Sample{Time: t0, Tenant: "old", Alias: "chat"})
	for i := range sweepEvery {
		r.Add(Sample{Time: t0.Add(2 * time.Minute), Tenant: "new", Alias: "chat", Output: i})
	}
	r.mu.Lock()
	_, old := r.per[key{"old", "chat"}]
	n := len(r.per)
	r.mu.Unlock()
	if old || n != 1 {
		t.Errorf("after a sweep: old tenant kept %v, %d keys; want it forgotten, 1 key", old, n)
	}
}

// TestTimeoutLever: a first-token timeout that cut more than 1% of the
// requests is advised up to the model's measured p99 (from its call), the
// cut requests predicted at that p99; pre-call time alone does not make a
// timeout look tight; an adaptive timeout is left alone.
func TestTimeoutLever(t *testing.T) {
	t0 := time.Now()
	mk := func(pre time.Duration, cut bool) []Sample {
		var ss []Sample
		for i := range 100 {
			model := time.Duration(300+i*4) * time.Millisecond // 300 to 696 ms
			s := Sample{Time: t0.Add(time.Duration(i) * time.Second), Alias: "a", Complete: true, CallStart: pre,
				TTFT: pre + model, TTFW: pre + model, Total: pre + model + time.Second}
			if cut && i%10 == 9 { // every tenth was abandoned at 600 ms, then answered 350 ms into a second attempt
				s.FirstTokenTimeouts = 1
				s.TTFT = pre + 950*time.Millisecond
				s.TTFW, s.Total = s.TTFT, s.TTFT+time.Second
			}
			ss = append(ss, s)
		}
		return ss
	}
	opt := func(adaptive bool) Options {
		return Options{Aliases: map[string]Alias{"a": {FirstTokenTimeout: 600 * time.Millisecond, Adaptive: adaptive}}}
	}
	l := lever(find(t, Advise(map[string][]Sample{"a": mk(0, true)}, opt(false)), "a"), "first_token_timeout")
	if l == nil || l.Affected != 10 || l.Saving.TTFWP95 <= 0 || l.Set["first_token_timeout"] == nil {
		t.Fatalf("a timeout that cut 10%%: %+v, want the lever on the 10 cut requests", l)
	}
	if d, _ := time.ParseDuration(l.Set["first_token_timeout"].(string)); d < 600*time.Millisecond {
		t.Errorf("advised %v, want at least the p99 of the model's first token", d)
	}
	if l := lever(find(t, Advise(map[string][]Sample{"a": mk(200*time.Millisecond, false)}, opt(false)), "a"), "first_token_timeout"); l != nil {
		t.Errorf("no timeout fired, 200 ms of pre-call steps: %+v, want no lever", l)
	}
	if l := lever(find(t, Advise(map[string][]Sample{"a": mk(0, true)}, opt(true)), "a"), "first_token_timeout"); l != nil {
		t.Errorf("adaptive timeout: %+v, want no lever", l)
	}
}

// TestThinkLessLever: a thinking cap is advised only at or above 1,024
// tokens (the least a provider takes), with an effort so that requests
// that ask none are capped too.
func TestThinkLessLever(t *testing.T) {
	t0 := time.Now()
	mk := func(base, step int) map[string][]Sample {
		var ss []Sample
		for i := range 40 {
			r := base + step*i
			think := time.Duration(r) * time.Millisecond // 1,000 thinking tokens a second
			ss = append(ss, Sample{Time: t0.Add(time.Duration(i) * time.Second), Alias: "a", Complete: true, Thinking: think,
				TTFT: think + 100*time.Millisecond, TTFW: think + 100*time.Millisecond, Total: think + time.Second, Output: r + 50, Reasoning: r})
		}
		return map[string][]Sample{"a": ss}
	}
	if l := lever(find(t, Advise(mk(100, 10), Options{}), "a"), "think_less"); l != nil {
		t.Errorf("thinking of 100 to 490 tokens: %+v; want no lever (no cap under 1,024 exists)", l)
	}
	l := lever(find(t, Advise(mk(2000, 100), Options{}), "a"), "think_less")
	if l == nil {
		t.Fatal("thinking of 2,000 to 5,900 tokens: no lever")
	}
	th := l.Set["thinking"].(map[string]any)
	if th["max_budget_tokens"].(int) < 1024 || th["effort"] != "medium" || l.Saving.TTFWP95 <= 0 {
		t.Errorf("think less %+v: want a budget of at least 1,024, an effort, and a first-word saving", l)
	}
}

// TestFitBelow: a log-normal fitted to the part of a sample under a cut
// (the share cut known, its values not) finds the whole distribution: its
// p99, and the mean of the values past the cut, within a few percent.
func TestFitBelow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const mu, sigma, cut = 4.38, 0.3, 100.0 // a median of 80 ms
	var all, below []float64
	for range 20000 {
		v := math.Exp(mu + sigma*rng.NormFloat64())
		all = append(all, v)
		if v <= cut {
			below = append(below, v)
		}
	}
	share := float64(len(below)) / float64(len(all))
	fit, ok := fitBelow(percentile(below, 50), percentile(below, 90), share)
	if !ok {
		t.Fatal("no fit")
	}
	var sum float64
	var n int
	for _, v := range all {
		if v > cut && v < 200 {
			sum += v
			n++
		}
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p99", fit.quantile(0.99), percentile(all, 99)},
		{"mean past the cut", fit.meanBetween(cut, 200), sum / float64(n)},
		{"sigma", fit.sigma, sigma},
	} {
		if math.Abs(c.got-c.want) > 0.05*c.want {
			t.Errorf("%s: fitted %.3f, sample %.3f", c.name, c.got, c.want)
		}
	}
	if _, ok := fitBelow(80, 80, 0.9); ok {
		t.Error("a fit of samples all alike")
	}
}

// TestTimeoutLeverMostCut: a timeout that cut 95% of the attempts leaves
// too few to fit: the advice stays within 20 times the p99 seen (it once
// said hours) and says the saving is a floor.
func TestTimeoutLeverMostCut(t *testing.T) {
	t0 := time.Now()
	var ss []Sample
	for i := range 400 {
		model := time.Duration(20+i/20*4) * time.Millisecond // 20 to 96 ms among those not cut
		s := Sample{Time: t0.Add(time.Duration(i) * time.Second), Alias: "a", Complete: true, TTFT: model, TTFW: model, Total: model + time.Second}
		if i%20 != 0 {
			s.FirstTokenTimeouts = 1
			s.TTFT = 100*time.Millisecond + model
			s.TTFW, s.Total = s.TTFT, s.TTFT+time.Second
		}
		ss = append(ss, s)
	}
	l := lever(find(t, Advise(map[string][]Sample{"a": ss}, Options{Aliases: map[string]Alias{"a": {FirstTokenTimeout: 100 * time.Millisecond}}}), "a"), "first_token_timeout")
	if l == nil {
		t.Fatal("no lever for a timeout that cut 95%")
	}
	d, err := time.ParseDuration(l.Set["first_token_timeout"].(string))
	if err != nil || d <= 100*time.Millisecond || d > 20*time.Second {
		t.Errorf("advised %v (%v), want above the 100 ms and bounded", l.Set["first_token_timeout"], err)
	}
	if !strings.Contains(l.Detail, "the saving is a floor") {
		t.Errorf("detail %q, want it to say the fit is not used", l.Detail)
	}
}
