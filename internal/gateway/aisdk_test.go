package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// aisdkResult is what internal/cli/testdata/aisdk/check.mjs reports for
// one case.
type aisdkResult struct {
	Text         string            `json:"text"`
	Deltas       int               `json:"deltas"`
	Calls        []json.RawMessage `json:"calls"`
	Errors       []string          `json:"errors"`
	Finish       string            `json:"finish"`
	OutputTokens int               `json:"outputTokens"`
	InputTokens  int               `json:"inputTokens"`
	Thrown       string            `json:"thrown"`
	Status       int               `json:"status"`
	// Reasoning is the text of the reasoning parts, ReasoningAfterText
	// whether any came after answer text, and Signature the Anthropic
	// provider's signature of the thinking block.
	Reasoning          string `json:"reasoning"`
	ReasoningAfterText bool   `json:"reasoningAfterText"`
	Signature          string `json:"signature"`
}

// TestVercelAISDK drives the gateway with the Vercel AI SDK (ai 6 with
// @ai-sdk/openai, @ai-sdk/openai-compatible and @ai-sdk/anthropic) in
// Node.js: Chat Completions (openai.chat, createOpenAICompatible), the
// Responses API (openai(model), the SDK's default) and the Messages API
// (createAnthropic), streamed and whole, with a tool
// call, a failure mid-stream, a cut answer, an unknown model and a model
// that thinks (reasoning parts from each provider). It needs
// Node.js and the packages in internal/cli/testdata/aisdk (`npm ci` there;
// .ci/run does it, there) and says so when it skips.
func TestVercelAISDK(t *testing.T) {
	dir := filepath.Join("..", "cli", "testdata", "aisdk")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipped: Node.js is not installed (the Vercel AI SDK runs in Node.js)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ai")); err != nil {
		t.Skip("skipped: the AI SDK is not installed; run `npm ci --prefix internal/cli/testdata/aisdk` (.ci/run does)")
	}
	gw := gatewaytest.StartYAML(t, `
providers:
  sim: {type: sim}
models:
  fast:
    deployments: [{provider: sim, model: small}]
  reasoner:
    deployments: [{provider: sim, model: reasoner}]
`, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs", gw.URL)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, stderr.String())
	}
	var res map[string]aisdkResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, r := range res {
		b, _ := json.Marshal(r)
		t.Logf("%s: %s", name, b)
	}

	for _, name := range []string{"chat_stream", "compat_stream", "responses_stream", "anthropic_stream"} {
		r := res[name]
		if r.Thrown != "" || r.Text == "" || r.Deltas != 12 || r.Finish != "stop" || r.OutputTokens != 12 || r.InputTokens <= 0 || len(r.Errors) > 0 {
			t.Errorf("%s: %+v; want 12 deltas, finish stop, 12 output tokens", name, r)
		}
	}
	for _, name := range []string{"chat_generate", "responses_generate", "anthropic_generate"} {
		if r := res[name]; r.Thrown != "" || r.Text == "" || r.Finish != "stop" || r.OutputTokens != 12 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if a, b := res["chat_stream"].Text, res["responses_stream"].Text; a != b {
		t.Errorf("the same prompt gave %q on Chat Completions and %q on Responses", a, b)
	}
	for _, name := range []string{"chat_tool", "responses_tool", "anthropic_tool"} {
		r := res[name]
		if r.Thrown != "" || len(r.Calls) != 1 || !strings.Contains(string(r.Calls[0]), `"name":"get_weather"`) || r.Finish != "tool-calls" {
			t.Errorf("%s: %+v; want one get_weather call, finish tool-calls", name, r)
		}
	}
	for _, name := range []string{"chat_error_mid", "responses_error_mid", "anthropic_error_mid"} {
		r := res[name]
		if r.Text == "" || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "simulated error after 5 tokens") || r.Finish != "error" {
			t.Errorf("%s: %+v; want the text before the failure, then the error, finish error", name, r)
		}
	}
	for _, name := range []string{"responses_length", "anthropic_length"} {
		if r := res[name]; r.Finish != "length" || r.OutputTokens != 5 {
			t.Errorf("%s: %+v; want finish length after 5 tokens", name, r)
		}
	}
	if r := res["responses_history"]; r.Thrown != "" || r.Text != "thanks" {
		t.Errorf("responses_history: %+v; want the echo of the last message", r)
	}
	if r := res["responses_second_turn"]; r.Thrown != "" || r.Text != "again|again" {
		t.Errorf("responses_second_turn: %+v; want both second turns answered", r)
	}
	// Thinking (issue 32): each provider reports reasoning parts, all
	// before the answer, the same thinking from each dialect.
	for _, name := range []string{"compat_reasoning", "anthropic_reasoning", "responses_reasoning"} {
		r := res[name]
		if r.Thrown != "" || r.Reasoning == "" || r.ReasoningAfterText || r.Text == "" || r.Finish != "stop" || strings.Contains(r.Text, r.Reasoning) {
			t.Errorf("%s: %+v; want reasoning parts, then the answer", name, r)
		}
		if r.Reasoning != res["compat_reasoning"].Reasoning {
			t.Errorf("%s: reasoning %q, Chat Completions read %q", name, r.Reasoning, res["compat_reasoning"].Reasoning)
		}
	}
	if r := res["anthropic_reasoning"]; !strings.HasPrefix(r.Signature, "simsig1") {
		t.Errorf("anthropic_reasoning: signature %q; want the sim's", r.Signature)
	}
	if r := res["unknown_model"]; r.Status != 404 || !strings.Contains(r.Thrown, `"nope" does not exist`) {
		t.Errorf("unknown_model: %+v; want a 404 naming the model", r)
	}
}
