package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// openaiUp is a fake OpenAI upstream that streams "Hello from upstream".
func openaiUp(t *testing.T) *gatewaytest.Upstream {
	return gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("Hello")+gatewaytest.ChunkJSON(" from upstream")+gatewaytest.FinishJSON)
	})
}

// closedPort is a loopback address nothing listens on: connecting is
// refused at once, as the 127.0.0.1:9000.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// upstreamModels returns the model field of each request the upstream got.
func upstreamModels(t *testing.T, u *gatewaytest.Upstream) []string {
	t.Helper()
	var out []string
	for _, b := range u.Requests() {
		var body struct{ Model string }
		if err := json.Unmarshal([]byte(b), &body); err != nil {
			t.Fatalf("upstream body %q: %v", b, err)
		}
		out = append(out, body.Model)
	}
	return out
}

// TestRuleTargetUnreachableFallsBackToAskedAlias is the trap: the
// example's short-questions rule sends a short prompt to fast, on an
// address nothing listens on. The request is answered by chat's
// deployment, and the fallback shows in the headers and the metrics.
func TestRuleTargetUnreachableFallsBackToAskedAlias(t *testing.T) {
	up := openaiUp(t)
	gw := gatewaytest.StartYAML(t, `
providers:
  openai: {type: openai, base_url: "{{UP}}/v1"}
  local: {type: openai, base_url: "http://`+closedPort(t)+`/v1"}
models:
  chat:
    deployments: [{provider: openai, model: gpt-4o}]
    rules:
      - {name: short-questions, max_input_tokens: 24, use: fast}
  fast:
    deployments: [{provider: local, model: small}]
`, up.URL)
	for _, stream := range []bool{true, false} {
		body := `{"model":"chat","messages":[{"role":"user","content":"What is 2+2?"}]}`
		if stream {
			body = `{"model":"chat","stream":true,"messages":[{"role":"user","content":"What is 2+2?"}]}`
		}
		resp := gatewaytest.Post(t, gw.URL, body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "from upstream") {
			t.Fatalf("stream=%v: %d %s", stream, resp.StatusCode, b)
		}
		if got, want := resp.Header.Get("X-Firstword-Rule"), "short-questions (chat → fast, fell back to chat)"; got != want {
			t.Errorf("stream=%v: X-Firstword-Rule %q, want %q", stream, got, want)
		}
		if got := resp.Header.Get("X-Firstword-Deployment"); got != "openai/gpt-4o" {
			t.Errorf("stream=%v: X-Firstword-Deployment %q", stream, got)
		}
		if route := resp.Header.Get("X-Firstword-Route"); !strings.HasPrefix(route, "local/small=error") || !strings.HasSuffix(route, ", fell back to chat: openai/gpt-4o=ok") {
			t.Errorf("stream=%v: X-Firstword-Route %q", stream, route)
		}
	}
	if got := upstreamModels(t, up); len(got) != 2 || got[0] != "gpt-4o" || got[1] != "gpt-4o" {
		t.Errorf("upstream models %q, want chat's gpt-4o twice", got)
	}
	if line := gatewaytest.MetricLine(t, gw, `firstword_routing_rule_fallback_total{alias="chat",rule="short-questions",to="fast"}`); !strings.HasSuffix(line, " 2") {
		t.Errorf("metric: %s, want 2", line)
	}
	if line := gatewaytest.MetricLine(t, gw, `firstword_routing_rule_total{alias="chat",rule="short-questions",to="fast"}`); !strings.HasSuffix(line, " 2") {
		t.Errorf("metric: %s, want 2", line)
	}
}

// passthroughConfig has an OpenAI-compatible upstream configured as the
// provider openai, and the built-in sim.
const passthroughConfig = `
models_passthrough: %s
providers:
  openai: {type: openai, base_url: "{{UP}}/v1"}
  sim: {type: sim}
models:
  chat:
    deployments: [{provider: openai, model: gpt-4o}, {provider: sim, model: medium, priority: 1}]
`

func passthroughGateway(t *testing.T, policy string, up *gatewaytest.Upstream) *gatewaytest.Gateway {
	t.Helper()
	return gatewaytest.StartYAML(t, strings.Replace(passthroughConfig, "%s", policy, 1), up.URL)
}

// TestPassthroughOpenAISDK: the official OpenAI SDK asks for
// openai/gpt-4o-mini (local mode, the default policy): the upstream
// configured as openai is sent gpt-4o-mini, streamed or not, and the
// request is measured under its PROVIDER/MODEL name.
func TestPassthroughOpenAISDK(t *testing.T) {
	up := openaiUp(t)
	gw := passthroughGateway(t, "auto", up)
	client := sdkClient(gw.URL)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "openai/gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	}
	c, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || c.Choices[0].Message.Content != "Hello from upstream" {
		t.Fatalf("choices %+v", c.Choices)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "Hello from upstream" {
		t.Errorf("streamed %q", got)
	}
	if got := upstreamModels(t, up); len(got) != 2 || got[0] != "gpt-4o-mini" || got[1] != "gpt-4o-mini" {
		t.Errorf("upstream models %q, want gpt-4o-mini twice", got)
	}
	if line := gatewaytest.MetricLine(t, gw, `firstword_requests_total{alias="openai/gpt-4o-mini",deployment="openai/gpt-4o-mini",status="complete",surface="openai"}`); !strings.HasSuffix(line, " 2") {
		t.Errorf("metric: %s, want 2", line)
	}
	// The sim's tiers are models too.
	c, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "sim/small",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello. [sim ttft=5ms gap=1ms tokens=5]")},
	})
	if err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
		t.Fatalf("sim/small: %v, %+v", err, c)
	}
}

// TestPassthroughPolicy: auto serves PROVIDER/MODEL names in local mode
// and refuses them once a key exists, naming the setting; on serves them
// to keys; off never does; a provider that is not configured is an
// unknown model whatever the policy. GET /v1/models lists them while they
// are served, /v1/chat refuses them as the other surfaces do.
func TestPassthroughPolicy(t *testing.T) {
	const ask = `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, policy string
		key          bool
		served       bool
	}{
		{"auto in local mode", "auto", false, true},
		{"auto once a key exists", "auto", true, false},
		{"on with keys", "on", true, true},
		{"off in local mode", "off", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := openaiUp(t)
			gw := passthroughGateway(t, tc.policy, up)
			key := ""
			if tc.key {
				key = newKey(t, gw.Store(), "acme", "", false)
			}
			status, body := send(t, "POST", gw.URL+"/v1/chat/completions", key, ask)
			switch {
			case tc.served && status != http.StatusOK:
				t.Errorf("openai/gpt-4o-mini: %d %s, want 200", status, body)
			case !tc.served && (status != http.StatusNotFound || !strings.Contains(body, `"code":"model_not_found"`) ||
				!strings.Contains(body, "PROVIDER/MODEL names are off: set models_passthrough")):
				t.Errorf("openai/gpt-4o-mini: %d %s, want 404 model_not_found naming models_passthrough", status, body)
			}
			if status, body := send(t, "POST", gw.URL+"/v1/chat/completions", key, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK {
				t.Errorf("the alias: %d %s", status, body)
			}
			status, body = send(t, "POST", gw.URL+"/v1/chat/completions", key, `{"model":"azure/gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
			if status != http.StatusNotFound || !strings.Contains(body, `the model \"azure/gpt-4o\" does not exist`) {
				t.Errorf("unknown provider: %d %s", status, body)
			}
			if status, body := send(t, "POST", gw.URL+"/v1/chat", key, `{"model":"openai/gpt-4o-mini","message":"hi"}`); tc.served != (status == http.StatusOK) ||
				!tc.served && !strings.Contains(body, "models_passthrough") {
				t.Errorf("/v1/chat: %d %s, want served %v (or a refusal naming models_passthrough)", status, body, tc.served)
			}
			status, body = send(t, "GET", gw.URL+"/v1/models", key, "")
			var list struct {
				Data []struct {
					ID      string `json:"id"`
					OwnedBy string `json:"owned_by"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(body), &list); status != http.StatusOK || err != nil {
				t.Fatalf("/v1/models: %d %s", status, body)
			}
			var ids []string
			for _, m := range list.Data {
				ids = append(ids, m.ID+" "+m.OwnedBy)
			}
			want := "chat firstword"
			if tc.served {
				want += ", openai/gpt-4o openai, sim/medium sim"
			}
			if got := strings.Join(ids, ", "); got != want {
				t.Errorf("/v1/models: %s, want %s", got, want)
			}
		})
	}
}

// TestPassthroughLevers: a PROVIDER/MODEL name gets the levers of an alias
// with none configured: a deterministic request is answered from the
// response cache the second time, without the upstream.
func TestPassthroughLevers(t *testing.T) {
	up := openaiUp(t)
	gw := passthroughGateway(t, "on", up)
	const body = `{"model":"openai/gpt-4o-mini","temperature":0,"stream":true,"messages":[{"role":"user","content":"What is 2+2?"}]}`
	for i, want := range []string{"", "hit"} {
		resp := gatewaytest.Post(t, gw.URL, body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "from upstream") {
			t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, b)
		}
		if got := resp.Header.Get("X-Firstword-Cache"); got != want {
			t.Errorf("request %d: X-Firstword-Cache %q, want %q", i+1, got, want)
		}
	}
	if n := len(up.Requests()); n != 1 {
		t.Errorf("the upstream was asked %d times, want once", n)
	}
	if line := gatewaytest.MetricLine(t, gw, `firstword_events_total{alias="openai/gpt-4o-mini",event="cache_hit"}`); !strings.HasSuffix(line, " 1") {
		t.Errorf("metric: %s, want 1", line)
	}
}
