package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/store"
)

// keyWithID stores a key of tenant and returns it with its ID.
func keyWithID(t *testing.T, st store.Store, tenant string, admin bool) (key, id string) {
	t.Helper()
	if err := auth.EnsureTenant(context.Background(), st, tenant, tenant); err != nil {
		t.Fatal(err)
	}
	key, prefix, hash := auth.NewKey()
	id = store.NewID("key_")
	k := &store.APIKey{ID: id, TenantID: tenant, UserID: id, Prefix: prefix, Hash: hash, CreatedAt: time.Now().UTC(), Admin: admin}
	if err := st.CreateAPIKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return key, id
}

func userMsg(s string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(s)}
}

// TestKeyRateLimitOpenAISDK: a key limited (through the admin API) to 3
// requests per period gets 3, each with OpenAI's x-ratelimit headers,
// then a 429 rate_limit_exceeded with Retry-After; the SDK's own retry
// waits as told and gets through once the window has passed.
func TestKeyRateLimitOpenAISDK(t *testing.T) {
	gw := gatewaytest.StartYAML(t, `
auth: {cache_ttl: 50ms}
limits: {period: 2s}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`, "")
	admin, _ := keyWithID(t, gw.Store(), "ops", true)
	key, id := keyWithID(t, gw.Store(), "acme", false)
	time.Sleep(100 * time.Millisecond) // past auth.cache_ttl: keys are required now

	if code, body := send(t, "PUT", gw.URL+"/admin/v1/keys/"+id+"/limits", key, `{"requests_per_minute": 3}`); code != http.StatusForbidden {
		t.Fatalf("a user key setting limits: %d %s, want 403", code, body)
	}
	code, body := send(t, "PUT", gw.URL+"/admin/v1/keys/"+id+"/limits", admin, `{"requests_per_minute": 3}`)
	if code != http.StatusOK || !strings.Contains(body, `"requests_per_minute":3`) {
		t.Fatalf("PUT limits: %d %s", code, body)
	}

	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "chat", Messages: userMsg("hi [sim ttft=1ms tokens=3]")}
	for i := range 3 {
		var resp *http.Response
		if _, err := client.Chat.Completions.New(ctx, params, option.WithResponseInto(&resp)); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		h := resp.Header
		if h.Get("X-Ratelimit-Limit-Requests") != "3" || h.Get("X-Ratelimit-Remaining-Requests") != strconv.Itoa(2-i) || h.Get("X-Ratelimit-Reset-Requests") == "" {
			t.Errorf("request %d: x-ratelimit-*-requests = %q %q %q, want 3 %d and a reset", i+1,
				h.Get("X-Ratelimit-Limit-Requests"), h.Get("X-Ratelimit-Remaining-Requests"), h.Get("X-Ratelimit-Reset-Requests"), 2-i)
		}
	}
	_, err := client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("the 4th request: %v, want 429 rate_limit_exceeded", err)
	}
	h := apiErr.Response.Header
	ra, _ := strconv.Atoi(h.Get("Retry-After"))
	if ra < 1 || ra > 2 || h.Get("X-Ratelimit-Remaining-Requests") != "0" || h.Get("X-Ratelimit-Limit-Requests") != "3" {
		t.Errorf("429 headers: Retry-After %q, remaining %q, limit %q", h.Get("Retry-After"), h.Get("X-Ratelimit-Remaining-Requests"), h.Get("X-Ratelimit-Limit-Requests"))
	}

	// The SDK retries a 429 after Retry-After: its request goes through
	// on a later attempt.
	var attempts atomic.Int32
	retrying := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(3),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			attempts.Add(1)
			return next(r)
		}))
	start := time.Now()
	c, err := retrying.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("with retries: %v", err)
	}
	if c.Choices[0].Message.Content == "" || attempts.Load() < 2 {
		t.Errorf("with retries: %d attempts, answer %q; want a refusal first, then the answer", attempts.Load(), c.Choices[0].Message.Content)
	}
	t.Logf("the SDK got through after %d attempts in %v", attempts.Load(), time.Since(start).Round(time.Millisecond))
}

// TestBudgetRefusedBeforeUpstream: a tenant whose token budget is spent
// gets 429 insufficient_quota, and the upstream never sees the request;
// the admin API's spend is the sum of the usage rows.
func TestBudgetRefusedBeforeUpstream(t *testing.T) {
	var calls atomic.Int32
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("hello there"))
		gatewaytest.SSEWrite(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":60,"total_tokens":100}}`+"\n\n")
		gatewaytest.SSEWrite(w, "data: [DONE]\n\n")
	})
	gw := gatewaytest.StartYAML(t, `
auth: {cache_ttl: 50ms}
providers:
  up: {type: openai, base_url: "{{UP}}"}
models:
  chat: {deployments: [{provider: up, model: m}]}
prices:
  up/m: {input: 1000, output: 2000}
tenants:
  acme: {budget: {tokens_per_day: 150}}
`, up.URL)
	key, keyID := keyWithID(t, gw.Store(), "acme", false)
	admin, _ := keyWithID(t, gw.Store(), "ops", true)
	time.Sleep(100 * time.Millisecond)

	body := `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`
	for i := range 2 { // 100 tokens, then 200: past the 150
		if code, b := send(t, "POST", gw.URL+"/v1/chat/completions", key, body); code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, code, b)
		}
		waitRows(t, gw.Store(), i+1)
	}
	code, b := send(t, "POST", gw.URL+"/v1/chat/completions", key, body)
	var oe struct {
		Error struct{ Type, Code string } `json:"error"`
	}
	if code != http.StatusTooManyRequests || json.Unmarshal([]byte(b), &oe) != nil || oe.Error.Type != "insufficient_quota" || oe.Error.Code != "insufficient_quota" {
		t.Fatalf("past the budget: %d %s, want 429 with type and code insufficient_quota", code, b)
	}
	code, b = send(t, "POST", gw.URL+"/v1/messages", key, `{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	var ae struct {
		Type  string
		Error struct{ Type string } `json:"error"`
	}
	if code != http.StatusTooManyRequests || json.Unmarshal([]byte(b), &ae) != nil || ae.Type != "error" || ae.Error.Type != "rate_limit_error" {
		t.Errorf("Anthropic's surface past the budget: %d %s, want 429 rate_limit_error", code, b)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the upstream saw %d requests, want 2: the refused ones must not reach it", n)
	}

	rows, err := gw.Store().UsageReport(context.Background(), store.UsageFilter{TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var tokens int64
	var cost float64
	for _, r := range rows {
		if r.KeyID != keyID {
			t.Errorf("usage row of key %q, want %q", r.KeyID, keyID)
		}
		tokens += r.InputTokens + r.OutputTokens
		cost += r.Cost + r.AttemptsCost
	}
	if tokens != 200 {
		t.Errorf("usage rows hold %d tokens, want 200", tokens)
	}
	_, view := gatewaytest.GetJSON(t, gw.URL+"/admin/v1/tenants/acme", admin)
	spend, _ := view["spend"].(map[string]any)
	if spend["tokens_day"] != float64(tokens) || fmt.Sprint(spend["usd_day"]) != fmt.Sprint(cost) || cost == 0 {
		t.Errorf("admin spend %v, want the rows' %d tokens and %v USD", spend, tokens, cost)
	}
	if st, _ := view["budget_state"].(map[string]any); st["tokens_per_day"] != "exhausted" {
		t.Errorf("budget_state = %v, want tokens_per_day exhausted", view["budget_state"])
	}
	_, usage := gatewaytest.GetJSON(t, gw.URL+"/admin/v1/usage?tenant=acme&from="+time.Now().UTC().Format("2006-01-02"), admin)
	data, _ := usage["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["requests"] != 2.0 {
		t.Errorf("/admin/v1/usage = %v, want one row of 2 requests", usage)
	}
}

// waitRows waits until the store holds n usage rows.
func waitRows(t *testing.T, st store.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		rows, _ := st.UsageReport(context.Background(), store.UsageFilter{})
		var got int64
		for _, r := range rows {
			got += r.Requests
		}
		if got >= int64(n) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the store never held %d usage rows", n)
}

// TestConcurrentStreamsCap: with concurrent_streams 2, two open streams
// take both slots; a third request is refused at once; when one ends,
// the next gets through.
func TestConcurrentStreamsCap(t *testing.T) {
	release := make(chan struct{})
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("first"))
		select {
		case <-release:
		case <-r.Context().Done():
		}
		gatewaytest.SSEWrite(w, "data: [DONE]\n\n")
	})
	gw := gatewaytest.StartYAML(t, `
providers:
  up: {type: openai, base_url: "{{UP}}"}
models:
  chat: {deployments: [{provider: up, model: m}]}
tenants:
  local: {limits: {concurrent_streams: 2}}
`, up.URL)
	body := `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	open := func() *http.Response {
		req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a, b := open(), open()
	for _, r := range []*http.Response{a, b} {
		if r.StatusCode != http.StatusOK {
			t.Fatalf("an open stream: %d", r.StatusCode)
		}
		buf := make([]byte, 64)
		if _, err := r.Body.Read(buf); err != nil { // the first chunk: it is open
			t.Fatal(err)
		}
	}
	third := open()
	tb, _ := io.ReadAll(third.Body)
	third.Body.Close()
	if third.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(tb), "rate_limit_exceeded") {
		t.Fatalf("a third stream: %d %s, want 429", third.StatusCode, tb)
	}
	close(release)
	io.Copy(io.Discard, a.Body)
	a.Body.Close()
	io.Copy(io.Discard, b.Body)
	b.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := open()
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the streams ended: still %d", r.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ownRedis starts a redis-server of the test's own on a free port and
// returns its URL and a function that kills it.
func ownRedis(t *testing.T) (url string, kill func()) {
	t.Helper()
	url, _, kill = ownRedisProcess(t)
	return url, kill
}

// ownRedisProcess is ownRedis, with the server's process (to freeze it).
func ownRedisProcess(t *testing.T) (url string, cmd *exec.Cmd, kill func()) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed: skipping the test that stops a Redis")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill = func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGCONT) // a frozen one too
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(kill)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not listen")
		}
	}
	return "redis://" + addr + "/0", cmd, kill
}

// TestFrozenRedisKeepsOneLimitPerReplica (issue 34): two replicas share
// limits on a Redis of the test's own, which freezes (SIGSTOP) after
// admissions began. Each replica then counts alone, starting from what
// Redis granted it in the window: it admits no more than one limit by
// itself (requests), and no more open streams than one limit (before,
// each took a fresh full burst at the switch).
func TestFrozenRedisKeepsOneLimitPerReplica(t *testing.T) {
	url, redis, _ := ownRedisProcess(t)
	cfg := `
limits: {driver: redis, url: "` + url + `", period: 1m, timeout: 500ms, cooldown: 1m}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
tenants:
  local: {limits: {requests_per_minute: 30, concurrent_streams: 3}}
`
	a, b := gatewaytest.StartYAML(t, cfg, ""), gatewaytest.StartYAML(t, cfg, "")
	short := `{"model":"chat","messages":[{"role":"user","content":"hi [sim ttft=1ms tokens=2]"}]}`
	admitted := map[*gatewaytest.Gateway]int{}
	post := func(gw *gatewaytest.Gateway) int {
		code, body := send(t, "POST", gw.URL+"/v1/chat/completions", "", short)
		switch code {
		case http.StatusOK:
			admitted[gw]++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("%d %s", code, body)
		}
		return code
	}
	// Through Redis: 10 on each replica, 20 of the 30 between them.
	for range 10 {
		post(a)
		post(b)
	}
	if admitted[a] != 10 || admitted[b] != 10 {
		t.Fatalf("through Redis: %d and %d admitted, want 10 each", admitted[a], admitted[b])
	}
	// A opens 2 long streams through Redis: 2 of its 3.
	long := `{"model":"chat","stream":true,"messages":[{"role":"user","content":"go on [sim ttft=1ms gap=100ms tokens=300]"}]}`
	for range 2 {
		resp := gatewaytest.Post(t, a.URL, long)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a long stream through Redis: %d", resp.StatusCode)
		}
		defer resp.Body.Close()
		admitted[a]++
	}

	if err := redis.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer redis.Process.Signal(syscall.SIGCONT)
	// A's 2 streams are still open: one more, not three.
	opened := 0
	for range 3 {
		resp := gatewaytest.Post(t, a.URL, long)
		if resp.StatusCode == http.StatusOK {
			opened++
			admitted[a]++
		}
		defer resp.Body.Close()
	}
	if opened != 1 {
		t.Errorf("with Redis frozen and 2 streams open: %d more opened, want 1 (3 concurrent streams)", opened)
	}
	// Counting alone: each replica may admit only what is left of its
	// own limit, 30 less what Redis granted it.
	for range 40 {
		post(a)
		post(b)
	}
	// (A's 3 open streams hold all its concurrent slots meanwhile.)
	if admitted[a] > 30 || admitted[b] != 30 {
		t.Errorf("with Redis frozen: %d and %d admitted in the minute, want at most 30 on A and 30 on B (one limit per replica, no more)", admitted[a], admitted[b])
	}
	t.Logf("admitted in the minute: replica A %d, replica B %d (limit 30 each while Redis is frozen); %d of 3 more streams opened beside 2 open", admitted[a], admitted[b], opened)
}

// TestReplicasShareOneLimit: two replicas on one Redis admit 4 requests
// per period between them, not 4 each; with Redis killed, both go on
// serving under their own counts, from what Redis granted each, without
// stalling.
func TestReplicasShareOneLimit(t *testing.T) {
	url, kill := ownRedis(t)
	cfg := `
limits: {driver: redis, url: "` + url + `", period: 1m, timeout: 500ms, cooldown: 1m}
metrics: {enabled: true}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
tenants:
  local: {limits: {requests_per_minute: 4}}
`
	a, b := gatewaytest.StartYAML(t, cfg, ""), gatewaytest.StartYAML(t, cfg, "")
	body := `{"model":"chat","messages":[{"role":"user","content":"hi [sim ttft=1ms tokens=2]"}]}`
	ok, refused := 0, 0
	for i := range 10 {
		gw := a
		if i%2 == 1 {
			gw = b
		}
		code, _ := send(t, "POST", gw.URL+"/v1/chat/completions", "", body)
		switch code {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("request %d: %d", i, code)
		}
	}
	if ok != 4 || refused != 6 {
		t.Errorf("two replicas on one Redis admitted %d and refused %d of 10, want 4 and 6", ok, refused)
	}

	kill()
	// Each replica now counts alone, from the 2 Redis granted it: 2 more
	// each, then 429, without stalling.
	for i := range 6 {
		gw := a
		if i%2 == 1 {
			gw = b
		}
		start := time.Now()
		code, body := send(t, "POST", gw.URL+"/v1/chat/completions", "", body)
		want := http.StatusOK
		if i >= 4 {
			want = http.StatusTooManyRequests
		}
		if code != want {
			t.Fatalf("with Redis gone, request %d: %d %s, want %d under the replica's own count", i, code, body, want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("with Redis gone, request %d took %v", i, d)
		}
	}
	if line := gatewaytest.MetricLine(t, a, "firstword_admission_degraded_total"); line == "" || strings.HasSuffix(line, " 0") {
		t.Errorf("degraded metric: %q, want a count", line)
	}
}

// TestAdminLimitsBadInput: the admin API's limits routes answer bad input
// with a 4xx JSON error naming the problem, and change nothing.
func TestAdminLimitsBadInput(t *testing.T) {
	gw := gatewaytest.StartYAML(t, `
auth: {cache_ttl: 50ms}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`, "")
	admin, _ := keyWithID(t, gw.Store(), "ops", true)
	time.Sleep(100 * time.Millisecond)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"negative", "PUT", "/admin/v1/tenants/acme", `{"requests_per_minute": -1}`, 400, "must not be negative"},
		{"unknown field", "PUT", "/admin/v1/tenants/acme", `{"requests_per_hour": 1}`, 400, "requests_per_hour"},
		{"not JSON", "PUT", "/admin/v1/tenants/acme", `{`, 400, "request body"},
		{"trailing JSON", "PUT", "/admin/v1/tenants/acme", `{"requests_per_minute": 1} {}`, 400, "unexpected data after the JSON value"},
		{"trailing JSON on a new key", "POST", "/admin/v1/keys", `{"tenant":"acme"} {"tenant":"b"}`, 400, "unexpected data after the JSON value"},
		{"soft threshold", "PUT", "/admin/v1/tenants/acme", `{"soft_threshold": 2}`, 400, "soft_threshold"},
		{"oversized limit", "PUT", "/admin/v1/tenants/acme", `{"tokens_per_minute": 9223372036854775807}`, 400, "tokens_per_minute must be at most 1000000000"},
		{"one above the max", "PUT", "/admin/v1/tenants/acme", `{"requests_per_minute": 1000000001}`, 400, "requests_per_minute must be at most"},
		{"unknown key", "PUT", "/admin/v1/keys/key_nope/limits", `{"requests_per_minute": 1}`, 404, "key_nope"},
		{"bad from", "GET", "/admin/v1/usage?from=yesterday", "", 400, "from"},
		{"NUL in a new key's tenant", "POST", "/admin/v1/keys", `{"tenant":"a\u0000b"}`, 400, "tenant must hold printable characters only"},
		{"newline in a key's name", "POST", "/admin/v1/keys", `{"tenant":"acme","name":"a\nb"}`, 400, "name must hold printable"},
		{"long user", "POST", "/admin/v1/keys", `{"tenant":"acme","user":"` + strings.Repeat("u", 129) + `"}`, 400, "user is longer than 128 bytes"},
		{"NUL in a tenant to set", "PUT", "/admin/v1/tenants/a%00b", `{"requests_per_minute": 1}`, 400, "id must hold printable"},
		{"NUL in a tenant to show", "GET", "/admin/v1/tenants/a%00b", "", 400, "id must hold printable"},
		{"NUL in a tenant filter", "GET", "/admin/v1/keys?tenant=a%00b", "", 400, "tenant must hold printable"},
		{"NUL in a usage filter", "GET", "/admin/v1/usage?tenant=a%00b", "", 400, "tenant must hold printable"},
		{"NUL in a key ID", "POST", "/admin/v1/keys/key_%01/rotate", "", 400, "id must hold printable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := send(t, tc.method, gw.URL+tc.path, admin, tc.body)
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			if code != tc.status || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("%s %s: %d %s, want %d naming %q", tc.method, tc.path, code, body, tc.status, tc.want)
			}
		})
	}
	if ovs, _ := gw.Store().ListLimitOverrides(context.Background()); len(ovs) != 0 {
		t.Errorf("bad input stored overrides: %+v", ovs)
	}
}

// TestRotatedKeyKeepsLimits: a key limited to 1 request per minute,
// rotated through the admin API, hands its limit to the new key: the new
// key's 2nd request gets 429.
func TestRotatedKeyKeepsLimits(t *testing.T) {
	gw := gatewaytest.StartYAML(t, `
auth: {cache_ttl: 50ms}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`, "")
	admin, _ := keyWithID(t, gw.Store(), "ops", true)
	_, id := keyWithID(t, gw.Store(), "acme", false)
	time.Sleep(100 * time.Millisecond)
	if code, body := send(t, "PUT", gw.URL+"/admin/v1/keys/"+id+"/limits", admin, `{"requests_per_minute": 1}`); code != http.StatusOK {
		t.Fatalf("PUT limits: %d %s", code, body)
	}
	code, body := send(t, "POST", gw.URL+"/admin/v1/keys/"+id+"/rotate", admin, "")
	if code != http.StatusCreated {
		t.Fatalf("rotate: %d %s", code, body)
	}
	var rotated struct{ Key adminKey }
	if err := json.Unmarshal([]byte(body), &rotated); err != nil || rotated.Key.Key == "" {
		t.Fatalf("rotate answer %s: %v", body, err)
	}
	req := `{"model":"chat","messages":[{"role":"user","content":"hi [sim ttft=1ms tokens=2]"}]}`
	if code, body := send(t, "POST", gw.URL+"/v1/chat/completions", rotated.Key.Key, req); code != http.StatusOK {
		t.Fatalf("the new key's 1st request: %d %s", code, body)
	}
	if code, body := send(t, "POST", gw.URL+"/v1/chat/completions", rotated.Key.Key, req); code != http.StatusTooManyRequests {
		t.Fatalf("the new key's 2nd request: %d %s, want 429 (the rotated key's 1 rpm)", code, body)
	}
}

// TestUnknownModelSpendsNoRate: a request for a model no alias serves is
// a 404 before admission: with 1 request per minute, two 404s on each
// surface leave the slot for a real request.
func TestUnknownModelSpendsNoRate(t *testing.T) {
	for _, tc := range []struct{ path, bad, good string }{
		{"/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"chat","messages":[{"role":"user","content":"hi [sim ttft=1ms tokens=2]"}]}`},
		{"/v1/messages", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"chat","max_tokens":5,"messages":[{"role":"user","content":"hi [sim ttft=1ms tokens=2]"}]}`},
		{"/v1/chat", `{"model":"nope","message":"hi"}`, `{"model":"chat","message":"hi [sim ttft=1ms tokens=2]"}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			gw := gatewaytest.StartYAML(t, `
tenants:
  local: {limits: {requests_per_minute: 1}}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`, "")
			for range 2 {
				if code, body := send(t, "POST", gw.URL+tc.path, "", tc.bad); code != http.StatusNotFound {
					t.Fatalf("unknown model: %d %s, want 404", code, body)
				}
			}
			if code, body := send(t, "POST", gw.URL+tc.path, "", tc.good); code != http.StatusOK {
				t.Fatalf("after two 404s, a real request: %d %s, want 200 (the 404s spent no rate)", code, body)
			}
			if code, body := send(t, "POST", gw.URL+tc.path, "", tc.good); code != http.StatusTooManyRequests {
				t.Fatalf("the 2nd real request: %d %s, want 429", code, body)
			}
		})
	}
}
