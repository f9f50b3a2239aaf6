package deploytest

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's top directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// instruction is one Dockerfile instruction: its keyword in upper case
// and the rest of its (continued) line.
type instruction struct {
	Cmd, Args string
}

// stage is one FROM and the instructions after it.
type stage struct {
	From, Name string
	Body       []instruction
}

// parseDockerfile reads the instructions of a Dockerfile, joining lines
// continued with a backslash and dropping comments, grouped by stage.
func parseDockerfile(t *testing.T, b []byte) []stage {
	t.Helper()
	var stages []stage
	var cont string
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cont == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cont += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		full := cont + trimmed
		cont = ""
		cmd, args, _ := strings.Cut(full, " ")
		in := instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			s := stage{From: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.Name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.Cmd != "ARG" {
				t.Fatalf("Dockerfile: %s before the first FROM", in.Cmd)
			}
			continue
		}
		stages[len(stages)-1].Body = append(stages[len(stages)-1].Body, in)
	}
	return stages
}

func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.Body {
		if in.Cmd == cmd {
			out = append(out, in.Args)
		}
	}
	return out
}

// The builder stage's build step: the script, with the stamps, into /out.
const builderRun = `VERSION="$VERSION" COMMIT="$COMMIT" deploy/docker/build-stage.sh /out`

// TestDockerfile: the builder stage builds with deploy/docker/build-stage.sh
// and nothing else, and the final stage is the empty base with the
// script's output, run as uid 65532 with firstword serve as the entry point.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, b)
	if len(stages) != 2 {
		t.Fatalf("Dockerfile has %d stages, want 2 (builder, final)", len(stages))
	}
	builder, final := stages[0], stages[1]
	if builder.Name != "builder" || !strings.HasPrefix(builder.From, "golang:") {
		t.Errorf("first stage is FROM %s AS %q, want a golang image AS builder", builder.From, builder.Name)
	}
	// The Go version of the builder image is go.mod's.
	gomod, err := os.ReadFile(filepath.Join(root(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(gomod), "\n") {
		if v, ok := strings.CutPrefix(line, "go "); ok && !strings.HasPrefix(builder.From, "golang:"+v+"-") {
			t.Errorf("builder is FROM %s; go.mod says go %s", builder.From, v)
		}
	}
	runs := builder.all("RUN")
	if len(runs) != 2 || runs[0] != "go mod download" || runs[1] != builderRun {
		t.Errorf("builder stage RUNs %q, want [\"go mod download\" %q]: the script is the build", runs, builderRun)
	}
	if final.From != "scratch" {
		t.Errorf("final stage is FROM %s, want scratch", final.From)
	}
	if got := final.all("RUN"); len(got) != 0 {
		t.Errorf("final stage RUNs %q; it has no shell", got)
	}
	for _, copy := range final.all("COPY") {
		var from bool
		var paths []string
		for _, f := range strings.Fields(copy) {
			if f == "--from=builder" {
				from = true
			} else if !strings.HasPrefix(f, "--") {
				paths = append(paths, f)
			}
		}
		if !from || len(paths) != 2 || !strings.HasPrefix(paths[0], "/out/") {
			t.Errorf("final stage COPY %s: want only the script's output (--from=builder /out/...)", copy)
		}
	}
	if got := final.all("USER"); len(got) != 1 || got[0] != "65532:65532" {
		t.Errorf("final stage USER %q, want 65532:65532", got)
	}
	if got := final.all("EXPOSE"); len(got) != 1 || got[0] != "8080" {
		t.Errorf("final stage EXPOSE %q, want 8080", got)
	}
	var entry, cmd []string
	if got := final.all("ENTRYPOINT"); len(got) != 1 || json.Unmarshal([]byte(got[0]), &entry) != nil {
		t.Fatalf("final stage ENTRYPOINT %q, want one JSON array", got)
	}
	if got := final.all("CMD"); len(got) != 1 || json.Unmarshal([]byte(got[0]), &cmd) != nil {
		t.Fatalf("final stage CMD %q, want one JSON array", got)
	}
	if strings.Join(entry, " ") != "/usr/local/bin/firstword serve" || len(cmd) != 2 || cmd[0] != "--config" {
		t.Errorf("ENTRYPOINT %q CMD %q, want firstword serve --config FILE", entry, cmd)
	}
}

// TestBuildStage runs the builder stage's script as a plain shell script
// and checks what it lays out for the final stage: a static binary that
// prints the stamped version, CA certificates, and a passwd naming the
// Dockerfile's user. Where buildah is installed, it then builds the image
// from that output and checks the image's config and files.
func TestBuildStage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestBuildStage builds the binary")
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
		t.Skipf("the script copies the build machine's CA certificates: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command("deploy/docker/build-stage.sh", out)
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7-test", "COMMIT=0123456789abcdef0123456789abcdef01234567")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-stage.sh: %v\n%s", err, b)
	}
	bin := filepath.Join(out, "rootfs/usr/local/bin/firstword")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: not static, it cannot run on the empty base", bin)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s has a symbol table: -ldflags -s is missing", bin)
	}
	if s := f.Section(".debug_info"); s != nil {
		t.Errorf("%s has DWARF: -ldflags -w is missing", bin)
	}
	version, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	if want := "firstword v9.8.7-test (commit 0123456789ab, "; !strings.HasPrefix(string(version), want) {
		t.Errorf("firstword version = %q, want it to begin %q", version, want)
	}
	certs, err := os.ReadFile(filepath.Join(out, "rootfs/etc/ssl/certs/ca-certificates.crt"))
	if err != nil || !bytes.Contains(certs, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("CA certificates: %v, %d bytes", err, len(certs))
	}
	passwd, err := os.ReadFile(filepath.Join(out, "rootfs/etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), "\nnonroot:x:65532:65532:") {
		t.Errorf("etc/passwd = %q, %v; want the user 65532", passwd, err)
	}
	for _, dir := range []string{"data", "rootfs/tmp"} {
		if fi, err := os.Stat(filepath.Join(out, dir)); err != nil || !fi.IsDir() {
			t.Errorf("/%s: %v; the final stage copies it", dir, err)
		}
	}
	t.Run("image", func(t *testing.T) { checkImage(t, filepath.Dir(out)) })
}
