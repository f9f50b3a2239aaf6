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
	wrongTypeRE    = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+) `(.*)` into ([\\w.*\\[\\]]+)$")
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
			msg := fmt.Sprintf("line %d: %s: unknown key", line, keyPath(root, line, m[2], true))
			if s := typo.Nearest(m[2], fieldNames(m[3])); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
			out = append(out, msg)
			continue
		}
		if m := wrongTypeRE.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			out = append(out, fmt.Sprintf("line %d: %s: %s, not %s", line, keyPath(root, line, m[3], false), want(m[4]), quoteValue(m[3], m[2])))
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
	return strconv.Quote(v)
}

// keyPath finds, in the document, the key named key on line (or, with
// isKey false, the key whose scalar value on line is key) and returns its
// dotted path ("models.chat.timeout", list items as [i]); the bare key if
// it is not found.
func keyPath(root *yaml.Node, line int, key string, isKey bool) string {
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
				if isKey && k.Line == line && k.Value == key ||
					!isKey && v.Kind == yaml.ScalarNode && v.Line == line && v.Value == key ||
					!isKey && v.Kind != yaml.ScalarNode && v.Line == line && k.Line == line {
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
				if !isKey && c.Kind == yaml.ScalarNode && c.Line == line && c.Value == key {
					return true
				}
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

// syntaxError rewrites the YAML parser's syntax error for a person: the
// parser's own errors count lines from 0 (its scanner's from 1), and an
// unclosed { or [ is reported where the parser gave up, not where it was
// opened.
func syntaxError(msg string, src []byte) string {
	m := regexp.MustCompile(`^line (\d+): (.*)$`).FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	text := m[2]
	if strings.HasPrefix(text, "found character that cannot start any token") {
		if lines := strings.Split(string(src), "\n"); line <= len(lines) && strings.Contains(lines[line-1], "\t") {
			return msg + ": YAML indents with spaces, not tabs"
		}
	}
	if !strings.HasPrefix(text, "did not find expected") {
		return msg
	}
	line++
	for _, c := range []struct{ open, close byte }{{'{', '}'}, {'[', ']'}} {
		if !strings.HasSuffix(text, fmt.Sprintf("',' or '%c'", c.close)) {
			continue
		}
		if at := unclosed(src, c.open, c.close, line); at > 0 {
			return fmt.Sprintf("line %d: this '%c' is not closed: end it with '%c' on the same line, or write the section as indented lines", at, c.open, c.close)
		}
	}
	if text == "did not find expected key" {
		text += " (check this line's indentation against the lines above it)"
	}
	return fmt.Sprintf("line %d: %s", line, text)
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
