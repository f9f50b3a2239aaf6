package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The tables of docs/compatibility.md follow one convention: each has a
// "proof" column naming the test functions behind the row, in backticks,
// each group followed by its package in backticks when the name alone is
// ambiguous ("`TestA`, `TestB` (`internal/gateway`)"). Names after "gap:"
// are gap tests: they assert what firstword does not do yet, so closing
// the gap fails them, and their failure message names compatibility.md.

// compatDoc is the document whose table claims are checked.
const compatDoc = "docs/compatibility.md"

// gapWords mark a claim that something is missing: a row holding one (left
// of its proof column) must name a gap test.
var gapWords = []string{"not yet", "not supported", "unsupported"}

var (
	testNameRE = regexp.MustCompile(`^(Test|Benchmark|Fuzz)([A-Z0-9_][A-Za-z0-9_]*)?$`)
	pkgPathRE  = regexp.MustCompile(`^(internal|cmd|scripts)(/[A-Za-z0-9_.-]+)*$`)
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
)

// testFunc is one test function of the repository.
type testFunc struct {
	dir string // its package's directory, relative to the root, with slashes
	// namesDoc: a string literal of its body names compatDoc's file name,
	// as a gap test's failure message must.
	namesDoc bool
}

// testIndex maps a test function's name to every package declaring it.
type testIndex map[string][]testFunc

var repoTestIndex struct {
	once sync.Once
	idx  testIndex
	err  error
}

// repoTests indexes the Test, Benchmark and Fuzz functions of every
// *_test.go file of the repository (parsed, not grepped: a name in a
// comment or a string is no test).
func repoTests(t *testing.T) testIndex {
	t.Helper()
	root := repoRoot(t)
	repoTestIndex.once.Do(func() {
		repoTestIndex.idx, repoTestIndex.err = indexTests(root)
	})
	if repoTestIndex.err != nil {
		t.Fatal(repoTestIndex.err)
	}
	return repoTestIndex.idx
}

func indexTests(root string) (testIndex, error) {
	idx := testIndex{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !testNameRE.MatchString(fn.Name.Name) {
				continue
			}
			idx[fn.Name.Name] = append(idx[fn.Name.Name], testFunc{dir: filepath.ToSlash(rel), namesDoc: namesDoc(fn.Body)})
		}
		return nil
	})
	if len(idx) < 100 {
		return nil, fmt.Errorf("found %d test functions under %s; the index is broken (%v)", len(idx), root, err)
	}
	return idx, err
}

// namesDoc reports whether a string literal of body names compatDoc.
func namesDoc(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.Contains(lit.Value, filepath.Base(compatDoc)) {
			found = true
		}
		return !found
	})
	return found
}

// mdTable is one table of a Markdown file.
type mdTable struct {
	line   int // the header's line
	header []string
	rows   []mdRow
}

type mdRow struct {
	line  int
	cells []string
}

// parseTables returns the tables of a Markdown file outside code blocks:
// a header line starting with "|", a delimiter line of dashes, and the
// rows under them. Cells are split on unescaped "|" (GitHub needs "\|"
// even inside a code span) and trimmed; "\|" becomes "|".
func parseTables(src string) []mdTable {
	var out []mdTable
	lines := strings.Split(src, "\n")
	inCode := false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode || !strings.HasPrefix(line, "|") || i+1 >= len(lines) || !isDelimiter(lines[i+1]) {
			continue
		}
		tb := mdTable{line: i + 1, header: splitRow(line)}
		i += 2
		for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
			tb.rows = append(tb.rows, mdRow{line: i + 1, cells: splitRow(strings.TrimSpace(lines[i]))})
		}
		i--
		out = append(out, tb)
	}
	return out
}

var delimiterRE = regexp.MustCompile(`^\|?(\s*:?-+:?\s*\|)+\s*(:?-+:?\s*)?$`)

func isDelimiter(line string) bool { return delimiterRE.MatchString(strings.TrimSpace(line)) }

func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// proof is one test a proof cell names.
type proof struct {
	name string
	pkg  string // "" when the cell names none
	gap  bool
}

// parseProof reads a proof cell: test names in code spans; a code span
// holding a package path names the package of every test since the
// previous path; everything after "gap:" is a gap test.
func parseProof(cell string) []proof {
	var out []proof
	gapAt := strings.Index(cell, "gap:")
	from := 0 // the first proof the next package path applies to
	for _, m := range codeSpanRE.FindAllStringSubmatchIndex(cell, -1) {
		span := cell[m[2]:m[3]]
		switch {
		case testNameRE.MatchString(span):
			out = append(out, proof{name: span, gap: gapAt >= 0 && m[0] > gapAt})
		case pkgPathRE.MatchString(span):
			for i := from; i < len(out); i++ {
				out[i].pkg = span
			}
			from = len(out)
		}
	}
	return out
}

// checkClaims checks the tables of a Markdown file against the tests of
// idx and returns one message per problem, "FILE:LINE: ...".
func checkClaims(file, src string, idx testIndex) []string {
	var problems []string
	bad := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", file, line)+fmt.Sprintf(format, args...))
	}
	tables := parseTables(src)
	if len(tables) == 0 {
		bad(1, "no table found")
	}
	for _, tb := range tables {
		col := -1
		for i, h := range tb.header {
			if strings.EqualFold(h, "proof") {
				col = i
			}
		}
		if col < 0 {
			bad(tb.line, "the table has no proof column: name the tests behind each row in one")
			continue
		}
		for _, row := range tb.rows {
			if col >= len(row.cells) {
				bad(row.line, "the row has %d cells, and no proof cell", len(row.cells))
				continue
			}
			claim := strings.ToLower(strings.Join(row.cells[:col], " "))
			proofs := parseProof(row.cells[col])
			if len(proofs) == 0 {
				bad(row.line, "the claim names no test: put the TestXxx functions behind it in its proof cell")
			}
			gaps := 0
			for _, p := range proofs {
				if p.gap {
					gaps++
				}
				problems = append(problems, checkProof(file, row.line, p, idx)...)
			}
			for _, w := range gapWords {
				if strings.Contains(claim, w) && gaps == 0 {
					bad(row.line, "the claim says %q but names no gap test (\"gap: `TestXxx`\") asserting what is missing", w)
					break
				}
			}
		}
	}
	return problems
}

// checkProof checks that the test p names exists, in its package when one
// is named, unambiguously when none is, and that a gap test's failure
// message names the document.
func checkProof(file string, line int, p proof, idx testIndex) []string {
	where := fmt.Sprintf("%s:%d: ", file, line)
	funcs := idx[p.name]
	var dirs []string
	for _, f := range funcs {
		dirs = append(dirs, f.dir)
	}
	sort.Strings(dirs)
	var found *testFunc
	switch {
	case len(funcs) == 0:
		return []string{where + fmt.Sprintf("%s: no such test function in the repository's *_test.go files", p.name)}
	case p.pkg != "":
		for i := range funcs {
			if funcs[i].dir == p.pkg {
				found = &funcs[i]
			}
		}
		if found == nil {
			return []string{where + fmt.Sprintf("%s is not in %s (it is in %s)", p.name, p.pkg, strings.Join(dirs, ", "))}
		}
	case len(funcs) > 1:
		return []string{where + fmt.Sprintf("%s is in %s: name its package after it", p.name, strings.Join(dirs, ", "))}
	default:
		found = &funcs[0]
	}
	if p.gap && !found.namesDoc {
		return []string{where + fmt.Sprintf("gap test %s (%s): its failure message must name %s, so that closing the gap sends the reader to the claim", p.name, found.dir, filepath.Base(compatDoc))}
	}
	return nil
}

// TestCompatibilityClaims checks every table of docs/compatibility.md:
// each row names, in its proof column, test functions that exist; a row
// saying "not yet" or "not supported" names a gap test, and each gap
// test's failure message names the document.
func TestCompatibilityClaims(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot(t), compatDoc))
	if err != nil {
		t.Fatal(err)
	}
	tables := parseTables(string(src))
	rows := 0
	for _, tb := range tables {
		rows += len(tb.rows)
	}
	if len(tables) < 4 || rows < 30 {
		t.Fatalf("%s: found %d tables with %d rows; the table parser is broken", compatDoc, len(tables), rows)
	}
	for _, p := range checkClaims(compatDoc, string(src), repoTests(t)) {
		t.Error(p)
	}
}

// TestCheckClaims runs checkClaims over the samples in testdata/claims,
// with the repository's own tests as the index: a sample's problems must
// match its want, one regular expression per problem, in order.
func TestCheckClaims(t *testing.T) {
	idx := repoTests(t)
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"good.md", nil},
		{"missing_test.md", []string{`^missing_test.md:5: TestDoesNotExist: no such test function`}},
		{"no_test.md", []string{`^no_test.md:5: the claim names no test`}},
		{"no_proof_column.md", []string{`^no_proof_column.md:3: the table has no proof column`}},
		{"wrong_package.md", []string{`^wrong_package.md:5: TestCheckClaims is not in internal/gateway \(it is in internal/doccheck\)`}},
		{"ambiguous.md", []string{`^ambiguous.md:5: TestMain is in (internal/[a-z/]+, )+internal/[a-z/]+: name its package`}},
		{"gap_without_test.md", []string{`^gap_without_test.md:5: the claim says "not yet" but names no gap test`}},
		{"gap_test_silent.md", []string{`^gap_test_silent.md:5: gap test TestParseTables \(internal/doccheck\): its failure message must name compatibility.md`}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "claims", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got := checkClaims(tc.file, string(src), idx)
			if len(got) != len(tc.want) {
				t.Fatalf("checkClaims = %q, want %d problems matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(got[i]) {
					t.Errorf("problem %q, want one matching %q", got[i], w)
				}
			}
		})
	}
}

func TestParseProof(t *testing.T) {
	for _, tc := range []struct {
		cell string
		want []proof
	}{
		{"`TestA`, `TestB` (`internal/gateway`), `TestC` (`internal/router`)",
			[]proof{{"TestA", "internal/gateway", false}, {"TestB", "internal/gateway", false}, {"TestC", "internal/router", false}}},
		{"`TestA`; gap: `TestB` (`internal/doccheck`)",
			[]proof{{"TestA", "internal/doccheck", false}, {"TestB", "internal/doccheck", true}}},
		{"`BenchmarkHandler` (`internal/httpapi`), `go test -run TestX ./x/`, `Testify`, `TestQuickstart`",
			[]proof{{"BenchmarkHandler", "internal/httpapi", false}, {"TestQuickstart", "", false}}},
		{"measured with `firstword levers`", nil},
	} {
		got := parseProof(tc.cell)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("parseProof(%q) = %v, want %v", tc.cell, got, tc.want)
		}
	}
}

func TestParseTables(t *testing.T) {
	src := "# T\n\n| a | b |\n|---|:-:|\n| `x\\|y` | 2 |\n| 3 | |\n\ntext | not a table\n\n```\n| in | code |\n|---|---|\n```\n"
	got := parseTables(src)
	if len(got) != 1 {
		t.Fatalf("parseTables = %+v, want one table", got)
	}
	tb := got[0]
	if tb.line != 3 || fmt.Sprint(tb.header) != "[a b]" || len(tb.rows) != 2 ||
		tb.rows[0].line != 5 || fmt.Sprintf("%q", tb.rows[0].cells) != `["`+"`x|y`"+`" "2"]` || fmt.Sprintf("%q", tb.rows[1].cells) != `["3" ""]` {
		t.Errorf("parseTables = %+v", tb)
	}
}
