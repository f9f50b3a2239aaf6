package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/bench"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

const leversConfig = `
heartbeat: 30s
providers:
  sim: {type: sim}
  tiny: {type: sim}
models:
  chat:
    max_tokens: 30
    default_max_tokens: 12
    deployments: [{provider: sim, model: medium}]
    rules:
      - {name: short-questions, max_input_tokens: 24, use: fast}
      - {name: translation, keywords: [translate, translation], use: fast}
      - {name: hinted, hint: fast, use: fast}
  fast:
    deployments: [{provider: tiny, model: small}]
`

// completion posts a chat completion and returns the text, the finish
// reason, the response and its body.
func completion(t *testing.T, url, body string, hdr ...string) (string, string, *http.Response) {
	t.Helper()
	resp := gatewaytest.Post(t, url, body, hdr...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(body, `"stream":true`) {
		var text, finish string
		for _, ev := range gatewaytest.ReadEvents(strings.NewReader(string(b))) {
			var c struct {
				Choices []struct {
					Delta        struct{ Content string } `json:"delta"`
					FinishReason *string                  `json:"finish_reason"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(ev.Data), &c) == nil && len(c.Choices) > 0 {
				text += c.Choices[0].Delta.Content
				if c.Choices[0].FinishReason != nil {
					finish = *c.Choices[0].FinishReason
				}
			}
		}
		return text, finish, resp
	}
	var c struct {
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
	}
	json.Unmarshal(b, &c)
	if len(c.Choices) == 0 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return c.Choices[0].Message.Content, c.Choices[0].FinishReason, resp
}

func deterministic(msg string, stream bool) string {
	return fmt.Sprintf(`{"model":"chat","stream":%v,"temperature":0,"messages":[{"role":"user","content":%q}]}`, stream, msg)
}

// TestResponseCache: a second identical deterministic request is served
// from the cache, with no upstream call and the same text; cache hits are
// marked; Cache-Control: no-cache bypasses; non-deterministic requests are
// not cached.
func TestResponseCache(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, leversConfig))
	sim := gw.Sim("sim")
	msg := "Tell me about latency budgets in detail please, with examples. [sim ttft=30ms gap=2ms tokens=20]"
	first, _, r1 := completion(t, gw.URL, deterministic(msg, true))
	if sim.Stats().Completed != 1 || r1.Header.Get("X-Firstword-Cache") != "" {
		t.Fatalf("first request: sim %+v, cache header %q", sim.Stats(), r1.Header.Get("X-Firstword-Cache"))
	}
	start := time.Now()
	second, finish, r2 := completion(t, gw.URL, deterministic(msg, true))
	took := time.Since(start)
	if second != first || finish != "length" || r2.Header.Get("X-Firstword-Cache") != "hit" {
		t.Errorf("cache hit: text equal %v, finish %q, header %q", second == first, finish, r2.Header.Get("X-Firstword-Cache"))
	}
	if st := sim.Stats(); st.Started != 1 {
		t.Errorf("the cache hit called the upstream: %+v", st)
	}
	t.Logf("cache hit answered in %v", took)
	rec := waitRecord(t, gw, r2.Header.Get("X-Request-Id"))
	if !rec.Cached || rec.Cost != 0 || rec.Usage.InputTokens != 0 || rec.Usage.OutputTokens != 0 {
		t.Errorf("a cache hit must cost nothing upstream: %+v", rec)
	}
	// The non-streaming form shares the entry.
	if text, _, r := completion(t, gw.URL, deterministic(msg, false)); text != first || r.Header.Get("X-Firstword-Cache") != "hit" {
		t.Errorf("non-streaming hit: equal %v, header %q", text == first, r.Header.Get("X-Firstword-Cache"))
	}
	// no-cache bypasses the cache.
	completion(t, gw.URL, deterministic(msg, true), "Cache-Control", "no-cache")
	if st := sim.Stats(); st.Started != 2 {
		t.Errorf("Cache-Control: no-cache was served from the cache: %+v", st)
	}
	// A sampled request (no temperature 0) is not cached...
	sampled := `{"model":"chat","stream":true,"messages":[{"role":"user","content":"a sampled question, long enough to skip the rules [sim ttft=5ms gap=1ms tokens=5]"}]}`
	completion(t, gw.URL, sampled)
	completion(t, gw.URL, sampled)
	if st := sim.Stats(); st.Started != 4 {
		t.Errorf("a non-deterministic request was cached: %+v", st)
	}
	// ...unless the client opts in.
	completion(t, gw.URL, sampled, "X-Firstword-Cache", "on")
	completion(t, gw.URL, sampled, "X-Firstword-Cache", "on")
	if st := sim.Stats(); st.Started != 5 {
		t.Errorf("X-Firstword-Cache: on did not cache: %+v", st)
	}
}

// TestCacheNeverStoresPartialAnswers: errored, timed-out and cancelled
// answers are not cached.
func TestCacheNeverStoresPartialAnswers(t *testing.T) {
	for _, tc := range []struct{ name, msg string }{
		{"error mid-stream", "why not? tell me more please, at length [sim ttft=5ms gap=1ms tokens=20 fault=error_mid after=5]"},
		{"truncated", "why not? tell me more please, at length [sim ttft=5ms gap=1ms tokens=20 fault=truncate after=5]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := gatewaytest.Start(t, gatewaytest.MustParse(t, leversConfig))
			completion(t, gw.URL, deterministic(tc.msg, true))
			completion(t, gw.URL, deterministic(tc.msg, true))
			if st := gw.Sim("sim").Stats(); st.Started != 2 {
				t.Errorf("a failed answer was cached: %+v", st)
			}
		})
	}
	t.Run("client left", func(t *testing.T) {
		gw := gatewaytest.Start(t, gatewaytest.MustParse(t, leversConfig))
		body := deterministic("stall for me please, a long question here [sim ttft=5ms gap=1ms tokens=20 fault=stall_mid after=3]", true)
		c := dialRaw(t, gw.URL, body)
		c.readHeaders(t)
		c.readUntil(t, "data: ", 4)
		c.conn.Close()
		deadline := time.Now().Add(2 * time.Second)
		for gw.Sim("sim").Stats().Cancelled == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		completion(t, gw.URL, strings.Replace(body, "stall_mid", "error_mid", 1))
		if st := gw.Sim("sim").Stats(); st.Started != 2 {
			t.Errorf("a cancelled answer was cached: %+v", st)
		}
	})
}

// TestCoalescing: identical requests in flight share one upstream stream;
// every client gets the whole stream; one leaving does not cancel the
// others, the last leaving does.
func TestCoalescing(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, leversConfig))
	body := deterministic("What is the p95 of a latency budget, in words? [sim ttft=200ms gap=5ms tokens=25]", true)
	const n = 8
	var wg sync.WaitGroup
	texts := make([]string, n)
	coalesced := 0
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, finish, resp := completion(t, gw.URL, body)
			if finish != "length" {
				t.Errorf("client %d: finish %q", i, finish)
			}
			mu.Lock()
			texts[i] = text
			if resp.Header.Get("X-Firstword-Coalesced") == "1" {
				coalesced++
			}
			mu.Unlock()
		}()
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	if st := gw.Sim("sim").Stats(); st.Started != 1 {
		t.Errorf("%d identical concurrent requests made %d upstream calls, want 1", n, st.Started)
	}
	for i := range texts {
		if texts[i] == "" || texts[i] != texts[0] {
			t.Fatalf("client %d got %q, client 0 %q", i, texts[i], texts[0])
		}
	}
	if coalesced != n-1 {
		t.Errorf("%d responses marked coalesced, want %d", coalesced, n-1)
	}
	// Billed once: the shares add up to one request's usage.
	total := 0
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		total = 0
		for _, r := range gw.Meter().Recent() {
			total += r.Usage.OutputTokens
		}
		if total >= 12 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if total != 12 {
		t.Errorf("output tokens billed across the %d clients: %d, want one answer's 12", n, total)
	}
	if got := gatewaytest.MetricLine(t, gw, `firstword_events_total{alias="chat",event="coalesced"}`); !strings.HasSuffix(got, fmt.Sprintf(" %d", n-1)) {
		t.Errorf("coalesced events: %q, want %d", got, n-1)
	}
}

func TestCoalescedClientsLeaving(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, leversConfig))
	body := deterministic("Explain coalescing at some length, please. [sim ttft=50ms gap=20ms tokens=30]", true)
	a := dialRaw(t, gw.URL, body)
	a.readHeaders(t)
	b := dialRaw(t, gw.URL, body)
	b.readHeaders(t)
	a.readUntil(t, "data: ", 3)
	b.readUntil(t, "data: ", 3)
	a.conn.Close() // one leaves
	time.Sleep(100 * time.Millisecond)
	if st := gw.Sim("sim").Stats(); st.Cancelled != 0 {
		t.Fatalf("one subscriber leaving cancelled the upstream: %+v", st)
	}
	b.readUntil(t, "data: ", 6) // the other still receives
	b.conn.Close()              // the last leaves
	deadline := time.Now().Add(time.Second)
	for gw.Sim("sim").Stats().Cancelled == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := gw.Sim("sim").Stats(); st.Cancelled != 1 || st.Started != 1 {
		t.Errorf("after the last subscriber left: %+v, want the upstream cancelled", st)
	}
}

// TestAnswerCapsAndRules: the cap and default apply; the routing rules
// pick the documented tier.
func TestAnswerCapsAndRules(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, leversConfig))
	long := "Please explain in detail how the latency budget of a chat request is split across stages [sim ttft=5ms gap=1ms]"
	body := func(msg string, maxTokens int) string {
		mt := ""
		if maxTokens > 0 {
			mt = fmt.Sprintf(`,"max_tokens":%d`, maxTokens)
		}
		return fmt.Sprintf(`{"model":"chat","stream":true%s,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":%q}]}`, mt, msg)
	}
	usage := func(resp *http.Response) (int, string) {
		rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id"))
		return rec.Usage.OutputTokens, rec.Deployment
	}
	for _, tc := range []struct {
		name      string
		maxTokens int
		want      int
	}{{"default when unset", 0, 12}, {"the client asks for less", 5, 5}, {"never more than the cap", 1000, 30}} {
		_, finish, resp := completion(t, gw.URL, body(long, tc.maxTokens))
		if got, dep := usage(resp); got != tc.want || finish != "length" || dep != "sim/medium" {
			t.Errorf("%s: %d tokens (%s) on %s, want %d", tc.name, got, finish, dep, tc.want)
		}
	}
	for _, tc := range []struct {
		name, msg, hint, want, rule string
	}{
		{"short question", "hi there [sim ttft=5ms gap=1ms tokens=3]", "", "tiny/small", "short-questions"},
		{"keyword", "Could you translate this long sentence into French for me please [sim ttft=5ms gap=1ms tokens=3]", "", "tiny/small", "translation"},
		{"hint", long, "fast", "tiny/small", "hinted"},
		{"no rule", long, "", "sim/medium", ""},
	} {
		hdr := []string{}
		if tc.hint != "" {
			hdr = []string{"X-Firstword-Hint", tc.hint}
		}
		_, _, resp := completion(t, gw.URL, body(tc.msg, 0), hdr...)
		if _, dep := usage(resp); dep != tc.want || !strings.HasPrefix(resp.Header.Get("X-Firstword-Rule"), tc.rule) || (tc.rule == "") != (resp.Header.Get("X-Firstword-Rule") == "") {
			t.Errorf("%s: served by %s, rule header %q; want %s, rule %q", tc.name, dep, resp.Header.Get("X-Firstword-Rule"), tc.want, tc.rule)
		}
		if rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id")); rec.Rule != tc.rule || rec.Alias != "chat" || (tc.rule != "" && rec.RoutedTo != "fast") {
			t.Errorf("%s: metered rule %q from %q to %q", tc.name, rec.Rule, rec.Alias, rec.RoutedTo)
		}
	}
	// The decisions are counted, by rule.
	for _, rule := range []string{"short-questions", "translation", "hinted"} {
		if got := gatewaytest.MetricLine(t, gw, `firstword_routing_rule_total{alias="chat",rule="`+rule+`",to="fast"}`); !strings.HasSuffix(got, " 1") {
			t.Errorf("rule %s counted as %q, want 1", rule, got)
		}
	}
}

// TestBrevityInstruction: the alias's brevity instruction reaches the
// upstream in the system prompt.
func TestBrevityInstruction(t *testing.T) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("ok")+gatewaytest.FinishJSON)
	})
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+"    brevity: Answer in one sentence.\n", up.URL)
	completion(t, gw.URL, `{"model":"chat","messages":[{"role":"system","content":"You help."},{"role":"user","content":"hi"}]}`)
	reqs := up.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0], `"content":"You help.\n\nAnswer in one sentence."`) {
		t.Errorf("upstream request %v lacks the brevity instruction", reqs)
	}
}

// TestRedisCacheAcrossReplicas: two gateways sharing Redis share answers.
func TestRedisCacheAcrossReplicas(t *testing.T) {
	url := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if url == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL not set: skipping the Redis-backed cache test")
	}
	t.Setenv("FW_REDIS", url)
	cfg := leversConfig + "cache: {driver: redis, url_env: FW_REDIS}\n"
	a, b := gatewaytest.Start(t, gatewaytest.MustParseEnv(t, cfg)), gatewaytest.Start(t, gatewaytest.MustParseEnv(t, cfg))
	msg := fmt.Sprintf("A question for two replicas, unique %d. [sim ttft=5ms gap=1ms tokens=10]", time.Now().UnixNano())
	first, _, _ := completion(t, a.URL, deterministic(msg, true))
	// The answer is written to Redis after its ending, off the client's
	// path: wait for it before asking the other replica.
	if err := a.Levers().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	second, _, resp := completion(t, b.URL, deterministic(msg, true))
	if second != first || resp.Header.Get("X-Firstword-Cache") != "hit" {
		t.Errorf("replica b: equal %v, cache header %q", second == first, resp.Header.Get("X-Firstword-Cache"))
	}
	if st := b.Sim("sim").Stats(); st.Started != 0 {
		t.Errorf("replica b called its upstream: %+v", st)
	}
}

// TestLeverTable runs the lever table against fast sim tiers and checks
// what it must show whatever the machine: a cache hit costs nothing and
// is the fastest first word, a coalesced duplicate costs a share of one
// answer, the cap shortens the answer, and the small tier costs less.
func TestLeverTable(t *testing.T) {
	cfg := strings.Replace(bench.LeverConfig, "sim: {type: sim, seed: 7}", `sim:
    type: sim
    seed: 7
    tiers:
      medium: {ttft: 60ms, tokens_per_second: 3000}
      small: {ttft: 30ms, tokens_per_second: 6000}`, 1)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
	cost := func(id string) float64 {
		for range 200 {
			if rec, ok := gw.Meter().Find(id); ok {
				return rec.Cost
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Errorf("request %s was not metered", id)
		return 0
	}
	ls, err := bench.RunLevers(context.Background(), gw.URL, bench.LeverOptions{Requests: 4, Concurrency: 2, Cost: cost})
	if err != nil {
		t.Fatal(err)
	}
	row := map[string]bench.Lever{}
	for _, l := range ls {
		row[l.Name] = l
	}
	stream, hit, dup := row["stream the answer"], row["cache hit"], row["coalesced duplicate"]
	if len(ls) != 9 || stream.Cost50 == 0 {
		t.Fatalf("%d rows, stream %+v", len(ls), stream)
	}
	if hit.Cost95 != 0 || hit.FirstWord95 >= stream.FirstWord50 {
		t.Errorf("cache hit %+v, stream %+v", hit, stream)
	}
	if r := dup.Cost50 / stream.Cost50; r < 0.45 || r > 0.55 {
		t.Errorf("a duplicate of two costs %.2f of an answer", r)
	}
	if capped := row["ask for a shorter answer"]; capped.Cost50 >= stream.Cost50/2 {
		t.Errorf("capped answer costs %v, uncapped %v", capped.Cost50, stream.Cost50)
	}
	if small := row["smaller model"]; small.Cost50 >= stream.Cost50 {
		t.Errorf("small tier costs %v, medium %v", small.Cost50, stream.Cost50)
	}
	if cached, fresh := row["prefix cache"], row["long prompt, not cached"]; cached.Cost50 >= fresh.Cost50 {
		t.Errorf("a cached prefix costs %v, the same prompt uncached %v", cached.Cost50, fresh.Cost50)
	}
	table := bench.LeverTable(ls, "test")
	for _, want := range []string{"| cache hit |", "| prefix cache |", "p99"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// TestDeterministicTimeout: a cacheable request (temperature 0) takes the
// coalescing path, and its deadline still ends it as documented: streamed,
// the text so far, then an error event (code timeout), no finish and no
// [DONE]; not streamed, a 504.
func TestDeterministicTimeout(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, leversConfig))
	for _, stream := range []bool{true, false} {
		body := fmt.Sprintf(`{"model":"chat","stream":%v,"temperature":0,"max_tokens":30,"messages":[{"role":"user","content":"Please explain at some length why the sky is blue and sunsets are red (%v) [sim ttft=10ms gap=100ms tokens=30]"}]}`, stream, stream)
		resp := gatewaytest.Post(t, gw.URL, body, "X-Request-Timeout", "0.5")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out := string(b)
		if !stream {
			if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(out, `"code":"timeout"`) {
				t.Errorf("not streamed: %d %s; want 504, code timeout", resp.StatusCode, out)
			}
			continue
		}
		if resp.StatusCode != 200 || !strings.Contains(out, `"content":"`) || !strings.HasSuffix(out, `"code":"timeout"}}`+"\n\n") ||
			strings.Contains(out, `"finish_reason":"`) || strings.Contains(out, "[DONE]") {
			t.Errorf("streamed: %d\n%s\nwant the text so far, then the timeout error event", resp.StatusCode, out)
		}
	}
	// A cut answer is not cached: the same request again calls the upstream.
	before := gw.Sim("sim").Stats().Started
	completion(t, gw.URL, `{"model":"chat","stream":true,"temperature":0,"max_tokens":30,"messages":[{"role":"user","content":"Please explain at some length why the sky is blue and sunsets are red (true) [sim ttft=10ms gap=100ms tokens=30]"}]}`, "X-Request-Timeout", "0.3")
	if got := gw.Sim("sim").Stats().Started; got != before+1 {
		t.Errorf("a cut answer was served from the cache (upstream calls %d → %d)", before, got)
	}
}
