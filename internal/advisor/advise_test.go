package advisor

import (
	"math"
	"math/rand/v2"
	"slices"
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

// TestCacheRepeats: a repeat within the TTL is a predicted hit, one after
// it or of another content is not.
func TestCacheRepeats(t *testing.T) {
	t0 := time.Now()
	var ss []Sample
	for i := range 40 {
		k := uint64(i%10 + 1) // ten contents, each four times, 150 s apart
		ss = append(ss, Sample{Time: t0.Add(time.Duration(i) * 15 * time.Second), Alias: "a", Complete: true,
			TTFT: 600 * time.Millisecond, TTFW: 600 * time.Millisecond, Total: 3 * time.Second, RepeatKey: k, Cost: 0.001})
	}
	for _, tc := range []struct {
		ttl  time.Duration
		hits int
	}{{10 * time.Minute, 30}, {3 * time.Minute, 30}, {2 * time.Minute, 0}} {
		adv := find(t, Advise(map[string][]Sample{"a": ss}, Options{Aliases: map[string]Alias{"a": {CacheTTL: tc.ttl}}}), "a")
		l := lever(adv, "cache")
		switch {
		case tc.hits == 0 && l != nil:
			t.Errorf("ttl %s: %+v, want no cache lever (every repeat comes after the TTL)", tc.ttl, l)
		case tc.hits > 0 && (l == nil || l.Affected != tc.hits || l.Saving.CostShare != 0.75):
			t.Errorf("ttl %s: %+v, want %d hits saving 75%% of the cost", tc.ttl, l, tc.hits)
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
