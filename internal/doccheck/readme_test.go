package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// helpCommands returns the commands `firstword help` lists under
// "Commands:", one per line ("  keys create  create an API key..."): the
// name's lower-case words ("help CMD" is help).
func helpCommands(usage string) []string {
	var out []string
	_, list, ok := strings.Cut(usage, "\nCommands:\n")
	if !ok {
		return nil
	}
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		name, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		if cmd := commandName(name); cmd != "" {
			out = append(out, cmd)
		}
	}
	sort.Strings(out)
	return out
}

var commandWordRE = regexp.MustCompile(`^[a-z][a-z-]*$`)

// commandName is the leading lower-case words of a usage such as
// "keys revoke [--config FILE] ID|PREFIX" ("keys revoke"); "" for a flag
// such as "--version".
func commandName(usage string) string {
	var words []string
	for _, w := range strings.Fields(usage) {
		if !commandWordRE.MatchString(w) {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// readmeCommands returns the commands of the README's command table (the
// first table under "## Commands"): every code span of its first column
// names one ("`keys list [--tenant ID]`, `keys revoke ...`").
func readmeCommands(src string) []string {
	_, after, ok := strings.Cut(src, "\n## Commands\n")
	if !ok {
		return nil
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	tables := parseTables(after)
	if len(tables) == 0 {
		return nil
	}
	var out []string
	for _, row := range tables[0].rows {
		for _, m := range codeSpanRE.FindAllStringSubmatch(row.cells[0], -1) {
			if cmd := commandName(m[1]); cmd != "" {
				out = append(out, cmd)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestREADMECommands: the README's command table lists exactly the
// commands `firstword help` lists.
func TestREADMECommands(t *testing.T) {
	out, err := exec.Command(firstwordBinary(t), "help").Output()
	if err != nil {
		t.Fatalf("firstword help: %v", err)
	}
	help := helpCommands(string(out))
	if len(help) < 5 {
		t.Fatalf("found %d commands in firstword help's output; the parser is broken:\n%s", len(help), out)
	}
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := readmeCommands(string(src))
	if len(readme) < 5 {
		t.Fatalf("found %d commands in the README's command table (## Commands); the parser is broken", len(readme))
	}
	inREADME := map[string]bool{}
	for _, c := range readme {
		inREADME[c] = true
	}
	inHelp := map[string]bool{}
	for _, c := range help {
		inHelp[c] = true
		if !inREADME[c] {
			t.Errorf("firstword help lists %q; the README's command table does not", c)
		}
	}
	for _, c := range readme {
		if !inHelp[c] {
			t.Errorf("the README's command table lists %q; firstword help does not", c)
		}
	}
}

func TestCommandLists(t *testing.T) {
	usage := "firstword: x\n\nUsage: firstword COMMAND [flags]\n\nCommands:\n" +
		"  serve        run it\n  keys create  create a key\n  keys rotate  replace a key\n  help CMD     print usage\n\nRun \"firstword help CMD\".\n"
	if got := strings.Join(helpCommands(usage), ","); got != "help,keys create,keys rotate,serve" {
		t.Errorf("helpCommands = %q", got)
	}
	readme := "# X\n\n## Commands\n\n| command | what |\n|---|---|\n" +
		"| `serve [--config FILE]` | run it |\n| `keys list [--tenant ID]`, `keys revoke [--config FILE] ID\\|PREFIX` | keys |\n" +
		"| `version` (or `--version`), `help [CMD]` | usage |\n\n## Next\n\n| command | what |\n|---|---|\n| `other` | no |\n"
	if got := strings.Join(readmeCommands(readme), ","); got != "help,keys list,keys revoke,serve,version" {
		t.Errorf("readmeCommands = %q", got)
	}
}
