package doccheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The firstword binary, built once for every test of the package.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// firstwordBinary builds cmd/firstword (once) and returns its path.
func firstwordBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "doccheck-bin-")
		if built.err != nil {
			return
		}
		path := filepath.Join(built.dir, "firstword")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/firstword/firstword/cmd/firstword")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.path = path
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// Bounds: every command the docs show ends within commandTimeout, and a
// server answers /readyz within readyTimeout and exits within stopTimeout
// of SIGTERM.
const (
	commandTimeout = 60 * time.Second
	readyTimeout   = 20 * time.Second
	stopTimeout    = 15 * time.Second
)

// documentedAddr is where the docs say a gateway listens when neither the
// command nor the config says otherwise.
const documentedAddr = "127.0.0.1:8080"

// session runs one document's commands in order, as a reader would in one
// shell: in its own directory (so ./firstword.db is its own), with the
// variables its export lines set, and with the servers its serve lines
// started still running for the commands after them. A documented
// address (127.0.0.1:8080) is replaced by a free loopback port, in the
// server's --addr and in every later command, so that sessions never
// collide with each other or with anything else on the machine.
type session struct {
	t       *testing.T
	bin     string
	dir     string
	env     map[string]string
	addrs   map[string]string // documented address → the one actually used
	servers []*server
	// rewriteYAML, when set, changes a named YAML block before it is saved
	// (the quickstart test points base_url at its fake upstream).
	rewriteYAML func(name, text string) string
	// ran lists the commands run, for the test log.
	ran []string
}

// server is a background firstword process: serve or sim.
type server struct {
	cmd    *exec.Cmd
	args   []string
	url    string
	stderr *syncBuffer
	done   chan struct{}
	err    error // the process's exit, once done is closed
}

func newSession(t *testing.T) *session {
	t.Helper()
	s := &session{t: t, bin: firstwordBinary(t), dir: t.TempDir(), env: map[string]string{}, addrs: map[string]string{}}
	t.Cleanup(s.stopAll)
	return s
}

// environ is the environment commands run with: nothing of the test's own
// (no real provider key can leak in) but PATH, plus the session's exports.
func (s *session) environ() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "TMPDIR=" + s.dir}
	keys := make([]string, 0, len(s.env))
	for k := range s.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.env[k])
	}
	return env
}

// writeYAML saves a named YAML block in the session's directory.
func (s *session) writeYAML(b block) {
	s.t.Helper()
	name := fileName(b.text)
	if name == "" {
		return
	}
	text := b.text
	if s.rewriteYAML != nil {
		text = s.rewriteYAML(name, text)
	}
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

var exitsRE = regexp.MustCompile(`\bexits (\d+)\b`)
var exportSubstRE = regexp.MustCompile(`^export ([A-Za-z_][A-Za-z0-9_]*)=\$\((.*)\)\s*(#.*)?$`)

// runBlock runs the firstword commands of a sh block, in order. Lines
// that are not firstword commands (curl, go test, make...) are left out:
// this test checks firstword's own command lines. It reports whether it
// ran any.
func (s *session) runBlock(b block) bool {
	s.t.Helper()
	any := false
	for _, line := range commandLines(b.text) {
		if s.runLine(b, line) {
			any = true
		}
	}
	return any
}

func (s *session) runLine(b block, line string) bool {
	s.t.Helper()
	trimmed := strings.TrimSpace(line)
	if trimmed == "" || strings.HasPrefix(trimmed, "#") {
		return false
	}
	// export NAME=$(firstword ...): run it, keep its output.
	if m := exportSubstRE.FindStringSubmatch(trimmed); m != nil {
		args, _, err := words(m[2], s.getenv)
		if err != nil {
			s.t.Fatalf("%s: %v", b, err)
		}
		fw, ok := firstwordArgs(args)
		if !ok {
			s.t.Fatalf("%s: %q: only $(firstword ...) is run", b, line)
		}
		out := s.run(b, fw, 0)
		s.env[m[1]] = strings.TrimSpace(out)
		return true
	}
	args, comment, err := words(trimmed, s.getenv)
	if err != nil {
		s.t.Fatalf("%s: %v", b, err)
	}
	if len(args) == 0 {
		return false
	}
	if args[0] == "export" {
		for _, a := range args[1:] {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				s.t.Fatalf("%s: export %q: want NAME=VALUE", b, a)
			}
			s.env[k] = v
		}
		return false
	}
	fw, ok := firstwordArgs(args)
	if !ok {
		return false
	}
	want := 0
	if m := exitsRE.FindStringSubmatch(comment); m != nil {
		want, _ = strconv.Atoi(m[1])
	}
	if want == 0 && len(fw) > 0 && (fw[0] == "serve" || fw[0] == "sim") && !hasHelp(fw) {
		s.start(b, fw)
		return true
	}
	s.run(b, fw, want)
	return true
}

// firstwordArgs returns the arguments of a firstword command line, written
// as "firstword ..." or "go run ./cmd/firstword ...".
func firstwordArgs(args []string) ([]string, bool) {
	switch {
	case len(args) >= 1 && args[0] == "firstword":
		return args[1:], true
	case len(args) >= 3 && args[0] == "go" && args[1] == "run" && strings.TrimSuffix(args[2], "/") == "./cmd/firstword":
		return args[3:], true
	}
	return nil, false
}

func hasHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

func (s *session) getenv(k string) string { return s.env[k] }

// rewrite replaces documented addresses in a command's arguments with the
// ones the session's servers actually use, and points budget at the
// session's gateway when the command names none.
func (s *session) rewrite(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for doc, real := range s.addrs {
			a = strings.ReplaceAll(a, doc, real)
			if host, port, ok := strings.Cut(doc, ":"); ok && host == "127.0.0.1" {
				a = strings.ReplaceAll(a, "localhost:"+port, real)
			}
		}
		out[i] = a
	}
	if len(out) > 0 && out[0] == "budget" && !hasFlag(out, "server") {
		if real, ok := s.addrs[documentedAddr]; ok {
			out = append(out, "--server", "http://"+real)
		}
	}
	return out
}

// hasFlag reports whether args set the flag name, as -name or --name,
// with or without =value.
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// run runs a command to its end and checks its exit status.
func (s *session) run(b block, args []string, want int) string {
	s.t.Helper()
	args = s.rewrite(args)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir, cmd.Env = s.dir, s.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	got := 0
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		s.t.Fatalf("%s: firstword %s did not end within %s\nstderr: %s", b, strings.Join(args, " "), commandTimeout, stderr.String())
	case errors.As(err, &exit):
		got = exit.ExitCode()
	case err != nil:
		s.t.Fatalf("%s: firstword %s: %v", b, strings.Join(args, " "), err)
	}
	s.ran = append(s.ran, fmt.Sprintf("%s: firstword %s → exit %d", b, strings.Join(args, " "), got))
	if got != want {
		s.t.Errorf("%s: firstword %s exited %d, want %d (annotate the line \"# exits N\" if it is meant to fail)\nstdout: %s\nstderr: %s",
			b, strings.Join(args, " "), got, want, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// start starts serve or sim in the background, on a free loopback port
// standing in for the documented one, and waits until it answers.
func (s *session) start(b block, args []string) *server {
	s.t.Helper()
	doc := documentedAddr
	if args[0] == "sim" {
		doc = "127.0.0.1:9000" // sim's default
	}
	rest := []string{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--addr" || a == "-addr":
			if i+1 < len(args) {
				doc = args[i+1]
				i++
			}
			continue
		case strings.HasPrefix(a, "--addr=") || strings.HasPrefix(a, "-addr="):
			_, doc, _ = strings.Cut(a, "=")
			continue
		}
		rest = append(rest, a)
	}
	// A second server on the same documented address replaces the first,
	// as it would have to in a reader's shell.
	for _, old := range s.servers {
		if old.url == "http://"+s.addrs[doc] {
			s.stop(old)
		}
	}
	probePath := "/readyz"
	if args[0] == "sim" {
		probePath = "/v1/models"
	}
	// The free port is found by listening and closing; should something
	// else take it before the server does, try another.
	for attempt := 1; ; attempt++ {
		real := freeAddr(s.t)
		s.addrs[doc] = real
		full := append([]string{args[0]}, s.rewrite(rest)...)
		full = append(full, "--addr", real)
		srv := &server{args: full, url: "http://" + real, stderr: &syncBuffer{}, done: make(chan struct{})}
		srv.cmd = exec.Command(s.bin, full...)
		srv.cmd.Dir, srv.cmd.Env = s.dir, s.environ()
		srv.cmd.Stdout, srv.cmd.Stderr = srv.stderr, srv.stderr
		if err := srv.cmd.Start(); err != nil {
			s.t.Fatalf("%s: starting firstword %s: %v", b, strings.Join(full, " "), err)
		}
		go func() {
			srv.err = srv.cmd.Wait()
			close(srv.done)
		}()
		err := waitReady(srv.url+probePath, srv.done)
		if err == nil {
			// What answered must be this process, not another that holds
			// the port: one that could not listen exits at once.
			select {
			case <-srv.done:
				err = fmt.Errorf("exited after %s answered: something else listens on %s", probePath, real)
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err != nil && attempt < 3 && strings.Contains(srv.stderr.String(), "address already in use") {
			<-srv.done
			continue
		}
		s.servers = append(s.servers, srv)
		if err != nil {
			s.t.Fatalf("%s: firstword %s: %v\noutput: %s", b, strings.Join(full, " "), err, srv.stderr.String())
		}
		s.ran = append(s.ran, fmt.Sprintf("%s: firstword %s → ready", b, strings.Join(full, " ")))
		return srv
	}
}

// waitReady polls url until it answers 200, the process ends, or
// readyTimeout passes.
func waitReady(url string, done <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("exited before %s answered", url)
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer 200 within %s", url, readyTimeout)
}

// stop sends SIGTERM and waits for a clean exit.
func (s *session) stop(srv *server) {
	s.t.Helper()
	select {
	case <-srv.done:
	default:
		if runtime.GOOS == "windows" {
			srv.cmd.Process.Kill()
		} else {
			srv.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-srv.done:
		case <-time.After(stopTimeout):
			srv.cmd.Process.Kill()
			<-srv.done
			s.t.Errorf("firstword %s did not exit within %s of SIGTERM\noutput: %s", strings.Join(srv.args, " "), stopTimeout, srv.stderr.String())
			return
		}
	}
	if srv.err != nil {
		s.t.Errorf("firstword %s: %v after SIGTERM\noutput: %s", strings.Join(srv.args, " "), srv.err, srv.stderr.String())
	}
	for i, o := range s.servers {
		if o == srv {
			s.servers = append(s.servers[:i], s.servers[i+1:]...)
			break
		}
	}
}

func (s *session) stopAll() {
	for len(s.servers) > 0 {
		s.stop(s.servers[len(s.servers)-1])
	}
}

// url is the base URL of the server standing in for a documented address.
func (s *session) url(doc string) string {
	s.t.Helper()
	real, ok := s.addrs[doc]
	if !ok {
		s.t.Fatalf("no server was started for %s", doc)
	}
	return "http://" + real
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
