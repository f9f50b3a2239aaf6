package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestTyposGolden: a mistyped command, action or flag gets the nearest
// one and a short usage (the usage line and where to read the rest), not
// the whole help; exit 2, nothing on stdout. The outputs are in
// testdata/typos.golden (FIRSTWORD_UPDATE_GOLDEN=1 rewrites it).
func TestTyposGolden(t *testing.T) {
	var b strings.Builder
	for _, args := range [][]string{
		{"serv"},
		{"sreve"},
		{"frobnicate"},
		{"help", "budgte"},
		{"serve", "--adr", "127.0.0.1:0"},
		{"serve", "-adr", "127.0.0.1:0"},
		{"serve", "--frobnicate"},
		{"serve", "--addr", "8080"},
		{"budget", "--ky", "x"},
		{"keys", "creat"},
		{"keys", "frob"},
		{"keys", "create", "--tenat", "acme"},
		{"tenants", "lst"},
		{"bench", "--duraton", "1s"},
		{"bench", "--targt", "a=http://127.0.0.1:1"},
		{"hepl"},
	} {
		out, stderr, code := mainOut(t, nil, args...)
		if out != "" || code != 2 {
			t.Errorf("firstword %s: exit %d, stdout %q; want 2 and nothing", strings.Join(args, " "), code, out)
		}
		if n := strings.Count(stderr, "\n"); n > 5 {
			t.Errorf("firstword %s: %d lines on stderr, want the error and a short usage:\n%s", strings.Join(args, " "), n, stderr)
		}
		fmt.Fprintf(&b, "$ firstword %s\n%s(exit %d)\n\n", strings.Join(args, " "), stderr, code)
	}
	const golden = "testdata/typos.golden"
	if os.Getenv("FIRSTWORD_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", b.String(), golden, want)
	}
}
