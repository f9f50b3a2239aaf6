package gateway_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

const adminKeysConfig = `
auth: {cache_ttl: 10m}
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`

// adminKey is a key as the admin API answers it.
type adminKey struct {
	ID        string  `json:"id"`
	Prefix    string  `json:"prefix"`
	Key       string  `json:"key"`
	Tenant    string  `json:"tenant"`
	User      string  `json:"user"`
	Name      string  `json:"name"`
	Admin     bool    `json:"admin"`
	RevokedAt *string `json:"revoked_at"`
}

func decodeKey(t *testing.T, body string) adminKey {
	t.Helper()
	var k adminKey
	if err := json.Unmarshal([]byte(body), &k); err != nil {
		t.Fatalf("key answer %q: %v", body, err)
	}
	return k
}

// TestAdminKeyAPI drives the admin key API on a real socket: the first
// key, created in local mode, ends local mode at once; keys are listed
// without secrets; a revoked key and a rotated one stop working at once
// on the replica that changed them (the auth cache here is 10m: only the
// replica's own invalidation can explain it), a rotation's grace keeps
// the old key working; bad requests get OpenAI-shaped 4xx errors.
func TestAdminKeyAPI(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, adminKeysConfig))
	code, body := send(t, "GET", gw.URL+"/v1/conversations", "", "")
	if code != 200 {
		t.Fatalf("local mode: GET /v1/conversations = %d %s", code, body)
	}
	code, body = send(t, "POST", gw.URL+"/admin/v1/keys", "", `{"tenant":"ops","name":"root","admin":true}`)
	if code != 201 {
		t.Fatalf("first key: %d %s", code, body)
	}
	root := decodeKey(t, body)
	if !strings.HasPrefix(root.Key, "fw_"+root.Prefix+"_") || root.Tenant != "ops" || root.User != root.ID || !root.Admin || root.Name != "root" {
		t.Fatalf("first key = %+v", root)
	}
	if code, body := send(t, "GET", gw.URL+"/v1/conversations", "", ""); code != 401 {
		t.Fatalf("after the first key, no key: %d %s; want 401 at once", code, body)
	}

	code, body = send(t, "POST", gw.URL+"/admin/v1/keys", root.Key, `{"tenant":"acme","user":"alice","name":"app"}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	app := decodeKey(t, body)
	if code, body := send(t, "GET", gw.URL+"/v1/conversations", app.Key, ""); code != 200 {
		t.Fatalf("new key: %d %s", code, body)
	}
	if code, body := send(t, "GET", gw.URL+"/admin/v1/keys", app.Key, ""); code != 403 || !strings.Contains(body, `"admin_key_required"`) {
		t.Errorf("a tenant key on the admin API: %d %s; want 403 admin_key_required", code, body)
	}

	code, body = send(t, "GET", gw.URL+"/admin/v1/keys?tenant=acme", root.Key, "")
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Data) != 1 || list.Data[0]["id"] != app.ID {
		t.Fatalf("list acme: %d %s", code, body)
	}
	code, body = send(t, "GET", gw.URL+"/admin/v1/keys", root.Key, "")
	if code != 200 || strings.Count(body, `"object":"api_key"`) != 2 {
		t.Errorf("list all: %d %s; want both keys", code, body)
	}
	for _, secret := range []string{root.Key, app.Key, root.Key[len(root.Key)-20:], "hash"} {
		if strings.Contains(body, secret) {
			t.Errorf("the list shows %q: %s", secret, body)
		}
	}

	// Rotation with grace: both work; the old one until the grace ends.
	code, body = send(t, "POST", gw.URL+"/admin/v1/keys/"+app.ID+"/rotate?grace=1h", root.Key, "")
	if code != 201 {
		t.Fatalf("rotate with grace: %d %s", code, body)
	}
	var rot struct {
		Key     adminKey `json:"key"`
		Revoked string   `json:"revoked"`
	}
	json.Unmarshal([]byte(body), &rot)
	if rot.Revoked != app.ID || rot.Key.Tenant != "acme" || rot.Key.User != "alice" || rot.Key.Name != "app" || rot.Key.Key == "" || rot.Key.ID == app.ID {
		t.Fatalf("rotation = %s", body)
	}
	for _, k := range []string{app.Key, rot.Key.Key} {
		if code, body := send(t, "GET", gw.URL+"/v1/conversations", k, ""); code != 200 {
			t.Errorf("within the grace, %s...: %d %s", k[:11], code, body)
		}
	}
	// Rotation without grace: the old key stops at once.
	code, body = send(t, "POST", gw.URL+"/admin/v1/keys/"+rot.Key.ID+"/rotate", root.Key, "")
	if code != 201 {
		t.Fatalf("rotate: %d %s", code, body)
	}
	var rot2 struct {
		Key adminKey `json:"key"`
	}
	json.Unmarshal([]byte(body), &rot2)
	if code, _ := send(t, "GET", gw.URL+"/v1/conversations", rot.Key.Key, ""); code != 401 {
		t.Errorf("rotated key: %d, want 401 at once", code)
	}
	if code, _ := send(t, "GET", gw.URL+"/v1/conversations", rot2.Key.Key, ""); code != 200 {
		t.Errorf("its successor: %d, want 200", code)
	}
	// Revocation brings the first rotation's grace forward.
	code, body = send(t, "POST", gw.URL+"/admin/v1/keys/"+app.ID+"/revoke", root.Key, "")
	if code != 200 || decodeKey(t, body).RevokedAt == nil {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if code, _ := send(t, "GET", gw.URL+"/v1/conversations", app.Key, ""); code != 401 {
		t.Errorf("revoked key: %d, want 401 at once", code)
	}

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"revoke unknown", "POST", "/admin/v1/keys/key_nope/revoke", "", 404, "key_not_found"},
		{"rotate unknown", "POST", "/admin/v1/keys/key_nope/rotate", "", 404, "key_not_found"},
		{"rotate revoked", "POST", "/admin/v1/keys/" + app.ID + "/rotate", "", 409, "key_revoked"},
		{"bad grace", "POST", "/admin/v1/keys/" + app.ID + "/rotate?grace=soon", "", 400, ""},
		{"no tenant", "POST", "/admin/v1/keys", `{"name":"x"}`, 400, ""},
		{"unknown field", "POST", "/admin/v1/keys", `{"tenant":"a","role":"x"}`, 400, ""},
		{"not json", "POST", "/admin/v1/keys", `{"tenant":`, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := send(t, tc.method, gw.URL+tc.path, root.Key, tc.body)
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    any    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != tc.status || e.Error.Message == "" {
				t.Fatalf("%s %s = %d %s; want %d with an OpenAI error object", tc.method, tc.path, code, body, tc.status)
			}
			if tc.code != "" && e.Error.Code != tc.code {
				t.Errorf("code = %v, want %s", e.Error.Code, tc.code)
			}
		})
	}
}

// pgProcess starts the real binary on the PostgreSQL url with the
// default auth.cache_ttl.
func pgProcess(t *testing.T, dir, name, pg string) *process {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, name+".yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %s
store: {driver: postgres, url: %q}
usage: {spill_path: %s}
providers:
  sim: {type: sim}
models:
  chat: {timeout: 60s, deployments: [{provider: sim, model: small}]}
`, addr, pg, filepath.Join(dir, name+".spill"))), 0o600)
	p := startProcess(t, cfg, addr)
	t.Cleanup(func() {
		p.cmd.Process.Signal(os.Interrupt)
		p.cmd.Wait()
		if t.Failed() {
			t.Logf("replica %s's log:\n%s", name, p.log.String())
		}
	})
	return p
}

// TestRevokeAcrossReplicas: two real processes share PostgreSQL with the
// default auth.cache_ttl. A key revoked (and one rotated) on A, each
// answered by B from its cache a moment before, is refused by B within
// 2 s.
func TestRevokeAcrossReplicas(t *testing.T) {
	pg := pgSchema(t, "the two-replica revocation test")
	dir := t.TempDir()
	a := pgProcess(t, dir, "a", pg)
	b := pgProcess(t, dir, "b", pg)
	cfgA := filepath.Join(dir, "a.yaml")
	out, err := exec.Command(binary(t), "keys", "create", "--config", cfgA, "--tenant", "ops", "--admin").Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	root := strings.TrimSpace(string(out))

	for _, change := range []string{"revoke", "rotate"} {
		t.Run(change, func(t *testing.T) {
			var k adminKey
			waitFor(t, 5*time.Second, "the admin key to work on A", func() bool {
				code, body := send(t, "POST", a.url+"/admin/v1/keys", root, `{"tenant":"acme"}`)
				if code == 201 {
					k = decodeKey(t, body)
				}
				return code == 201
			})
			if code, body := send(t, "GET", b.url+"/v1/conversations", k.Key, ""); code != 200 {
				t.Fatalf("the key on B: %d %s", code, body)
			}
			if code, body := send(t, "POST", a.url+"/admin/v1/keys/"+k.ID+"/"+change, root, ""); code/100 != 2 {
				t.Fatalf("%s on A: %d %s", change, code, body)
			}
			changed := time.Now()
			if code, _ := send(t, "GET", a.url+"/v1/conversations", k.Key, ""); code != 401 {
				t.Errorf("A after the %s: %d, want 401 at once", change, code)
			}
			for {
				code, body := send(t, "GET", b.url+"/v1/conversations", k.Key, "")
				if code == 401 {
					break
				}
				if code != 200 {
					t.Fatalf("B: %d %s", code, body)
				}
				if time.Since(changed) > 2*time.Second {
					t.Fatalf("B still takes the key 2s after the %s on A", change)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("B refused the key %v after the %s on A", time.Since(changed).Round(time.Millisecond), change)
		})
	}
}

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
	}
}
