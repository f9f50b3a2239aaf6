// Command testreport turns `go test -json` into what `go test` prints
// without -v (a line per package, the output of failing tests and broken
// builds) and ends with every skipped test and the reason it gave:
//
//	skipped: TestFrozenRedis, TestCutRedis (./internal/cache/redis): FIRSTWORD_TEST_REDIS_URL not set ...
//
// (the tests of a package skipped for the same reason on one line).
// make test pipes go test into it under pipefail, so that make's status
// is go test's: testreport exits 0 even when tests failed (go test's
// status says so, and go run would add an "exit status 1" line), and 2
// only when it could not read its input.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
)

func main() {
	// An interrupt reaches go test too (same process group): keep
	// reading, so that what it prints on the way out is shown.
	signal.Ignore(os.Interrupt)
	if _, err := report(os.Stdin, os.Stdout, module("go.mod")); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
}

// module is the module path declared in a go.mod, or "" without one.
func module(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// event is a TestEvent (go doc test2json) or a BuildEvent (go help
// buildjson); Action tells them apart.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

type key struct{ pkg, test string }

// run is a top-level test and its subtests, held until it ends.
type run struct {
	names  []string            // the test and its subtests, as they started
	out    map[string][]string // each one's own output
	failed map[string]bool
}

// report copies r's events to w as go test would print them and then
// lists the skipped tests. It reports whether a test, package or build
// failed.
func report(r io.Reader, w io.Writer, module string) (failed bool, err error) {
	var (
		pkgOut  = map[string][]string{} // package-level output, until the package ends
		runs    = map[key]*run{}        // top-level tests that have not ended
		skipped []skip                  // in the order of their first test
	)
	short := func(pkg string) string {
		if module != "" && (pkg == module || strings.HasPrefix(pkg, module+"/")) {
			return "." + strings.TrimPrefix(pkg, module)
		}
		return pkg
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if !bytes.HasPrefix(line, []byte("{")) || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line) // not an event: an early error of go test
			continue
		}
		switch {
		case e.Action == "build-output":
			io.WriteString(w, e.Output)
			continue
		case e.Action == "build-fail":
			failed = true
			continue
		case e.Test == "":
			switch e.Action {
			case "output":
				pkgOut[e.Package] = append(pkgOut[e.Package], e.Output)
			case "pass", "skip":
				// A package that passed (or has no tests) shows its summary line only.
				for _, l := range pkgOut[e.Package] {
					if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "? ") {
						io.WriteString(w, l)
					}
				}
				delete(pkgOut, e.Package)
			case "fail":
				failed = true
				// Tests cut short (a panic, a timeout) never ended: show them whole.
				for k, r := range runs {
					if k.pkg == e.Package {
						for _, name := range r.names {
							write(w, r.out[name])
						}
						delete(runs, k)
					}
				}
				write(w, pkgOut[e.Package])
				delete(pkgOut, e.Package)
			}
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		k := key{e.Package, top}
		r := runs[k]
		if r == nil {
			r = &run{out: map[string][]string{}, failed: map[string]bool{}}
			runs[k] = r
		}
		if _, ok := r.out[e.Test]; !ok {
			r.names = append(r.names, e.Test)
			r.out[e.Test] = nil
		}
		switch e.Action {
		case "output":
			r.out[e.Test] = append(r.out[e.Test], e.Output)
		case "skip":
			skipped = addSkip(skipped, short(e.Package), e.Test, reason(r.out[e.Test]))
		case "fail":
			failed = true
			r.failed[e.Test] = true
		}
		if sub || (e.Action != "pass" && e.Action != "fail" && e.Action != "skip") {
			continue
		}
		// The top-level test ended. As go test without -v, show the
		// failed ones only, each under its --- FAIL line.
		if e.Action == "fail" {
			for _, name := range r.names {
				if r.failed[name] {
					writeFailure(w, name, r.out[name])
				}
			}
		}
		delete(runs, k)
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	fmt.Fprintln(w)
	if len(skipped) == 0 {
		fmt.Fprintln(w, "skipped: none")
	}
	for _, s := range skipped {
		fmt.Fprintf(w, "skipped: %s (%s): %s\n", strings.Join(s.tests, ", "), s.pkg, s.reason)
	}
	return failed, nil
}

// skip is the tests of a package skipped for one reason.
type skip struct {
	pkg, reason string
	tests       []string
}

func addSkip(skipped []skip, pkg, test, reason string) []skip {
	for i := range skipped {
		if skipped[i].pkg == pkg && skipped[i].reason == reason {
			skipped[i].tests = append(skipped[i].tests, test)
			return skipped
		}
	}
	return append(skipped, skip{pkg, reason, []string{test}})
}

// writeFailure prints a failed test as go test does without -v: its
// --- FAIL line, then what it logged, indented by its depth (-json's
// streamed output indents every test's lines as a top-level test's).
func writeFailure(w io.Writer, name string, out []string) {
	indent := strings.Repeat("    ", strings.Count(name, "/"))
	var logs []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "--- FAIL"):
			io.WriteString(w, indent+strings.TrimLeft(l, " "))
		case strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- "):
		default:
			logs = append(logs, l)
		}
	}
	for _, l := range logs {
		io.WriteString(w, indent+l)
	}
}

// write prints output without the lines that only -v shows.
func write(w io.Writer, out []string) {
	for _, l := range out {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "=== ") {
			continue
		}
		io.WriteString(w, l)
	}
}

// logLine is the start of a t.Log or t.Skip line: "    file_test.go:12: ".
var logLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// reason is the last thing a skipped test logged: its t.Skip message,
// its continuation lines (indented) joined, without a leading "skipped:".
// Unindented lines are the program's own output (a server's log on
// stderr), not the test's.
func reason(out []string) string {
	var last []string
	more := false
	for _, l := range out {
		t := strings.TrimSpace(l)
		switch {
		case t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- "):
			more = false
		case logLine.MatchString(l):
			last, more = []string{strings.TrimSpace(logLine.ReplaceAllString(l, ""))}, true
		case more && (l[0] == ' ' || l[0] == '\t'):
			last = append(last, t)
		default:
			more = false
		}
	}
	if last == nil {
		return "(no reason given)"
	}
	r := strings.Join(last, " ")
	if len(r) > len("skipped: ") && strings.EqualFold(r[:len("skipped: ")], "skipped: ") {
		r = r[len("skipped: "):]
	}
	return r
}
