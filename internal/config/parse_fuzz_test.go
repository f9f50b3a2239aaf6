package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: any bytes give a config or an error naming the file, never
// a panic (the error paths walk the YAML tree and reparse prefixes of the
// document to find a syntax error's line).
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/errors/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("listen: 127.0.0.1:1\nmodels:\n  m: {deployments: [{provider: sim, model: small}]}\nproviders: {sim: {type: sim}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse("f.yaml", b, noenv)
		if err != nil && !strings.HasPrefix(err.Error(), "f.yaml") {
			t.Errorf("error %q does not name the file", err)
		}
		if err == nil && c == nil {
			t.Error("no config and no error")
		}
	})
}
