package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/firstword/firstword/internal/cli"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, os.Getenv, nil, &out, &errb)
	return out.String(), errb.String(), code
}

// TestKeysCommand: keys are created, listed and revoked with the CLI, and
// a running gateway honours them: without keys it is in local mode, with
// one it requires it, and a revoked key stops working within the cache TTL.
func TestKeysCommand(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fw.yaml")
	cfgText := fmt.Sprintf("store: {path: %s}\nauth: {cache_ttl: 50ms}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(dir, "fw.db"))
	os.WriteFile(cfgPath, []byte(cfgText), 0o600)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfgText))
	if code, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", ""); code != 200 {
		t.Fatalf("local mode: %d", code)
	}

	key, stderr, code := runCLI(t, "keys", "create", "--config", cfgPath, "--tenant", "acme", "--name", "ci")
	key = strings.TrimSpace(key)
	if code != 0 || !strings.HasPrefix(key, "fw_") || !strings.Contains(stderr, "shown once") {
		t.Fatalf("create: %d %q %q", code, key, stderr)
	}
	prefix := strings.Split(key, "_")[1]
	list, _, code := runCLI(t, "keys", "list", "--config", cfgPath)
	if code != 0 || !strings.Contains(list, prefix) || strings.Contains(list, key) {
		t.Errorf("list (must show the prefix, never the key): %q", list)
	}
	time.Sleep(100 * time.Millisecond)
	if code, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", ""); code != 401 {
		t.Errorf("with a key existing, no key: %d, want 401", code)
	}
	if code, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", key); code != 200 {
		t.Errorf("with the key: %d", code)
	}
	// The operators' endpoints need an admin key.
	admin, stderr, code := runCLI(t, "keys", "create", "--config", cfgPath, "--tenant", "ops", "--admin")
	admin = strings.TrimSpace(admin)
	if code != 0 || !strings.Contains(stderr, "admin key") {
		t.Fatalf("create --admin: %d %q", code, stderr)
	}
	for _, path := range []string{"/admin/runtime", "/admin/health", "/admin/sim", "/admin/debug/pprof/heap?debug=1"} {
		if code, _ := gatewaytest.GetJSON(t, gw.URL+path, ""); code != 401 {
			t.Errorf("%s without a key: %d, want 401", path, code)
		}
		if code, _ := gatewaytest.GetJSON(t, gw.URL+path, key); code != 403 {
			t.Errorf("%s with a tenant's key: %d, want 403", path, code)
		}
		if code, _ := gatewaytest.GetJSON(t, gw.URL+path, admin); code != 200 {
			t.Errorf("%s with the admin key: %d, want 200", path, code)
		}
	}
	// Anthropic's SDKs send the key as x-api-key and read Anthropic's
	// error shape.
	params := anthropic.MessageNewParams{Model: "chat", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi [sim ttft=1ms gap=1ms]"))}}
	good := anthropic.NewClient(aoption.WithBaseURL(gw.URL+"/"), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	if _, err := good.Messages.New(context.Background(), params); err != nil {
		t.Errorf("x-api-key: %v", err)
	}
	bad := anthropic.NewClient(aoption.WithBaseURL(gw.URL+"/"), aoption.WithAPIKey("fw_nope_nope"), aoption.WithMaxRetries(0))
	_, err := bad.Messages.New(context.Background(), params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(apiErr.RawJSON(), `"type":"authentication_error"`) || !strings.Contains(apiErr.RawJSON(), `"type":"error"`) {
		t.Errorf("a bad x-api-key: %v", err)
	}
	// budget needs a key too once keys exist, and says so.
	if _, stderr, code := runCLIEnv(t, nil, "budget", "--server", gw.URL); code != 1 || !strings.Contains(stderr, "this gateway needs an API key: pass --key fw_...") || !strings.Contains(stderr, "an admin key shows every tenant") {
		t.Errorf("budget without a key: exit %d, %q; want 1 and how to pass a key", code, stderr)
	}
	if _, stderr, code := runCLIEnv(t, nil, "budget", "--server", gw.URL, "--key", "fw_nope_nope"); code != 1 || !strings.Contains(stderr, "refused the API key") {
		t.Errorf("budget with a bad key: exit %d, %q", code, stderr)
	}
	if out, stderr, code := runCLIEnv(t, nil, "budget", "--server", gw.URL, "--key", admin); code != 0 || !strings.Contains(out, "Where the time goes") {
		t.Errorf("budget --key ADMIN: exit %d, %q %q", code, out, stderr)
	}
	if out, stderr, code := runCLIEnv(t, map[string]string{"FIRSTWORD_API_KEY": key}, "budget", "--server", gw.URL); code != 0 || !strings.Contains(out, "Where the time goes") {
		t.Errorf("budget with $FIRSTWORD_API_KEY: exit %d, %q %q", code, out, stderr)
	}
	// The tenant's view has none of the local-mode traffic, and says so.
	if out, stderr, code := runCLIEnv(t, nil, "budget", "--server", gw.URL, "--key", key, "--surface", "chat"); code != 0 || !strings.Contains(out, "No traffic yet") || !strings.Contains(out, "requests served in local mode, before the first key was created, are not in it") {
		t.Errorf("budget of a tenant with no traffic: exit %d, %q %q; want no traffic and why local mode's is not shown", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "keys", "revoke", "--config", cfgPath, prefix); code != 0 {
		t.Fatalf("revoke: %s", stderr)
	}
	time.Sleep(100 * time.Millisecond)
	if code, _ := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations", key); code != 401 {
		t.Errorf("revoked key: %d, want 401", code)
	}
	if _, _, code := runCLI(t, "keys", "revoke", "--config", cfgPath, "nosuchkey"); code == 0 {
		t.Error("revoking an unknown key succeeded")
	}
}

// runCLIEnv runs the CLI with an environment holding only env.
func runCLIEnv(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(t.Context(), args, func(k string) string { return env[k] }, nil, &out, &errb)
	return out.String(), errb.String(), code
}

// TestKeysSayWhichStore: every keys action names its store on stderr.
// With no config that is ./firstword.db in the working directory: create
// says when it makes a new one there, list and revoke never make one, and
// create's stdout is the key alone.
func TestKeysSayWhichStore(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(wd, "firstword.db")
	noStore := func(when string) {
		t.Helper()
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Fatalf("%s: %s exists (%v), want no store made", when, db, err)
		}
	}

	out, stderr, code := runCLI(t, "keys", "list")
	if code != 0 || out != "" || !strings.Contains(stderr, "SQLite file "+db+" does not exist") {
		t.Errorf("keys list with no store: exit %d, stdout %q, stderr %q; want 0, nothing, and the missing file named", code, out, stderr)
	}
	noStore("keys list")
	if _, stderr, code := runCLI(t, "keys", "revoke", "key_nope"); code != 1 || !strings.Contains(stderr, db) {
		t.Errorf("keys revoke with no store: exit %d, stderr %q; want 1 and the missing file named", code, stderr)
	}
	noStore("keys revoke")

	key, stderr, code := runCLI(t, "keys", "create", "--tenant", "acme")
	if code != 0 || !regexp.MustCompile(`^fw_[^\s]+\n$`).MatchString(key) {
		t.Fatalf("keys create: exit %d, stdout %q; want 0 and the key alone", code, key)
	}
	if want := "store: SQLite file " + db + " does not exist yet: creating a new store"; !strings.Contains(stderr, want) {
		t.Errorf("the first keys create says %q, want %q", stderr, want)
	}
	_, stderr, _ = runCLI(t, "keys", "create", "--tenant", "acme")
	if want := "store: SQLite file " + db + "\n"; !strings.HasPrefix(stderr, want) || strings.Contains(stderr, "creating") {
		t.Errorf("the second keys create says %q, want it to start %q", stderr, want)
	}

	// From another directory, a config naming the store reaches it.
	other := t.TempDir()
	cfgPath := filepath.Join(other, "fw.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("store: {path: %s}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", db)), 0o600)
	t.Chdir(other)
	list, stderr, code := runCLI(t, "keys", "list", "--config", cfgPath)
	if code != 0 || strings.Count(list, "acme") != 2 || !strings.Contains(stderr, "store: SQLite file "+db+"\n") {
		t.Errorf("keys list --config from elsewhere: exit %d, %q, stderr %q; want both keys and the store named", code, list, stderr)
	}
}

// TestServeRefusesOpenLocalMode: with no keys, serve only listens on a
// loopback address.
func TestServeRefusesOpenLocalMode(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fw.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("store: {path: %s}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(dir, "fw.db"))), 0o600)
	_, stderr, code := runCLI(t, "serve", "--config", cfgPath, "--addr", "0.0.0.0:0")
	if code == 0 || !strings.Contains(stderr, "loopback") {
		t.Errorf("serve on 0.0.0.0 without keys: %d %q", code, stderr)
	}
}

// TestServeAdminKeyFromEnv: FIRSTWORD_ADMIN_KEY gives a store with no keys
// its first (admin) key, so serve starts on 0.0.0.0; a malformed value is
// refused, and once the store has keys the variable is ignored.
func TestServeAdminKeyFromEnv(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fw.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("store: {path: %s}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(dir, "fw.db"))), 0o600)
	_, stderr, code := runCLIEnv(t, map[string]string{"FIRSTWORD_ADMIN_KEY": "hunter2"}, "serve", "--config", cfgPath, "--addr", "0.0.0.0:0")
	if code == 0 || !strings.Contains(stderr, "FIRSTWORD_ADMIN_KEY is not a firstword key") || strings.Contains(stderr, "hunter2") {
		t.Errorf("serve with a malformed FIRSTWORD_ADMIN_KEY: %d %q", code, stderr)
	}
	// serveUntilListening runs serve with the key until it listens, then stops it.
	serveUntilListening := func(key, addr string) string {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		out := &syncBuffer{}
		done := make(chan int, 1)
		go func() {
			done <- cli.Main(ctx, []string{"serve", "--config", cfgPath, "--addr", addr}, func(k string) string {
				if k == "FIRSTWORD_ADMIN_KEY" {
					return key
				}
				return ""
			}, nil, io.Discard, out)
		}()
		for !strings.Contains(out.String(), `"msg":"listening"`) {
			select {
			case code := <-done:
				t.Fatalf("serve exited %d before listening:\n%s", code, out.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve after cancel: exit %d", code)
		}
		return out.String()
	}
	key := "fw_Abcd1234_" + strings.Repeat("s3cret", 6)
	log := serveUntilListening(key, "0.0.0.0:0")
	if !strings.Contains(log, "stored FIRSTWORD_ADMIN_KEY as admin key") || !strings.Contains(log, `"auth":"keys"`) || strings.Contains(log, key) {
		t.Errorf("serve's log does not say it stored the key (or shows it):\n%s", log)
	}
	list, _, code := runCLI(t, "keys", "list", "--config", cfgPath)
	if code != 0 || !strings.Contains(list, "Abcd1234") || !strings.Contains(list, "admin") {
		t.Errorf("keys list after the bootstrap: %d %q", code, list)
	}
	// The store has a key now: another value is not added.
	log = serveUntilListening("fw_Zzzz9999_"+strings.Repeat("other", 4), "127.0.0.1:0")
	if list, _, _ := runCLI(t, "keys", "list", "--config", cfgPath); strings.Contains(list, "Zzzz9999") || strings.Contains(log, "stored FIRSTWORD_ADMIN_KEY") {
		t.Errorf("FIRSTWORD_ADMIN_KEY was stored into a store that had keys:\n%s\n%s", list, log)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
