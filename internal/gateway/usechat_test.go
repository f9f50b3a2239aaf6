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

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/store"
)

// uiShown is what internal/cli/testdata/aisdk/usechat.mjs reports of one
// chat: its status, error and messages as the AI SDK holds them.
type uiShown struct {
	Status string   `json:"status"`
	Error  string   `json:"error"`
	Errors []string `json:"errors"`
	// Stop is the stop route's answer (the "stopped" case).
	Stop *struct {
		Status int            `json:"status"`
		Body   map[string]any `json:"body"`
	} `json:"stop"`
	Messages []struct {
		ID        string         `json:"id"`
		Role      string         `json:"role"`
		Text      string         `json:"text"`
		Reasoning string         `json:"reasoning"`
		Parts     []string       `json:"parts"`
		Metadata  map[string]any `json:"metadata"`
	} `json:"messages"`
}

// TestAISDKUseChat drives /v1/ui/chat with the AI SDK's own client code
// (ai 6: DefaultChatTransport and an AbstractChat with its state in
// memory, which is what useChat wraps) in Node.js: an answer streams into
// the chat with firstword's message id and metadata; a regeneration
// replaces it; an answer whose connection is cut mid-way resumes
// (GET /v1/ui/chat/{id}/stream) and ends with exactly the text of a clean
// run; thinking arrives as reasoning parts; an upstream failure is the
// chat's error; another tenant's use of the same chat id shares nothing.
// It skips without Node.js or the installed packages, as TestVercelAISDK.
func TestAISDKUseChat(t *testing.T) {
	dir := filepath.Join("..", "cli", "testdata", "aisdk")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipped: Node.js is not installed (the Vercel AI SDK runs in Node.js)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ai")); err != nil {
		t.Skip("skipped: the AI SDK is not installed; run `npm ci --prefix internal/cli/testdata/aisdk` (.ci/run does)")
	}
	gw := gatewaytest.StartYAML(t, `
heartbeat: 200ms
providers:
  sim: {type: sim}
models:
  fast:
    deployments: [{provider: sim, model: small}]
  reasoner:
    deployments: [{provider: sim, model: reasoner}]
`, "")
	keys := map[string]string{}
	for _, tenant := range []string{"acme", "globex"} {
		if err := auth.EnsureTenant(context.Background(), gw.Store(), tenant, tenant); err != nil {
			t.Fatal(err)
		}
		key, prefix, hash := auth.NewKey()
		err := gw.Store().CreateAPIKey(context.Background(), &store.APIKey{ID: store.NewID("key_"), TenantID: tenant, UserID: tenant + "-user", Prefix: prefix, Hash: hash, CreatedAt: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		keys[tenant] = key
	}
	time.Sleep(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "usechat.mjs", gw.URL, keys["acme"], keys["globex"])
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node usechat.mjs: %v\n%s", err, stderr.String())
	}
	var res map[string]uiShown
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, r := range res {
		b, _ := json.Marshal(r)
		t.Logf("%s: %s", name, b)
	}
	answer := func(name string) (string, string) {
		r := res[name]
		if len(r.Messages) != 2 || r.Messages[0].Role != "user" || r.Messages[1].Role != "assistant" {
			t.Fatalf("%s: %+v, want a user message and an answer", name, r)
		}
		return r.Messages[1].ID, r.Messages[1].Text
	}

	plainID, plain := answer("plain")
	if r := res["plain"]; r.Status != "ready" || plain == "" || !strings.HasPrefix(plainID, "msg_") {
		t.Errorf("plain: %+v; want a text answer whose id is firstword's", r)
	}
	md := res["plain"].Messages[1].Metadata
	if md["conversation_id"] == nil || md["cost"] == nil || md["timings"] == nil || md["status"] != "complete" {
		t.Errorf("plain metadata %v; want the conversation, cost, timings and status", md)
	}
	conv, _ := md["conversation_id"].(string)
	if code, c := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+conv, keys["acme"]); code != 200 {
		t.Errorf("GET /v1/conversations/%s: %d", conv, code)
	} else if msgs, _ := c["messages"].([]any); len(msgs) != 2 || msgs[1].(map[string]any)["id"] == plainID {
		t.Errorf("after regenerate the stored conversation is %v; want 2 messages, the answer replaced", c)
	}
	regenID, regen := answer("regenerated")
	if regenID == plainID || regen != plain || res["regenerated"].Status != "ready" {
		t.Errorf("regenerated: %+v; want a new answer (the sim's same text) replacing %s", res["regenerated"], plainID)
	}

	// GET /v1/ui/chat/{id}/messages: the stored chat as UIMessages.
	if l, r := res["loaded"], res["regenerated"]; len(l.Messages) != 2 || l.Messages[1].ID != r.Messages[1].ID || l.Messages[1].Text != r.Messages[1].Text ||
		l.Messages[0].Text != r.Messages[0].Text || l.Messages[1].Metadata["cost"] == nil || l.Messages[1].Metadata["conversation_id"] != conv {
		t.Errorf("loaded: %+v\nwant the regenerated chat's messages (ids, text) with metadata", l)
	}
	if l, r := res["reasoning_loaded"], res["reasoning"]; len(l.Messages) != 2 || l.Messages[1].Reasoning != r.Messages[1].Reasoning || l.Messages[1].Text != r.Messages[1].Text {
		t.Errorf("reasoning_loaded: %+v\nwant the reasoning and text shown", l)
	}

	_, clean := answer("clean")
	if r := res["cut"]; r.Status != "error" || len(r.Messages) != 2 || r.Messages[1].Text == "" || len(r.Messages[1].Text) >= len(clean) {
		t.Errorf("cut: %+v; want a partial answer and a disconnect", r)
	}
	resumedID, resumed := answer("resumed")
	if resumed != clean || res["resumed"].Status != "ready" || resumedID != res["cut"].Messages[1].ID {
		t.Errorf("resumed: %q (%s) %+v\nwant the clean run's %q with the same message id", resumed, resumedID, res["resumed"], clean)
	}

	if r := res["stopped"]; r.Status != "ready" || r.Stop == nil || r.Stop.Status != 200 || r.Stop.Body["stopped"] != true || r.Stop.Body["status"] != "cancelled" {
		t.Errorf("stopped: %+v; want the stop route to stop the answer the SDK's stop() left running", r)
	} else if stopID, stopped := answer("stopped"); stopped == "" || len(stopped) >= len(clean) {
		t.Errorf("stopped: %q, want part of the answer", stopped)
	} else if conv, _ := r.Messages[1].Metadata["conversation_id"].(string); conv == "" {
		t.Errorf("stopped: no conversation in %v", r.Messages[1].Metadata)
	} else if _, c := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+conv, keys["acme"]); len(c["messages"].([]any)) != 2 ||
		c["messages"].([]any)[1].(map[string]any)["status"] != "cancelled" || c["messages"].([]any)[1].(map[string]any)["id"] != stopID {
		t.Errorf("the stopped answer is stored as %v", c)
	}
	if r := res["reasoning"]; len(r.Messages) != 2 || r.Messages[1].Reasoning == "" || r.Messages[1].Text == "" || r.Messages[1].Parts[len(r.Messages[1].Parts)-1] != "text" {
		t.Errorf("reasoning: %+v; want reasoning parts, then the text", r)
	}
	if r := res["error"]; r.Status != "error" || !strings.Contains(r.Error, "simulated error after 5 tokens") || len(r.Messages) != 2 || r.Messages[1].Text == "" {
		t.Errorf("error: %+v; want the text before the failure and the error", r)
	}

	if r := res["other_tenant_resume"]; r.Status != "ready" || len(r.Messages) != 0 {
		t.Errorf("another tenant's resume of the chat: %+v; want nothing", r)
	}
	if r := res["other_tenant"]; len(r.Messages) != 2 || r.Messages[1].Metadata["conversation_id"] == nil {
		t.Errorf("another tenant's chat: %+v", r)
	} else if other := r.Messages[1].Metadata["conversation_id"]; other == conv {
		t.Error("two tenants share a conversation")
	} else if code, c := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+other.(string), keys["globex"]); code != 200 || len(c["messages"].([]any)) != 2 {
		t.Errorf("globex's conversation: %d %v; want its own 2 messages", code, c)
	}
}
