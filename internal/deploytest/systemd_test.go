package deploytest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/config"
)

const unitPath = "deploy/systemd/firstword.service"

// unitSettings reads a unit file's Key=Value lines; a key set more than
// once keeps every value, in order.
func unitSettings(t *testing.T, b []byte) map[string][]string {
	t.Helper()
	kv := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not Key=Value", unitPath, line)
		}
		kv[k] = append(kv[k], v)
	}
	return kv
}

// TestSystemdUnit: the unit runs serve with a config file, without
// root or capabilities, stops with SIGTERM and waits longer than the
// gateway's default shutdown_delay + shutdown_timeout.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), unitPath))
	if err != nil {
		t.Fatal(err)
	}
	kv := unitSettings(t, b)
	want := map[string]string{
		"ExecStart":              "/usr/local/bin/firstword serve --config /etc/firstword/firstword.yaml",
		"DynamicUser":            "yes",
		"StateDirectory":         "firstword",
		"WorkingDirectory":       "%S/firstword",
		"EnvironmentFile":        "-/etc/firstword/secrets.env",
		"KillSignal":             "SIGTERM",
		"KillMode":               "mixed",
		"NoNewPrivileges":        "yes",
		"CapabilityBoundingSet":  "",
		"ProtectSystem":          "strict",
		"ProtectHome":            "yes",
		"PrivateTmp":             "yes",
		"MemoryDenyWriteExecute": "yes",
		"LockPersonality":        "yes",
	}
	for k, v := range want {
		if got := kv[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	if got := kv["SystemCallFilter"]; len(got) == 0 || got[0] != "@system-service" {
		t.Errorf("SystemCallFilter=%q, want @system-service first", got)
	}
	if got := kv["RestrictAddressFamilies"]; len(got) != 1 || got[0] != "AF_INET AF_INET6 AF_UNIX" {
		t.Errorf("RestrictAddressFamilies=%q", got)
	}
	stop, err := time.ParseDuration(strings.Join(kv["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", kv["TimeoutStopSec"], err)
	}
	d := config.Default()
	if need := d.ShutdownDelay + d.ShutdownTimeout; stop <= need {
		t.Errorf("TimeoutStopSec=%v, want above the default shutdown_delay + shutdown_timeout (%v)", stop, need)
	}
}

// TestSystemdVerify runs systemd's own checks on the unit: verify (no
// unknown or malformed settings; ExecStart points at an executable, so
// the copy names this test binary instead of /usr/local/bin/firstword)
// and the offline security audit, whose exposure score must stay "OK".
func TestSystemdVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package has it)")
	}
	b, err := os.ReadFile(filepath.Join(root(t), unitPath))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.Replace(string(b), "ExecStart=/usr/local/bin/firstword ", "ExecStart="+self+" ", 1)
	if unit == string(b) {
		t.Fatal("the unit's ExecStart is not /usr/local/bin/firstword")
	}
	path := filepath.Join(t.TempDir(), "firstword.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(sa, "security", "--offline=true", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security --offline=true: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for firstword\.service: ([0-9.]+) (\w+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	// systemd calls 0-2 "OK", above it "MEDIUM" and worse.
	if score > 2.0 || string(m[2]) != "OK" {
		t.Errorf("exposure level %s %s, want at most 2.0 (OK)\n%s", m[1], m[2], out)
	}
	t.Logf("systemd-analyze security: exposure %s %s", m[1], m[2])
}
