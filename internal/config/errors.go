package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/firstword/firstword/internal/typo"
)

// The decoder's messages, rewritten with the key's path and a hint.
var (
	unknownFieldRE = regexp.MustCompile("^line (\\d+): field (.+) not found in type ([\\w.*\\[\\]]+)$")
	wrongTypeRE    = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into ([\\w.*\\[\\]]+)$")
	lineRE         = regexp.MustCompile(`^line (\d+):`)
)

// explainTypeErrors turns the decoder's type errors into sentences that
// name the key by its path and say what to write: an unknown key gets the
// nearest known key of its section, a value of the wrong type an example
// of the right one.
func explainTypeErrors(te *yaml.TypeError, root *yaml.Node) []string {
	out := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := unknownFieldRE.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			msg := fmt.Sprintf("line %d: %s: unknown key", line, keyPath(root, line, m[2]))
			if s := typo.Nearest(m[2], fieldNames(m[3])); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
			out = append(out, msg)
			continue
		}
		if m := wrongTypeRE.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			out = append(out, fmt.Sprintf("line %d: %s: %s, not %s", line, valuePath(root, line, m[3]), want(m[4]), quoteValue(m[3], m[2])))
			continue
		}
		out = append(out, cleanYAMLError(fmt.Errorf("%s", e)))
	}
	return out
}

// want says what a value of Go type typ is written as.
func want(typ string) string {
	switch {
	case typ == "time.Duration":
		return "write a duration such as 20s or 500ms"
	case typ == "bool" || typ == "*bool":
		return "write true or false"
	case strings.Contains(typ, "int"):
		return "write a whole number"
	case strings.Contains(typ, "float"):
		return "write a number"
	case typ == "string" || typ == "*string":
		return "write text"
	case strings.HasPrefix(typ, "map[") || strings.HasPrefix(typ, "config.") || strings.HasPrefix(typ, "*config."):
		return "write a section (key: value lines below it)"
	case strings.HasPrefix(typ, "[]"):
		return "write a list"
	}
	return "write a " + typ
}

func quoteValue(v, tag string) string {
	switch tag {
	case "!!map":
		return "a section"
	case "!!seq":
		return "a list"
	}
	if s, ok := strings.CutSuffix(v, " ..."); ok {
		return strconv.Quote(s) + "..."
	}
	return strconv.Quote(v)
}

// valuePath returns the path of the key whose value starts on line: the
// one whose value is v (the decoder shortens a long one to its start and
// " ...") when several do, the first otherwise; "the value" if none does.
func valuePath(root *yaml.Node, line int, v string) string {
	short, cut := strings.CutSuffix(v, " ...")
	var paths []string
	var best string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, val := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if val.Line == line {
					paths = append(paths, p)
					if best == "" && val.Kind == yaml.ScalarNode && (val.Value == v || cut && strings.HasPrefix(val.Value, short)) {
						best = p
					}
				}
				walk(val, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	if root != nil {
		walk(root, "")
	}
	switch {
	case best != "":
		return best
	case len(paths) > 0:
		return paths[0]
	}
	return "the value"
}

// keyPath finds, in the document, the key named key on line and returns
// its dotted path ("models.chat.timeout", list items as [i]); the bare key
// if it is not found.
func keyPath(root *yaml.Node, line int, key string) string {
	if root == nil {
		return key
	}
	var path []string
	var walk func(n *yaml.Node) bool
	walk = func(n *yaml.Node) bool {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if walk(c) {
					return true
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				path = append(path, k.Value)
				if k.Line == line && k.Value == key {
					return true
				}
				if walk(v) {
					return true
				}
				path = path[:len(path)-1]
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				path = append(path, fmt.Sprintf("[%d]", i))
				if walk(c) {
					return true
				}
				path = path[:len(path)-1]
			}
		}
		return false
	}
	if !walk(root) {
		return key
	}
	return strings.ReplaceAll(strings.Join(path, "."), ".[", "[")
}

// fieldNames returns the YAML keys of the config type named typ ("config.Model"),
// read from the struct tags, so that keys added later are suggested too.
func fieldNames(typ string) []string {
	typ = strings.TrimLeft(typ, "*")
	var names []string
	seen := map[reflect.Type]bool{}
	var visit func(t reflect.Type) bool
	visit = func(t reflect.Type) bool {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return false
		}
		seen[t] = true
		if t.String() == typ {
			names = yamlKeys(t)
			return true
		}
		for f := range t.Fields() {
			if visit(f.Type) {
				return true
			}
		}
		return false
	}
	visit(reflect.TypeFor[Config]())
	return names
}

// yamlKeys lists a struct's YAML keys, those of inlined structs included.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported():
		case strings.Contains(opts, "inline"):
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				keys = append(keys, yamlKeys(ft)...)
			}
		case name != "":
			keys = append(keys, name)
		default:
			keys = append(keys, strings.ToLower(f.Name))
		}
	}
	return keys
}

// byLine sorts problems by the line they start with ("line N: ..."),
// those without one last, keeping the order of those on the same line.
func byLine(errs []string) {
	num := func(s string) int {
		if m := lineRE.FindStringSubmatch(s); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
		return int(^uint(0) >> 1)
	}
	slices.SortStableFunc(errs, func(a, b string) int { return num(a) - num(b) })
}

// syntaxError rewrites the YAML parser's syntax error for a person, on
// the line to fix. The parser reports the line where the enclosing block
// or flow began (counted from 0 for its own errors, from 1 for its
// scanner's, and none on the first line), not where it failed: the line
// here is the first at which the document, cut after it, fails with the
// same error.
func syntaxError(msg string, src []byte) string {
	text, line := msg, 0
	if m := syntaxLineRE.FindStringSubmatch(msg); m != nil {
		text = m[2]
		line, _ = strconv.Atoi(m[1])
		if parserErrors[text] {
			line++
		}
	}
	if at := failingLine(src, text); at > 0 {
		line = at
	}
	where := ""
	if line > 0 {
		where = fmt.Sprintf("line %d: ", line)
	}
	lines := strings.Split(string(src), "\n")
	switch {
	case strings.Contains(text, "tab character") || strings.HasPrefix(text, "found character that cannot start any token") && line > 0 && line <= len(lines) && strings.Contains(lines[line-1], "\t"):
		return where + text + ": YAML indents with spaces, not tabs"
	case text == "did not find expected key":
		return where + text + " (check this line: its indentation against the lines above it, or text after a quoted value)"
	}
	for _, c := range []struct{ open, close byte }{{'{', '}'}, {'[', ']'}} {
		if !strings.HasSuffix(text, fmt.Sprintf("',' or '%c'", c.close)) {
			continue
		}
		if at := unclosed(src, c.open, c.close, max(line, 1)); at > 0 {
			return fmt.Sprintf("line %d: this '%c' is not closed: end it with '%c' on the same line, or write the section as indented lines", at, c.open, c.close)
		}
	}
	return where + text
}

var syntaxLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// parserErrors are the YAML parser's own messages, whose line it counts
// from 0 (its scanner's count from 1).
var parserErrors = map[string]bool{
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected <document start>": true,
}

// failingLine returns the first line n such that the document's first n
// lines fail to parse with the error text, or 0.
func failingLine(src []byte, text string) int {
	lines := strings.SplitAfter(string(src), "\n")
	if len(lines) > 2000 {
		return 0
	}
	var b strings.Builder
	for n, l := range lines {
		b.WriteString(l)
		var v any
		err := yaml.Unmarshal([]byte(b.String()), &v)
		if err == nil {
			continue
		}
		got := cleanYAMLError(err)
		if m := syntaxLineRE.FindStringSubmatch(got); m != nil {
			got = m[2]
		}
		if got == text {
			return n + 1
		}
	}
	return 0
}

// unclosed returns the last line up to upTo on which open is opened and
// not closed (outside quotes and comments), or 0.
func unclosed(src []byte, open, close byte, upTo int) int {
	found := 0
	for i, l := range strings.Split(string(src), "\n") {
		if i+1 > upTo {
			break
		}
		depth, quote := 0, byte(0)
		for j := 0; j < len(l); j++ {
			ch := l[j]
			switch {
			case quote != 0:
				if ch == quote {
					quote = 0
				}
			case ch == '"' || ch == '\'':
				quote = ch
			case ch == '#' && (j == 0 || l[j-1] == ' '):
				j = len(l)
			case ch == open:
				depth++
			case ch == close:
				depth--
			}
		}
		if depth > 0 {
			found = i + 1
		}
	}
	return found
}
