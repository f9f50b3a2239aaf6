package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// block is one fenced code block of a Markdown file.
type block struct {
	file    string // relative to the repository root, e.g. "docs/config.md"
	line    int    // the opening fence's line
	lang    string // the fence's info string, first word: "yaml", "sh"...
	section string // the nearest heading above it
	text    string // the content, the fence's indentation removed
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// repoRoot is the repository root: tests run in the package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// docFiles lists README.md and docs/*.md, relative to the root.
func docFiles(t *testing.T) []string {
	t.Helper()
	md, err := filepath.Glob(filepath.Join(repoRoot(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, p := range md {
		files = append(files, filepath.Join("docs", filepath.Base(p)))
	}
	sort.Strings(files[1:])
	return files
}

// readBlocks returns the fenced code blocks of a Markdown file, in order.
func readBlocks(t *testing.T, rel string) []block {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return parseBlocks(rel, string(b))
}

func parseBlocks(rel, src string) []block {
	var (
		out     []block
		cur     *block
		indent  int
		body    []string
		section string
	)
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") {
				indent = len(line) - len(trimmed)
				lang, _, _ := strings.Cut(strings.TrimSpace(trimmed[3:]), " ")
				cur = &block{file: rel, line: i + 1, lang: lang, section: section}
				body = body[:0]
			} else if strings.HasPrefix(line, "#") {
				section = strings.TrimSpace(strings.TrimLeft(line, "#"))
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			cur.text = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
			continue
		}
		n := min(indent, len(line)-len(trimmed))
		body = append(body, line[n:])
	}
	return out
}

// isFragment reports whether a YAML block is marked as part of a config
// ("# fragment" on its first line), not a whole one.
func isFragment(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "# fragment")
}

var fileNameRE = regexp.MustCompile(`^#\s*([A-Za-z0-9_.-]+\.ya?ml)\s*$`)

// fileName is the name a YAML block asks to be saved as, from a first line
// such as "# firstword.yaml"; "" when it names none.
func fileName(text string) string {
	first, _, _ := strings.Cut(text, "\n")
	if m := fileNameRE.FindStringSubmatch(strings.TrimSpace(first)); m != nil {
		return m[1]
	}
	return ""
}

// commandLines splits a sh block into logical lines: a line ending in a
// backslash, or inside an open quote, continues on the next one.
func commandLines(text string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if cur.Len() > 0 {
			cur.WriteString("\n")
		}
		cur.WriteString(line)
		s := cur.String()
		if strings.HasSuffix(strings.TrimRight(s, " "), "\\") || openQuote(s) {
			continue
		}
		out = append(out, s)
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// openQuote reports whether s ends inside a quoted string.
func openQuote(s string) bool {
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q == 0 && c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			// A comment runs to the end of its line.
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return false
			}
			i += j
		case q == 0 && (c == '\'' || c == '"'):
			q = c
		case q == '"' && c == '\\':
			i++
		case c == q:
			q = 0
		case q == 0 && c == '\\':
			i++
		}
	}
	return q != 0
}

// words splits a command line as sh would split the simple lines docs
// hold: blanks separate words, single and double quotes group, a
// backslash escapes, $NAME and ${NAME} expand from env (not inside single
// quotes, and a backslash-newline joins lines), and a # that starts a word
// begins the comment, returned apart.
func words(line string, env func(string) string) (args []string, comment string, err error) {
	var cur strings.Builder
	inWord := false
	end := func() {
		if inWord {
			args = append(args, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	expand := func(s string) (int, string, error) {
		// s starts with '$'.
		if strings.HasPrefix(s, "$(") {
			return 0, "", fmt.Errorf("command substitution is only run as export NAME=$(firstword ...)")
		}
		if strings.HasPrefix(s, "${") {
			j := strings.IndexByte(s, '}')
			if j < 0 {
				return 0, "", fmt.Errorf("unterminated ${")
			}
			return j + 1, env(s[2:j]), nil
		}
		n := 1
		for n < len(s) && (s[n] == '_' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= 'a' && s[n] <= 'z' || n > 1 && s[n] >= '0' && s[n] <= '9') {
			n++
		}
		if n == 1 {
			return 1, "$", nil
		}
		return n, env(s[1:n]), nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			end()
		case c == '#' && !inWord:
			end()
			return args, strings.TrimSpace(line[i+1:]), nil
		case c == '\\' && i+1 < len(line):
			i++
			if line[i] != '\n' {
				cur.WriteByte(line[i])
				inWord = true
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, "", fmt.Errorf("unterminated ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				switch {
				case line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0:
					i++
					cur.WriteByte(line[i])
				case line[i] == '$':
					n, v, err := expand(line[i:])
					if err != nil {
						return nil, "", err
					}
					cur.WriteString(v)
					i += n - 1
				default:
					cur.WriteByte(line[i])
				}
			}
			if i >= len(line) {
				return nil, "", fmt.Errorf("unterminated \" in %q", line)
			}
			inWord = true
		case c == '$':
			n, v, err := expand(line[i:])
			if err != nil {
				return nil, "", err
			}
			cur.WriteString(v)
			i += n - 1
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	end()
	return args, "", nil
}

func TestParseBlocks(t *testing.T) {
	src := "# Title\n\n## Run\n\n```sh\nfirstword serve\n```\n\n- a list\n\n  ```json\n  {\"a\": 1}\n  ```\n"
	got := parseBlocks("x.md", src)
	if len(got) != 2 {
		t.Fatalf("parseBlocks = %d blocks, want 2: %+v", len(got), got)
	}
	if b := got[0]; b.lang != "sh" || b.line != 5 || b.section != "Run" || b.text != "firstword serve\n" {
		t.Errorf("block 0 = %+v", b)
	}
	if b := got[1]; b.lang != "json" || b.text != "{\"a\": 1}\n" {
		t.Errorf("block 1 = %+v", b)
	}
}

func TestWords(t *testing.T) {
	env := func(k string) string { return map[string]string{"KEY": "fw_x", "HOME": "/h"}[k] }
	for _, tc := range []struct {
		in, comment string
		want        []string
	}{
		{in: "firstword serve --config firstword.yaml", want: []string{"firstword", "serve", "--config", "firstword.yaml"}},
		{in: "firstword budget --key $KEY   # exits 1", want: []string{"firstword", "budget", "--key", "fw_x"}, comment: "exits 1"},
		{in: `firstword x "a b" 'c $KEY' "${HOME}/d" e\ f`, want: []string{"firstword", "x", "a b", "c $KEY", "/h/d", "e f"}},
		{in: "curl -N http://x \\\n  -d '{\"a\":\n 1}'", want: []string{"curl", "-N", "http://x", "-d", "{\"a\":\n 1}"}},
		{in: "a#b c", want: []string{"a#b", "c"}},
	} {
		got, comment, err := words(tc.in, env)
		if err != nil {
			t.Errorf("words(%q): %v", tc.in, err)
			continue
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || comment != tc.comment {
			t.Errorf("words(%q) = %q, %q; want %q, %q", tc.in, got, comment, tc.want, tc.comment)
		}
	}
	if lines := commandLines("a \\\n b\nc '\nd'\n# x\n"); len(lines) != 3 {
		t.Errorf("commandLines = %q, want 3 lines", lines)
	}
}
