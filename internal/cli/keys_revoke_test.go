package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/auth"
)

// TestCheckRevoke: the last active key is revoked only with --yes or a
// yes at a terminal, after a warning that every request will get 401 and
// how to get back in; a key already revoked is said so; none is an error.
func TestCheckRevoke(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	past, later := now.Add(-time.Hour), now.Add(time.Hour)
	keys := func(revoked ...*time.Time) []auth.KeyView {
		var ks []auth.KeyView
		for i, r := range revoked {
			ks = append(ks, auth.KeyView{ID: "key_" + string(rune('a'+i)), Prefix: "fw_" + string(rune('a'+i)), RevokedAt: r})
		}
		return ks
	}
	for _, tc := range []struct {
		name        string
		keys        []auth.KeyView
		id          string
		yes, tty    bool
		answer      string
		ok          bool // a key to revoke was returned
		err, stderr string
	}{
		{"another key stays", keys(nil, nil), "key_a", false, false, "", true, "", ""},
		{"by prefix", keys(nil, nil), "fw_b", false, false, "", true, "", ""},
		{"no such key", keys(nil), "key_z", false, false, "", false, "no key key_z", ""},
		{"already revoked", keys(&past, nil), "key_a", false, false, "", false, "", "key_a was already revoked at 2026-12-07T11:00:00Z: nothing changed"},
		{"the last, no --yes", keys(nil, &past), "key_a", false, false, "", false, "pass --yes", "every API request gets 401"},
		{"the last, --yes", keys(nil), "key_a", true, false, "", true, "", ""},
		{"the other one in its grace", keys(nil, &later), "key_a", false, false, "", false, "pass --yes", "last active API key"},
		{"the one in its grace, another stays", keys(&later, nil), "key_a", false, false, "", true, "", ""},
		{"the last, yes at a terminal", keys(nil), "key_a", false, true, "y\n", true, "", "Revoke it? [y/N]"},
		{"the last, no at a terminal", keys(nil), "key_a", false, true, "\n", false, "not revoked", "firstword keys create --tenant NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errb bytes.Buffer
			env := &Env{Stdin: strings.NewReader(tc.answer), Stderr: &errb, Interactive: tc.tty}
			ids, err := checkRevoke(env, tc.keys, tc.id, tc.yes, now)
			if ok := len(ids) == 1 && (ids[0] == tc.id || "fw_"+ids[0][4:] == tc.id); ok != tc.ok || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("checkRevoke = %v, %v; want a key %v and an error saying %q", ids, err, tc.ok, tc.err)
			}
			if !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("stderr %q, want %q in it", errb.String(), tc.stderr)
			}
		})
	}
}

// TestRevokeLastKeyOnStore: on a store with one key, keys revoke without
// --yes (stdin not a terminal) leaves it active and exits 1; with --yes it
// is revoked; again, it says it already was; an unknown key is "no key".
func TestRevokeLastKeyOnStore(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fw.yaml")
	if err := os.WriteFile(cfg, []byte("store: {path: "+filepath.Join(dir, "fw.db")+"}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat:\n    deployments: [{provider: sim, model: small}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := mainOut(t, nil, "keys", "create", "--config", cfg, "--tenant", "acme"); code != 0 {
		t.Fatalf("keys create: %d %s", code, stderr)
	}
	list, _, _ := mainOut(t, nil, "keys", "list", "--config", cfg)
	id := strings.Fields(strings.Split(list, "\n")[1])[0]
	steps := []struct {
		args   []string
		code   int
		stderr string
		active bool
	}{
		{[]string{id}, 1, "pass --yes", true},
		{[]string{"--yes", id}, 0, "revoked " + id, false},
		{[]string{"--yes", id}, 0, "already revoked", false},
		{[]string{"nosuch"}, 1, `no key nosuch: "firstword keys list" shows`, false},
	}
	for _, s := range steps {
		_, stderr, code := mainOut(t, nil, append([]string{"keys", "revoke", "--config", cfg}, s.args...)...)
		if code != s.code || !strings.Contains(stderr, s.stderr) {
			t.Errorf("keys revoke %v: exit %d, stderr %q; want %d and %q", s.args, code, stderr, s.code, s.stderr)
		}
		list, _, _ := mainOut(t, nil, "keys", "list", "--config", cfg)
		if active := strings.HasSuffix(strings.TrimSpace(list), "-"); active != s.active {
			t.Errorf("after keys revoke %v: list %q, want active %v", s.args, list, s.active)
		}
	}
}
