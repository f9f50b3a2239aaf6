package config

import (
	"strings"
	"testing"
)

func TestModelsPassthrough(t *testing.T) {
	const base = "providers: {sim: {type: sim}}\nmodels: {chat: {deployments: [{provider: sim, model: small}]}}\n"
	for _, tc := range []struct {
		line, want, err string
	}{
		{"", "auto", ""},
		{"models_passthrough: auto\n", "auto", ""},
		{"models_passthrough: on\n", "on", ""}, // YAML 1.2: a string, not a boolean
		{"models_passthrough: off\n", "off", ""},
		{"models_passthrough: yes\n", "", `line 1: models_passthrough: want auto, on or off, got "yes"`},
	} {
		c, err := Parse("p.yaml", []byte(tc.line+base), noenv)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want %s", tc.line, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.line, err)
		case tc.err == "" && c.ModelsPassthrough != tc.want:
			t.Errorf("%q: %q, want %q", tc.line, c.ModelsPassthrough, tc.want)
		}
	}
	if c := Default(); c.ModelsPassthrough != "auto" {
		t.Errorf("built-in config: %q, want auto", c.ModelsPassthrough)
	}
}
