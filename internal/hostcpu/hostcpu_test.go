package hostcpu

import (
	"os"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Sample
		err      bool
	}{
		// A guest's line: user nice system idle iowait irq softirq steal guest guest_nice.
		{"steal", "cpu  97052 0 28029 461676 642 0 8197 15886 5 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
			Sample{Total: 97052 + 28029 + 461676 + 642 + 8197 + 15886, Idle: 461676 + 642, Steal: 15886}, false},
		{"old kernel", "cpu 10 0 5 85 0\n", Sample{Total: 100, Idle: 85}, false},
		{"not first", "intr 1 2\ncpu 1 2 3 4 5\n", Sample{}, true},
		{"short", "cpu 1 2 3\n", Sample{}, true},
		{"bad field", "cpu 1 2 x 4 5 6 7 8\n", Sample{}, true},
		{"negative", "cpu 1 2 -3 4 5 6 7 8\n", Sample{}, true},
		{"empty", "", Sample{}, true},
	} {
		got, err := Parse([]byte(tc.in))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: Parse = %+v, %v; want %+v, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestBetween(t *testing.T) {
	a := Sample{Total: 1000, Idle: 600, Steal: 100}
	b := Sample{Total: 2000, Idle: 1100, Steal: 300}
	u := Between(a, b)
	if u.Steal != 0.2 || u.Busy != 0.3 {
		t.Errorf("Between = %+v, want steal 0.2 busy 0.3", u)
	}
	if !strings.Contains(u.Note(), "20%") {
		t.Errorf("Note = %q, want the 20%% steal named", u.Note())
	}
	if n := Between(a, Sample{Total: 2000, Idle: 1500, Steal: 120}).Note(); n != "" {
		t.Errorf("2%% steal: Note = %q, want none", n)
	}
	for _, bad := range []Sample{a, {Total: 900}, {Total: 2000, Steal: 50, Idle: 700}} {
		if u := Between(a, bad); u != (Usage{}) {
			t.Errorf("Between(%+v, %+v) = %+v, want zero", a, bad, u)
		}
	}
}

// TestRead reads this machine's /proc/stat where there is one.
func TestRead(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat here:", err)
	}
	s, err := Read()
	if err != nil || s.Total == 0 || s.Idle > s.Total || s.Steal > s.Total {
		t.Fatalf("Read = %+v, %v", s, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("cpu  97052 0 28029 461676 642 0 8197 15886 0 0\n"))
	f.Add([]byte("cpu 1 2 3 4 5\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err == nil && (s.Idle > s.Total || s.Steal > s.Total) {
			t.Fatalf("Parse(%q) = %+v: a part above the total", b, s)
		}
	})
}
