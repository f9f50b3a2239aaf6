package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/store"
)

const scopingConfig = `
auth: {cache_ttl: 50ms}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
tenants:
  shared: {shared_conversations: true}
`

// newKey stores a key for tenant, its own user unless user is set.
func newKey(t *testing.T, st store.Store, tenant, user string, admin bool) string {
	t.Helper()
	ctx := context.Background()
	if err := auth.EnsureTenant(ctx, st, tenant, tenant); err != nil {
		t.Fatal(err)
	}
	key, prefix, hash := auth.NewKey()
	k := &store.APIKey{ID: store.NewID("key_"), TenantID: tenant, UserID: user, Prefix: prefix, Hash: hash, CreatedAt: time.Now().UTC(), Admin: admin}
	if k.UserID == "" {
		k.UserID = k.ID
	}
	if err := st.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	return key
}

// send makes a request with a JSON body (or none) and returns the status
// and the whole answer.
func send(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNoneOfAnotherPrincipalsBytes: one key of tenant A makes a
// conversation and some requests; every route, replayed with another
// tenant's key, another key of the same tenant, a bad key and no key,
// answers with none of A's bytes: no conversation, message or request
// id, no text, and changes nothing of A's.
func TestNoneOfAnotherPrincipalsBytes(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, scopingConfig))
	a1 := newKey(t, gw.Store(), "acme", "", false)
	a2 := newKey(t, gw.Store(), "acme", "", false)
	b := newKey(t, gw.Store(), "globex", "", false)
	time.Sleep(100 * time.Millisecond) // past auth.cache_ttl: keys are required now

	r := chatOnce(t, gw.URL, a1, map[string]any{"message": "zebra-octopus plans [sim ttft=2ms gap=1ms tokens=8]"}, 0)
	if r.status != 200 || r.last.kind != "done" {
		t.Fatalf("acme's turn: %d %s %v", r.status, r.body, r.last)
	}
	conv := r.meta["conversation_id"].(string)
	secrets := []string{conv, r.meta["message_id"].(string), r.meta["user_message_id"].(string), r.headers.Get("X-Request-Id"), "zebra-octopus", strings.TrimSpace(r.text)[:12]}
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"walrus-lantern [sim ttft=2ms gap=1ms tokens=4]"}]}`, "Authorization", "Bearer "+a1)
	io.ReadAll(resp.Body)
	resp.Body.Close()
	secrets = append(secrets, resp.Header.Get("X-Request-Id"), "walrus-lantern")
	// A sees its own: the control that makes the rest mean something.
	if code, body := send(t, "GET", gw.URL+"/v1/conversations/"+conv, a1, ""); code != 200 || !strings.Contains(body, "zebra-octopus") {
		t.Fatalf("acme's own conversation: %d %s", code, body)
	}
	waitUsage(t, gw, a1)
	if _, body := send(t, "GET", gw.URL+"/v1/budget?recent=200", a1, ""); !strings.Contains(body, secrets[3]) {
		t.Fatalf("acme's own budget view lacks its request %s: %s", secrets[3], body)
	}

	routes := []struct{ method, path, body string }{
		{"GET", "/v1/conversations", ""},
		{"GET", "/v1/conversations/" + conv, ""},
		{"DELETE", "/v1/conversations/" + conv, ""},
		{"PATCH", "/v1/conversations/" + conv, `{"title":"taken over"}`},
		{"POST", "/v1/chat", `{"conversation_id":"` + conv + `","message":"what did I say? [sim ttft=1ms gap=1ms tokens=3]"}`},
		{"GET", "/v1/budget?recent=200", ""},
		{"GET", "/v1/budget?recent=200&tenant=acme", ""},
		{"GET", "/v1/budget/advice?tenant=acme", ""},
		{"GET", "/v1/usage", ""},
		{"GET", "/v1/models", ""},
		{"GET", "/admin/health", ""},
		{"GET", "/admin/runtime", ""},
		{"GET", "/admin/sim", ""},
		{"GET", "/admin/debug/pprof/heap?debug=1", ""},
		{"GET", "/admin/debug/pprof/goroutine?debug=2", ""},
		{"POST", "/admin/gc", ""},
		{"GET", "/metrics", ""},
	}
	for name, key := range map[string]string{"another tenant's key": b, "another key of the tenant": a2, "a bad key": "fw_aaaaaaaa_" + strings.Repeat("b", 32), "no key": ""} {
		for _, rt := range routes {
			code, body := send(t, rt.method, gw.URL+rt.path, key, rt.body)
			for _, s := range secrets {
				if strings.Contains(body, s) {
					t.Errorf("%s: %s %s (%d) answered with acme's %q", name, rt.method, rt.path, code, s)
				}
			}
			if strings.HasPrefix(rt.path, "/admin/") && code < 400 {
				t.Errorf("%s: %s %s: %d, want it refused", name, rt.method, rt.path, code)
			}
		}
	}
	// Nothing of A's changed: its conversation is whole.
	if code, body := send(t, "GET", gw.URL+"/v1/conversations/"+conv, a1, ""); code != 200 || strings.Count(body, `"role":"`) != 2 || strings.Contains(body, "taken over") {
		t.Errorf("acme's conversation after the replay: %d %s", code, body)
	}
}

// waitUsage waits for key's tenant's usage rows to be written.
func waitUsage(t *testing.T, gw *gatewaytest.Gateway, key string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, v := gatewaytest.GetJSON(t, gw.URL+"/v1/usage", key); len(v["data"].([]any)) > 0 {
			return
		}
	}
	t.Fatal("no usage rows")
}

// TestSharedConversations: a tenant configured to share conversations
// lets each of its keys read and continue the others'; other tenants
// still see nothing.
func TestSharedConversations(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, scopingConfig))
	s1 := newKey(t, gw.Store(), "shared", "", false)
	s2 := newKey(t, gw.Store(), "shared", "", false)
	b := newKey(t, gw.Store(), "globex", "", false)
	time.Sleep(100 * time.Millisecond)
	r := chatOnce(t, gw.URL, s1, map[string]any{"message": "hello [sim ttft=2ms gap=1ms tokens=4]"}, 0)
	conv := r.meta["conversation_id"].(string)
	if code, _ := send(t, "GET", gw.URL+"/v1/conversations/"+conv, s2, ""); code != 200 {
		t.Errorf("another key of a sharing tenant: %d, want 200", code)
	}
	if r := chatOnce(t, gw.URL, s2, map[string]any{"message": "more [sim ttft=2ms gap=1ms tokens=4]", "conversation_id": conv}, 0); r.status != 200 {
		t.Errorf("another key of a sharing tenant continuing: %d %s", r.status, r.body)
	}
	if code, _ := send(t, "GET", gw.URL+"/v1/conversations/"+conv, b, ""); code != 404 {
		t.Errorf("another tenant: %d, want 404", code)
	}
}

// TestRenameConversation: PATCH /v1/conversations/{id} sets the title the
// list shows, keeps the conversation's place in it, and refuses a title
// that is empty, too long or holds control characters, with a 400 that
// changes nothing.
func TestRenameConversation(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, scopingConfig))
	var convs []string
	for _, m := range []string{"first [sim ttft=1ms gap=1ms tokens=2]", "second [sim ttft=1ms gap=1ms tokens=2]"} {
		r := chatOnce(t, gw.URL, "", map[string]any{"message": m}, 0)
		if r.status != 200 || r.last.kind != "done" {
			t.Fatalf("turn: %d %s", r.status, r.body)
		}
		convs = append(convs, r.meta["conversation_id"].(string))
	}
	list := func() []any {
		_, v := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", "")
		return v["data"].([]any)
	}
	before := list()

	code, body := send(t, "PATCH", gw.URL+"/v1/conversations/"+convs[0], "", `{"title":"  Budgets, measured  "}`)
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || got["id"] != convs[0] || got["title"] != "Budgets, measured" {
		t.Fatalf("PATCH: %d %s; want 200 with the conversation and its trimmed title", code, body)
	}
	after := list()
	if len(after) != 2 || after[1].(map[string]any)["id"] != convs[0] || after[1].(map[string]any)["title"] != "Budgets, measured" ||
		after[1].(map[string]any)["updated_at"] != before[1].(map[string]any)["updated_at"] {
		t.Errorf("list after the rename: %v; want the renamed conversation second, as before (%v)", after, before)
	}

	for _, tc := range []struct{ name, body, param string }{
		{"empty", `{"title":"   "}`, "title"},
		{"missing", `{}`, "title"},
		{"too long", `{"title":"` + strings.Repeat("é", 201) + `"}`, "title"},
		{"newline", `{"title":"two\nlines"}`, "title"},
		{"unknown field", `{"title":"x","pinned":true}`, ""},
		{"not JSON", `title=x`, ""},
	} {
		code, body := send(t, "PATCH", gw.URL+"/v1/conversations/"+convs[0], "", tc.body)
		if code != 400 || !strings.Contains(body, `"param":"`+tc.param+`"`) && tc.param != "" {
			t.Errorf("%s: %d %s; want 400 naming %q", tc.name, code, body, tc.param)
		}
	}
	if code, _ := send(t, "PATCH", gw.URL+"/v1/conversations/conv_nosuch", "", `{"title":"x"}`); code != 404 {
		t.Errorf("PATCH of no conversation: %d, want 404", code)
	}
	if _, v := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+convs[0], ""); v["title"] != "Budgets, measured" {
		t.Errorf("after the refused renames the title is %v; want it unchanged", v["title"])
	}
}
