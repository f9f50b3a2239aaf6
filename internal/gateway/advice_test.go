package gateway_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/firstword/firstword/internal/advisor"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// adviceProviders are the sim's tiers for TestLeverAdvice: the lesson's
// medium and small tiers with the clock sped up (first tokens eight times
// sooner, writing four times faster, answers of 40 to 120 tokens), each
// reading the prompt at a prefill rate before its first token (a cached
// prefix ten times faster); and a thinker that thinks about 2,000 tokens
// (a quarter of a second, with jitter) before it answers; and a tier
// whose first token varies (log-normal, sigma 0.3, 80 ms at the median)
// behind a first-token timeout of 100 ms, which cuts about a quarter of
// the requests over to a steady fallback (60 ms).
const adviceProviders = `
providers:
  sim:
    type: sim
    tiers:
      med: {ttft: 80ms, tokens_per_second: 300, jitter: 0, answer_tokens: 80, prefill_tokens_per_second: 4000, cached_prefix_speedup: 10}
      sm: {ttft: 40ms, tokens_per_second: 600, jitter: 0, answer_tokens: 80, prefill_tokens_per_second: 8000, cached_prefix_speedup: 10}
      thinker: {ttft: 40ms, tokens_per_second: 600, jitter: 0.3, answer_tokens: 80, thinking_time: 250ms, thinking_tokens_per_second: 8000}
      jit: {ttft: 80ms, tokens_per_second: 300, jitter: 0.3, answer_tokens: 80}
      steady: {ttft: 60ms, tokens_per_second: 300, jitter: 0, answer_tokens: 80}
prices:
  sim/med: {input: 1.0, output: 4.0}
  sim/sm: {input: 0.15, output: 0.6}
  sim/thinker: {input: 1.0, output: 4.0}
  sim/jit: {input: 1.0, output: 4.0}
  sim/steady: {input: 1.0, output: 4.0}
`

// adviceAlias is an alias with no levers: no cap, no rules, no cache, no
// coalescing.
func adviceAlias(tier string) map[string]any {
	return map[string]any{"deployments": []any{map[string]any{"provider": "sim", "model": tier}},
		"cache": map[string]any{"enabled": false}, "coalesce": false}
}

// adviceTraffic is the traffic's known shape, from a fixed seed: answers
// of 40 to 120 tokens (the sim's), prompts of 5 to 65 words under one
// stable system prompt of about 400 tokens, two in five of them (after the first 20)
// repeating an earlier one.
func adviceTraffic(n int) []string {
	rng := rand.New(rand.NewPCG(37, 1))
	var out []string
	for i := range n {
		if i > 20 && rng.IntN(5) < 2 {
			out = append(out, out[rng.IntN(len(out))])
			continue
		}
		words := make([]string, 5+rng.IntN(61))
		for j := range words {
			words[j] = fmt.Sprintf("w%d", rng.IntN(500))
		}
		out = append(out, fmt.Sprintf("Question %d: %s", i, strings.Join(words, " ")))
	}
	return out
}

// timing is what a client saw of one request: its first word and last
// byte, in ms from sending it.
type timing struct{ ttfw, ttc float64 }

// drive sends prompts to alias, workers at a time, streamed and
// deterministic, and returns what the client saw of each.
// adviceSystem is the traffic's stable prefix: about 400 tokens.
var adviceSystem = "You are the support assistant of a shop. Answer from the order data and the FAQ. " +
	strings.Repeat("Be brief, cite the order number, never promise a refund the policy does not allow, and hand over to a person when asked. ", 14)

func drive(t *testing.T, url, alias string, prompts []string, workers int) []timing {
	t.Helper()
	out := make([]timing, len(prompts))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				body, _ := json.Marshal(map[string]any{"model": alias, "stream": true, "temperature": 0, "messages": []any{
					map[string]any{"role": "system", "content": adviceSystem},
					map[string]any{"role": "user", "content": prompts[i]},
				}})
				start := time.Now()
				resp := gatewaytest.Post(t, url, string(body))
				evs := gatewaytest.ReadEvents(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || len(evs) == 0 || evs[len(evs)-1].Data != "[DONE]" {
					t.Errorf("request %d: %d, %d events", i, resp.StatusCode, len(evs))
					continue
				}
				tm := timing{ttfw: -1, ttc: float64(evs[len(evs)-1].At.Sub(start)) / 1e6}
				for _, e := range evs {
					if strings.Contains(e.Data, `"content":"`) && !strings.Contains(e.Data, `"content":""`) {
						tm.ttfw = float64(e.At.Sub(start)) / 1e6
						break
					}
				}
				out[i] = tm
			}
		})
	}
	for i := range prompts {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func p(ts []timing, field func(timing) float64, q float64) float64 {
	var vs []float64
	for _, t := range ts {
		if v := field(t); v >= 0 {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	if len(vs) == 0 {
		return 0
	}
	r := q / 100 * float64(len(vs)-1)
	lo := int(r)
	hi := min(lo+1, len(vs)-1)
	return vs[lo] + (vs[hi]-vs[lo])*(r-float64(lo))
}

// startAdvice runs the binary (built without the race detector, as it is
// served: the predictions are of its timings) with models.
func startAdvice(t *testing.T, models map[string]any) *process {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"models": models})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1))
	cfg := filepath.Join(dir, "firstword.yaml")
	text := fmt.Sprintf("listen: %s\nstore: {path: %s}\n", addr, filepath.Join(dir, "firstword.db")) + adviceProviders + string(b)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, cfg, addr)
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

// TestLeverAdvice is the advisor's proof: sim traffic of a known shape
// (fixed seed, 200 requests a pass) through an alias with no levers; the
// advice read from GET /v1/budget/advice; each advised lever turned on,
// the same traffic again (sent at the same time to the gateway without
// levers, as the baseline), and the saving the client measured within 25%
// of the predicted one, on the figure the lever saves most (each as a
// share of the figure it was taken from). The 25% is checked with
// FIRSTWORD_LEVER_ADVICE=1; without it, that each advised config saves
// time:
//
//	FIRSTWORD_LEVER_ADVICE=1 go test -run TestLeverAdvice -v ./internal/gateway/
func TestLeverAdvice(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: ten passes of 200 requests (make test and .ci/run run it)")
	}
	// How close a prediction comes is a measurement, which a busy
	// machine skews (a CI run once saw 18% predicted, 31% measured): it is
	// checked with FIRSTWORD_LEVER_ADVICE=1, on a quiet machine. Without
	// it, each advised config must still save time.
	accuracy := os.Getenv("FIRSTWORD_LEVER_ADVICE") != ""
	if !accuracy {
		t.Log("the predictions' accuracy is not checked: set FIRSTWORD_LEVER_ADVICE=1 on a quiet machine to check it")
	}
	traffic := adviceTraffic(200)
	tight := map[string]any{"deployments": []any{map[string]any{"provider": "sim", "model": "jit", "priority": 0}, map[string]any{"provider": "sim", "model": "steady", "priority": 1}},
		"first_token_timeout": "100ms", "cache": map[string]any{"enabled": false}, "coalesce": false}
	base := map[string]any{"chat": adviceAlias("med"), "fast": adviceAlias("sm"), "think": adviceAlias("thinker"), "tight": tight}
	gw, twin := startAdvice(t, base), startAdvice(t, base)
	// Measured under the load the levers' passes see: two gateways, each
	// sent the traffic.
	var wg sync.WaitGroup
	for _, alias := range []string{"chat", "think", "tight"} {
		wg.Go(func() { drive(t, gw.url, alias, traffic, 8) })
		wg.Go(func() { drive(t, twin.url, alias, traffic, 8) })
		wg.Wait()
	}
	// The small tier, measured under the same load.
	wg.Go(func() { drive(t, gw.url, "fast", traffic[:80], 8) })
	wg.Go(func() { drive(t, twin.url, "chat", traffic[:80], 8) })
	wg.Wait()
	twin.cmd.Process.Kill()
	resp, err := http.Get(gw.url + "/v1/budget/advice")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Data []advisor.Advice }
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/budget/advice: %d %v", resp.StatusCode, err)
	}
	advice := map[string]*advisor.Advice{}
	for i := range list.Data {
		advice[list.Data[i].Alias] = &list.Data[i]
	}
	for _, alias := range []string{"chat", "think", "tight"} {
		if adv := advice[alias]; adv == nil || adv.Requests != 200 {
			t.Fatalf("advice %+v: want %s's, from its 200 requests", list.Data, alias)
		}
		t.Logf("%s: measured %+v; by TTFW %v, by TTC %v", alias, advice[alias].Measured, advice[alias].ByTTFW, advice[alias].ByTTC)
	}
	type proof struct{ alias, tier, lever string }
	proved := []proof{{"chat", "med", "ask_for_less"}, {"chat", "med", "smaller_model"}, {"chat", "med", "cache"},
		{"chat", "med", "prefix_cache"}, {"think", "thinker", "think_less"}, {"tight", "", "first_token_timeout"}}
	levers := map[proof]*advisor.Lever{}
	for _, pr := range proved {
		adv := advice[pr.alias]
		for i := range adv.Levers {
			if adv.Levers[i].Lever == pr.lever {
				levers[pr] = &adv.Levers[i]
			}
		}
		if levers[pr] == nil {
			t.Fatalf("no %s lever for %s in %+v", pr.lever, pr.alias, adv.Levers)
		}
	}

	for _, pr := range proved {
		name, l := pr.lever, levers[pr]
		models := maps.Clone(base)
		alias := maps.Clone(tight)
		if pr.tier != "" {
			alias = adviceAlias(pr.tier)
		}
		for k, v := range l.Set {
			alias[k] = v
		}
		models[pr.alias] = alias
		// The lever's gateway and the one without levers get the same
		// traffic at the same time, so that both see the same machine.
		lgw := startAdvice(t, models)
		var before, after []timing
		var wg sync.WaitGroup
		wg.Go(func() { before = drive(t, gw.url, pr.alias, traffic, 8) })
		wg.Go(func() { after = drive(t, lgw.url, pr.alias, traffic, 8) })
		wg.Wait()
		lgw.cmd.Process.Kill()
		// The figure the lever saves most. Predicted and measured are
		// compared as shares of the figure they were taken from (the
		// gateway's measured one, the paired baseline's), so that the
		// machine's load, which stretches every time alike, does not count
		// as an error of the prediction.
		m := advice[pr.alias].Measured
		figures := []struct {
			name            string
			predicted, base float64
			field           func(timing) float64
			q               float64
		}{
			{"first word p50", l.Saving.TTFWP50, m.TTFWP50, func(x timing) float64 { return x.ttfw }, 50},
			{"first word p95", l.Saving.TTFWP95, m.TTFWP95, func(x timing) float64 { return x.ttfw }, 95},
			{"complete p50", l.Saving.TTCP50, m.TTCP50, func(x timing) float64 { return x.ttc }, 50},
			{"complete p95", l.Saving.TTCP95, m.TTCP95, func(x timing) float64 { return x.ttc }, 95},
		}
		best := figures[0]
		for _, f := range figures[1:] {
			if f.predicted > best.predicted {
				best = f
			}
		}
		b, a := p(before, best.field, best.q), p(after, best.field, best.q)
		predicted, measured := best.predicted/best.base, (b-a)/b
		t.Logf("%s (%s): %s predicted %.0f ms of %.0f (%.1f%%), measured %.0f ms of %.0f (%.1f%%: %.0f -> %.0f)", name, strings.ReplaceAll(l.Config, "\n", " "),
			best.name, best.predicted, best.base, 100*predicted, b-a, b, 100*measured, b, a)
		switch {
		case measured <= 0:
			t.Errorf("%s: the advised config saved nothing (%s %.0f -> %.0f ms)", name, best.name, b, a)
		case accuracy && math.Abs(measured-predicted) > 0.25*predicted:
			t.Errorf("%s: %s saving measured %.1f%%, predicted %.1f%%: off by %.0f%% (at most 25%%)", name, best.name, 100*measured, 100*predicted,
				100*math.Abs(measured-predicted)/predicted)
		}
	}
}
