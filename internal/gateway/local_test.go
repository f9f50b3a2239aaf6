package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/gateway"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestLocalModeListensOnLoopbackOnly: with no key in the store, Listen
// refuses a non-loopback address and takes a loopback one in local mode;
// BootstrapAdminKey then gives the store its first key, and the gateway
// listens anywhere.
func TestLocalModeListensOnLoopbackOnly(t *testing.T) {
	cfg := gatewaytest.MustParse(t, fmt.Sprintf("store: {path: %s}\nauth: {cache_ttl: 1ms}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat: {deployments: [{provider: sim, model: small}]}\n", filepath.Join(t.TempDir(), "fw.db")))
	listen := func(addr string) (bool, error) {
		t.Helper()
		cfg.Listen = addr
		gw, err := gateway.Build(t.Context(), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer gw.Close()
		ln, local, err := gw.Listen(t.Context())
		if err == nil {
			ln.Close()
		}
		return local, err
	}
	if _, err := listen("0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "only does that on a loopback address, not 0.0.0.0:0") {
		t.Errorf("local mode on 0.0.0.0: %v, want refused", err)
	}
	if local, err := listen("127.0.0.1:0"); err != nil || !local {
		t.Errorf("local mode on 127.0.0.1: local %v, %v; want local and listening", local, err)
	}
	if err := gateway.BootstrapAdminKey(t.Context(), cfg, "hunter2", io.Discard); err == nil || !strings.Contains(err.Error(), "FIRSTWORD_ADMIN_KEY is not a firstword key") {
		t.Errorf("a malformed admin key: %v", err)
	}
	var out bytes.Buffer
	key := "fw_Abcd1234_" + strings.Repeat("s3cret", 6)
	if err := gateway.BootstrapAdminKey(t.Context(), cfg, key, &out); err != nil || !strings.Contains(out.String(), "stored FIRSTWORD_ADMIN_KEY as admin key key_") {
		t.Fatalf("bootstrap: %v, %q", err, out.String())
	}
	out.Reset()
	if err := gateway.BootstrapAdminKey(t.Context(), cfg, "fw_Zzzz9999_"+strings.Repeat("other", 4), &out); err != nil || out.Len() != 0 {
		t.Errorf("bootstrap into a store with a key: %v, %q; want nothing done", err, out.String())
	}
	if local, err := listen("0.0.0.0:0"); err != nil || local {
		t.Errorf("with a key on 0.0.0.0: local %v, %v; want keys mode and listening", local, err)
	}
}
