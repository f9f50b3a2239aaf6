package cli

import (
	"strings"
	"testing"
)

func TestWantsTargets(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--latency-requests", "5", "--phases", "latency"}, false},
		{[]string{"--target", "a=http://x"}, true},
		{[]string{"-target=a=http://x"}, true},
		{[]string{"--compare", "a.json", "b.json"}, true},
		{[]string{"--upstream", "builtin"}, true},
		{[]string{"--from", "r.json"}, true},
		{[]string{"--gateway-env", "target=1"}, false},
		{[]string{"--", "--target"}, false},
	} {
		if got := wantsTargets(tc.args); got != tc.want {
			t.Errorf("wantsTargets(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestRedactArgs(t *testing.T) {
	got := redactArgs([]string{"--header", "a=Authorization:Bearer sk-1", "--header=b=X-Key:sk-2", "--target", "c=https://u:sk-3@h/v1", "--target", "d=http://h/?key=sk-4", "--target=e=http://user:sk-5@h/v1", "--target=f=http://h/v1?key=sk-6", "--model", "a=m"})
	for _, a := range got {
		for _, k := range []string{"sk-1", "sk-2", "sk-3", "sk-4", "sk-5", "sk-6"} {
			if strings.Contains(a, k) {
				t.Errorf("redactArgs left %q in %q", k, a)
			}
		}
	}
	if got[len(got)-1] != "a=m" || got[1] != "a=Authorization:[redacted]" {
		t.Errorf("redactArgs = %q", got)
	}
}
