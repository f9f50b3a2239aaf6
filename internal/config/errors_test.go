package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/errors/*.golden")

// TestErrorsGolden: a bad file's problems come sorted by line, each with
// its key's path and what to write; an unknown key with the nearest known
// one; a syntax error on the line a person would fix.
func TestErrorsGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/errors/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/errors/*.yaml")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(filepath.Base(f), b, noenv)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("got:\n%s\nwant (%s):\n%s", got, golden, want)
			}
		})
	}
}

// TestFieldNames: the keys suggested are read from the struct tags, of
// nested and inlined structs too.
func TestFieldNames(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want []string
	}{
		{"config.Model", []string{"first_token_timeout", "deployments", "max_tokens"}},
		{"*config.Model", []string{"timeout"}},
		{"config.Config", []string{"listen", "models", "providers"}},
		{"config.Tier", []string{"prefill_tokens_per_second", "thinking_time"}},
	} {
		got := fieldNames(tc.typ)
		for _, w := range tc.want {
			if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+w+" ") {
				t.Errorf("fieldNames(%s) = %v, want %s among them", tc.typ, got, w)
			}
		}
	}
	if got := fieldNames("config.NoSuch"); got != nil {
		t.Errorf("fieldNames of an unknown type = %v, want none", got)
	}
}
