package cli_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/cli"
)

// TestSimServesEveryDialect: firstword sim says where it listens and
// answers there in each upstream dialect; it stops when its context ends.
func TestSimServesEveryDialect(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- cli.Sim(ctx, &cli.Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: pw}, []string{"--addr", "127.0.0.1:0"})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	base := regexp.MustCompile(`http://[0-9.]+:[0-9]+`).FindString(line)
	if base == "" {
		t.Fatalf("no address in %q", line)
	}
	msg := `"hi [sim ttft=1ms gap=1ms tokens=3 think=2ms think_tps=2000]"`
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	for path, body := range map[string]string{
		"/v1/chat/completions": `{"model":"reasoner","stream":true,"messages":[{"role":"user","content":` + msg + `}]}`,
		"/v1/messages":         `{"model":"reasoner","max_tokens":100,"stream":true,"messages":[{"role":"user","content":` + msg + `}]}`,
		"/v1/responses":        `{"model":"reasoner","stream":true,"input":` + msg + `}`,
		"/v1beta/models/reasoner:streamGenerateContent?alt=sse": `{"contents":[{"parts":[{"text":` + msg + `}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`,
		"/api/chat": `{"model":"reasoner","messages":[{"role":"user","content":` + msg + `}]}`,
	} {
		resp, err := client.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	tr.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Sim returned %v, want nil once stopped", err)
	}
}
