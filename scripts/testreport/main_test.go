package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestReport: a recorded `go test -json ./...` of a module with passing,
// skipped (with and without a reason, from a helper, in a subtest),
// failing, panicking and unbuildable tests, and a package without tests
// (testdata/mixed.jsonl; the module is described in testdata/README) reads
// as go test without -v, then the skips.
func TestReport(t *testing.T) {
	in, err := os.ReadFile("testdata/mixed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	failed, err := report(bytes.NewReader(in), &out, "example.com/tr")
	if err != nil || !failed {
		t.Errorf("report = %v, %v; want a failure seen and no error", failed, err)
	}
	if *update {
		os.WriteFile("testdata/mixed.golden", out.Bytes(), 0o644)
	}
	want, err := os.ReadFile("testdata/mixed.golden")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// TestReportPassing: a clean run shows the package lines and says that
// nothing was skipped; a line that is not an event (an early error of go
// test) is passed through.
func TestReportPassing(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"example.com/tr/a"}`,
		`{"Action":"run","Package":"example.com/tr/a","Test":"TestA"}`,
		`{"Action":"output","Package":"example.com/tr/a","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"example.com/tr/a","Test":"TestA","Output":"    a_test.go:3: chatter\n"}`,
		`{"Action":"output","Package":"example.com/tr/a","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}`,
		`{"Action":"pass","Package":"example.com/tr/a","Test":"TestA"}`,
		`{"Action":"output","Package":"example.com/tr/a","Output":"PASS\n"}`,
		`{"Action":"output","Package":"example.com/tr/a","Output":"ok  \texample.com/tr/a\t0.01s\n"}`,
		`{"Action":"pass","Package":"example.com/tr/a"}`,
		`go: warning: something early`,
	}, "\n")
	var out bytes.Buffer
	failed, err := report(strings.NewReader(in), &out, "example.com/tr")
	want := "ok  \texample.com/tr/a\t0.01s\ngo: warning: something early\n\nskipped: none\n"
	if failed || err != nil || out.String() != want {
		t.Errorf("report = %v, %v, output\n%s\nwant no failure and\n%s", failed, err, out.String(), want)
	}
}

// TestReportGroupsSkips: the tests of a package skipped for the same
// reason share a line, in the order they ran.
func TestReportGroupsSkips(t *testing.T) {
	var b strings.Builder
	for _, s := range []struct{ pkg, test, why string }{
		{"redis", "TestFrozen", "no Redis"},
		{"redis", "TestCut", "no Redis"},
		{"cli", "TestNginx", "no nginx"},
		{"cli", "TestRedis", "no Redis"},
		{"redis", "TestDown", "no Redis"},
	} {
		fmt.Fprintf(&b, `{"Action":"output","Package":"example.com/tr/%s","Test":"%s","Output":"    x_test.go:9: %s\n"}`+"\n", s.pkg, s.test, s.why)
		fmt.Fprintf(&b, `{"Action":"skip","Package":"example.com/tr/%s","Test":"%s"}`+"\n", s.pkg, s.test)
	}
	var out bytes.Buffer
	report(strings.NewReader(b.String()), &out, "example.com/tr")
	want := "\nskipped: TestFrozen, TestCut, TestDown (./redis): no Redis\nskipped: TestNginx (./cli): no nginx\nskipped: TestRedis (./cli): no Redis\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

func TestReason(t *testing.T) {
	for _, tt := range []struct {
		name string
		out  []string
		want string
	}{
		{"none", []string{"=== RUN   TestX\n", "--- SKIP: TestX (0.00s)\n"}, "(no reason given)"},
		{"after a log", []string{"=== RUN   TestX\n", "    x_test.go:3: starting\n", "    x_test.go:9: no Redis\n", "--- SKIP: TestX (0.00s)\n"}, "no Redis"},
		{"two lines", []string{"    x_test.go:9: no Chromium:\n", "        apt-get install -y chromium\n", "--- SKIP: TestX (0.00s)\n"}, "no Chromium: apt-get install -y chromium"},
		{"after the result line", []string{"--- SKIP: TestX (0.00s)\n", "    x_test.go:9: no nginx\n"}, "no nginx"},
		{"a server's log after it", []string{"    x_test.go:9: skipped: nginx is not installed\n", "time=2026-12-01T16:14:26Z level=INFO msg=\"shutting down\"\n", "--- SKIP: TestX (0.00s)\n"}, "nginx is not installed"},
	} {
		if got := reason(tt.out); got != tt.want {
			t.Errorf("%s: reason(%q) = %q, want %q", tt.name, tt.out, got, tt.want)
		}
	}
}
