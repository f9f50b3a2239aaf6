package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// prose returns a Markdown file's lines outside code blocks, by number.
func prose(src string) map[int]string {
	out := map[int]string{}
	in := false
	for i, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			in = !in
			continue
		}
		if !in {
			out[i+1] = line
		}
	}
	return out
}

// anchors returns the link anchors of a Markdown file's headings, as
// GitHub makes them: lower case, punctuation dropped, spaces as hyphens, a
// repeated heading numbered.
func anchors(src string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(src) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocLinks checks every relative link of README.md and docs/*.md: the
// file it names exists, and so does the heading its #anchor names.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		lines := prose(string(src))
		for n, line := range lines {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := filepath.Join(root, f)
				if path != "" {
					file = filepath.Join(filepath.Dir(file), path)
				}
				b, err := os.ReadFile(file)
				if err != nil {
					if info, serr := os.Stat(file); serr == nil && info.IsDir() {
						continue
					}
					t.Errorf("%s:%d: link %s: %v", f, n, target, err)
					continue
				}
				if anchor != "" && strings.HasSuffix(file, ".md") && !anchors(string(b))[anchor] {
					t.Errorf("%s:%d: link %s: no heading with that anchor in %s", f, n, target, filepath.Base(file))
				}
			}
		}
	}
}

func TestAnchors(t *testing.T) {
	got := anchors("# Router: the lesson's incident\n## Gateway overhead: `firstword bench`\n```sh\n# not a heading\n```\n## Notes\n## Notes\n")
	for _, want := range []string{"router-the-lessons-incident", "gateway-overhead-firstword-bench", "notes", "notes-1"} {
		if !got[want] {
			t.Errorf("anchors() = %v, want %q among them", got, want)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("anchors() = %v: a comment in a code block is not a heading", got)
	}
}
