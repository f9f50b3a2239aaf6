package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/store"
)

// openStore opens gw's store (a file) as the CLI does, for the test to
// read what the commands stored.
func openStore(t *testing.T, gw *gatewaytest.Gateway) store.Store {
	t.Helper()
	st, err := gateway.OpenStore(t.Context(), gw.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestTenantsCommand: limits set with the CLI, through a running
// gateway's admin API or directly on its store, are the gateway's within
// limits.refresh; show and usage read them back.
func TestTenantsCommand(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fw.yaml")
	cfgText := fmt.Sprintf("store: {path: %s}\nauth: {cache_ttl: 50ms}\nlimits: {refresh: 100ms}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(dir, "fw.db"))
	os.WriteFile(cfgPath, []byte(cfgText), 0o600)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfgText))
	admin, _, code := runCLI(t, "keys", "create", "--config", cfgPath, "--tenant", "ops", "--admin")
	if code != 0 {
		t.Fatal("keys create failed")
	}
	env := map[string]string{"FIRSTWORD_ADMIN_KEY": strings.TrimSpace(admin)}
	time.Sleep(100 * time.Millisecond) // past auth.cache_ttl

	out, stderr, code := runCLIEnv(t, env, "tenants", "set-limits", "acme", "--server", gw.URL, "--set", `{"requests_per_minute": 7}`)
	if code != 0 || !strings.Contains(out, `"requests_per_minute": 7`) {
		t.Fatalf("set-limits --server: %d %s %s", code, out, stderr)
	}
	// Straight on the store: the gateway picks it up within a refresh.
	if out, stderr, code := runCLI(t, "tenants", "set-limits", "globex", "--config", cfgPath, "--set", `{"usd_per_day": 2}`); code != 0 {
		t.Fatalf("set-limits on the store: %d %s %s", code, out, stderr)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		out, _, code = runCLIEnv(t, env, "tenants", "show", "globex", "--server", gw.URL)
		var v struct {
			Effective struct {
				Budget struct {
					USDPerDay float64 `json:"usd_per_day"`
				} `json:"budget"`
			} `json:"effective"`
		}
		json.Unmarshal([]byte(out), &v)
		if code == 0 && v.Effective.Budget.USDPerDay == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never applied the store's override: %d %s", code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _, code = runCLIEnv(t, env, "tenants", "list", "--server", gw.URL)
	if code != 0 || !strings.Contains(out, `"id": "acme"`) || !strings.Contains(out, `"id": "globex"`) {
		t.Errorf("list: %d %s", code, out)
	}
	// Straight on the store, list and show read the overrides the API set.
	out, stderr, code = runCLI(t, "tenants", "list", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, `"id": "acme"`) || !strings.Contains(out, `"requests_per_minute": 7`) || !strings.Contains(out, `"id": "globex"`) {
		t.Errorf("list on the store: %d %s %s", code, out, stderr)
	}
	out, stderr, code = runCLI(t, "tenants", "show", "globex", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, `"usd_per_day": 2`) {
		t.Errorf("show on the store: %d %s %s", code, out, stderr)
	}
	if out, _, code := runCLIEnv(t, env, "tenants", "usage", "--server", gw.URL, "--from", "2026-01-01"); code != 0 || !strings.Contains(out, `"object": "list"`) {
		t.Errorf("usage: %d %s", code, out)
	}
	if _, stderr, code := runCLI(t, "tenants", "set-limits", "acme", "--config", cfgPath, "--set", `{"requests_per_minute": -1}`); code == 0 || !strings.Contains(stderr, "must not be negative") {
		t.Errorf("a negative limit: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "tenants", "show", "acme", "--server", gw.URL); code == 0 || !strings.Contains(stderr, "FIRSTWORD_ADMIN_KEY") {
		t.Errorf("--server without an admin key: %d %s", code, stderr)
	}
}

// TestRotateOnStoreKeepsLimits: keys rotate on the store gives the new key
// the old key's limits override.
func TestRotateOnStoreKeepsLimits(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fw.yaml")
	cfgText := fmt.Sprintf("store: {path: %s}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(dir, "fw.db"))
	os.WriteFile(cfgPath, []byte(cfgText), 0o600)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfgText))
	st := openStore(t, gw)
	if _, stderr, code := runCLI(t, "keys", "create", "--config", cfgPath, "--tenant", "acme"); code != 0 {
		t.Fatalf("keys create: %s", stderr)
	}
	keys, err := st.ListAPIKeys(t.Context(), "acme")
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	old := keys[0].ID
	if out, stderr, code := runCLI(t, "tenants", "set-limits", "--key", old, "--config", cfgPath, "--set", `{"requests_per_minute": 1}`); code != 0 {
		t.Fatalf("set-limits --key: %d %s %s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, "keys", "rotate", "--config", cfgPath, old); code != 0 {
		t.Fatalf("rotate: %d %s %s", code, out, stderr)
	}
	keys, _ = st.ListAPIKeys(t.Context(), "acme")
	ovs, _ := st.ListLimitOverrides(t.Context())
	for _, k := range keys {
		if k.ID == old {
			continue
		}
		for _, o := range ovs {
			if o.Scope == "key" && o.SubjectID == k.ID && strings.Contains(string(o.Settings), `"requests_per_minute":1`) {
				return
			}
		}
		t.Fatalf("the rotated key %s has no override: %+v", k.ID, ovs)
	}
	t.Fatalf("no rotated key: %+v", keys)
}

// TestCLIRefusesControlCharacters: keys create and tenants refuse
// tenants, users, names and IDs with control characters before touching
// the store.
func TestCLIRefusesControlCharacters(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fw.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("store: {path: %s}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(dir, "fw.db"))), 0o600)
	for _, args := range [][]string{
		{"keys", "create", "--config", cfgPath, "--tenant", "a\x00b"},
		{"keys", "create", "--config", cfgPath, "--tenant", "acme", "--user", "u\x1b[2J"},
		{"keys", "create", "--config", cfgPath, "--tenant", "acme", "--name", strings.Repeat("n", 129)},
		{"tenants", "set-limits", "a\x00b", "--config", cfgPath, "--set", `{"requests_per_minute": 1}`},
		{"tenants", "set-limits", "--key", "key_\x00", "--config", cfgPath, "--set", `{"requests_per_minute": 1}`},
		{"tenants", "show", "a\nb", "--config", cfgPath},
	} {
		if out, stderr, code := runCLI(t, args...); code != 2 || !(strings.Contains(stderr, "printable") || strings.Contains(stderr, "longer than 128")) {
			t.Errorf("%q: exit %d, %q %q; want 2 and why", args, code, out, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "fw.db")); err == nil {
		t.Error("a refused command created the store")
	}
}

// TestSetLimitsOnStoreRefuses: tenants set-limits on the store refuses,
// as the admin API does, an unknown key and trailing JSON, and stores
// nothing.
func TestSetLimitsOnStoreRefuses(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fw.yaml")
	cfgText := fmt.Sprintf("store: {path: %s}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(dir, "fw.db"))
	os.WriteFile(cfgPath, []byte(cfgText), 0o600)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfgText))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tenants", "set-limits", "--key", "nosuchkey", "--config", cfgPath, "--set", `{"requests_per_minute": 1}`}, `no key has the ID "nosuchkey"`},
		{[]string{"tenants", "set-limits", "acme", "--config", cfgPath, "--set", `{"requests_per_minute": 1} {}`}, "unexpected data after the JSON value"},
	} {
		if out, stderr, code := runCLI(t, tc.args...); code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %q %q; want an error saying %q", tc.args, code, out, stderr, tc.want)
		}
	}
	if ovs, _ := openStore(t, gw).ListLimitOverrides(t.Context()); len(ovs) != 0 {
		t.Errorf("refused commands stored overrides: %+v", ovs)
	}
}
