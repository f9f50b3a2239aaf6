package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/cli"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestKeysAgainstServer: keys create, list, rotate and revoke with
// --server act on a running gateway through its admin API, with the admin
// key from the environment (never printed); the gateway honours each
// change at once (its own auth cache is 10m here).
func TestKeysAgainstServer(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fw.yaml")
	cfgText := fmt.Sprintf("store: {path: %s}\nauth: {cache_ttl: 10m}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(dir, "fw.db"))
	os.WriteFile(cfgPath, []byte(cfgText), 0o600)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfgText))
	root, _, code := runCLI(t, "keys", "create", "--config", cfgPath, "--tenant", "ops", "--admin")
	root = strings.TrimSpace(root)
	if code != 0 {
		t.Fatalf("keys create on the store: %d", code)
	}
	env := map[string]string{"FIRSTWORD_ADMIN_KEY": root, "OTHER_KEY": root}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), args, func(k string) string { return env[k] }, nil, &out, &errb)
		if strings.Contains(out.String()+errb.String(), root) {
			t.Errorf("%v printed the admin key", args)
		}
		return out.String(), errb.String(), code
	}

	key, stderr, code := run("keys", "create", "--server", gw.URL, "--tenant", "acme", "--user", "alice", "--name", "app")
	key = strings.TrimSpace(key)
	if code != 0 || !strings.HasPrefix(key, "fw_") || !strings.Contains(stderr, "shown once") {
		t.Fatalf("create --server: %d %q %q", code, key, stderr)
	}
	id := strings.Fields(strings.SplitN(stderr, "created key ", 2)[1])[0]
	if c, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", key); c != 200 {
		t.Fatalf("the new key: %d", c)
	}
	list, _, code := run("keys", "list", "--server", gw.URL, "--key-env", "OTHER_KEY", "--tenant", "acme")
	if code != 0 || !strings.Contains(list, id) || strings.Contains(list, key) || strings.Count(list, "\n") != 2 {
		t.Errorf("list --server --tenant acme: %d %q", code, list)
	}

	newKey, stderr, code := run("keys", "rotate", "--server", gw.URL, id)
	newKey = strings.TrimSpace(newKey)
	if code != 0 || !strings.HasPrefix(newKey, "fw_") || newKey == key || !strings.Contains(stderr, "replacing "+id) {
		t.Fatalf("rotate --server: %d %q %q", code, newKey, stderr)
	}
	if c, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", key); c != 401 {
		t.Errorf("the rotated key: %d, want 401 at once", c)
	}
	if c, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", newKey); c != 200 {
		t.Errorf("its successor: %d", c)
	}
	newID := strings.Fields(strings.SplitN(stderr, "created key ", 2)[1])[0]
	// By its prefix, as keys list shows it: the admin API is sent its ID.
	list, _, _ = run("keys", "list", "--server", gw.URL, "--tenant", "acme")
	var prefix string
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == newID {
			prefix = f[1]
		}
	}
	if _, stderr, code := run("keys", "revoke", "--server", gw.URL, prefix); prefix == "" || code != 0 || !strings.Contains(stderr, "revoked "+newID) {
		t.Fatalf("revoke --server %q (the prefix): %d %q", prefix, code, stderr)
	}
	if c, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", newKey); c != 401 {
		t.Errorf("the revoked key: %d, want 401 at once", c)
	}

	appKey, appErr, code := runCLI(t, "keys", "create", "--config", cfgPath, "--tenant", "acme", "--name", "worker")
	if code != 0 {
		t.Fatalf("keys create on the store: %d %s", code, appErr)
	}
	env["APP_KEY"] = strings.TrimSpace(appKey)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"keys", "revoke", "--server", gw.URL, "key_nope"}, "no key key_nope"},
		{"no admin key in the env", []string{"keys", "list", "--server", gw.URL, "--key-env", "UNSET"}, "UNSET"},
		{"not an admin key", []string{"keys", "list", "--server", gw.URL, "--key-env", "APP_KEY"}, "admin key"},
		{"bad server", []string{"keys", "list", "--server", "localhost:1"}, "--server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := run(tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v: %d %q, want a failure saying %q", tc.args, code, stderr, tc.want)
			}
		})
	}

	// Without --server, rotate works on the store.
	out, stderr, code := runCLI(t, "keys", "rotate", "--config", cfgPath, "--grace", "1h", id)
	if code == 0 || !strings.Contains(stderr, "revoked") {
		t.Errorf("rotating a revoked key on the store: %d %q %q", code, out, stderr)
	}
	appID := strings.Fields(strings.SplitN(appErr, "created key ", 2)[1])[0]
	out, stderr, code = runCLI(t, "keys", "rotate", "--config", cfgPath, "--grace", "1h", appID)
	if code != 0 || !strings.HasPrefix(out, "fw_") || !strings.Contains(stderr, "replacing "+appID) {
		t.Fatalf("rotate on the store: %d %q %q", code, out, stderr)
	}
	for _, k := range []string{env["APP_KEY"], strings.TrimSpace(out)} {
		if c, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", k); c != 200 {
			t.Errorf("within the grace, %s...: %d", k[:11], c)
		}
	}
}
