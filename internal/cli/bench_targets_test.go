package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/firstword/firstword/internal/cli"
)

// openAITarget is a minimal Chat Completions stream that records the
// request headers it was sent.
func openAITarget(t *testing.T) (string, func() http.Header) {
	var mu sync.Mutex
	var last http.Header
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		last = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{" one", " two", " three"} {
			io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"`+c+`"},"finish_reason":null}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s.URL, func() http.Header { mu.Lock(); defer mu.Unlock(); return last }
}

// TestBenchTargetsKeepsKeys: the API key (from the environment) and a
// secret header reach the target, and appear nowhere in what bench
// prints or writes.
func TestBenchTargetsKeepsKeys(t *testing.T) {
	const key, secret = "sk-test-K3Y-never-shown", "s3cret-header-value"
	url, seen := openAITarget(t)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	getenv := func(k string) string {
		if k == "FW_BENCH_TEST_KEY" {
			return key
		}
		return ""
	}
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), []string{"bench", "--target", "a=" + url + "/v1/chat/completions", "--target", "b=" + url + "?api_key=" + key,
		"--api-key-env", "a=FW_BENCH_TEST_KEY", "--header", "a=X-Secret:" + secret, "--model", "a=gpt-test",
		"--requests", "4", "--rounds", "2", "--concurrency", "1,2", "--baseline", "b",
		"--json", jsonPath, "--html", htmlPath}, getenv, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	h := seen()
	if h.Get("Authorization") != "Bearer "+key || h.Get("X-Secret") != secret {
		t.Fatalf("the target got Authorization %q, X-Secret %q: the key was not sent", h.Get("Authorization"), h.Get("X-Secret"))
	}
	outputs := map[string][]byte{"stdout": stdout.Bytes(), "stderr": stderr.Bytes()}
	for _, p := range []string{jsonPath, htmlPath} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		outputs[filepath.Base(p)] = b
	}
	for name, b := range outputs {
		for _, s := range []string{key, secret, "K3Y"} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s contains %q", name, s)
			}
		}
	}
	if !strings.Contains(stdout.String(), "TTFW p50") || !bytes.Contains(outputs["r.json"], []byte(`"ttfw_ms"`)) || !bytes.Contains(outputs["r.html"], []byte("<svg")) {
		t.Errorf("no table, JSON or plots:\n%s", stdout.String())
	}
	if !bytes.Contains(outputs["r.json"], []byte(`X-Secret:[redacted]`)) {
		t.Errorf("the JSON's command line does not show the header redacted")
	}
}

func TestBenchTargetsRefusesRemote(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), []string{"bench", "--target", "far=https://203.0.113.9/v1/chat/completions", "--requests", "1"},
		os.Getenv, nil, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--allow-remote") {
		t.Errorf("exit %d, stderr %q: want a usage error naming --allow-remote", code, stderr.String())
	}
}

func TestBenchTargetsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--target", "a"},
		{"--target", "<b>=http://127.0.0.1:1"},
		{"--target", "a=http://127.0.0.1:1", "--model", "b=x"},
		{"--target", "a=http://127.0.0.1:1", "--surface", "a=grpc"},
		{"--target", "a=http://127.0.0.1:1", "--api-key-env", "a=FW_BENCH_UNSET_VAR"},
		{"--target", "a=http://127.0.0.1:1", "--concurrency", "1,x"},
		{"--target", "a=http://127.0.0.1:1", "--rate", "fast"},
		{"--target", "a=http://127.0.0.1:1", "--rate", "1e-300"},
		{"--target", "a=http://127.0.0.1:1", "--rate", "NaN"},
		{"--target", "a=http://127.0.0.1:1", "--rate", "Inf/s"},
		{"--target", "a=http://127.0.0.1:1", "--request-timeout", "0s"},
		{"--target", "a=http://127.0.0.1:1", "--request-timeout", "-1s"},
		{"--target", "a=http://127.0.0.1:1", "--fault-probes", "-1", "--upstream", "builtin"},
		{"--target", "a=http://127.0.0.1:1", "--cancel-wait", "0s", "--upstream", "builtin"},
		{"--target", "a=http://127.0.0.1:1", "--concurrency", "60", "--requests", "50"},
		{"--target", "a=http://127.0.0.1:1", "--upstream", "mine"},
		{"--compare", "only-one.json"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"bench"}, args...), func(string) string { return "" }, nil, &stdout, &stderr)
		if code != 2 || stderr.Len() == 0 {
			t.Errorf("bench %v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

func TestBenchCompare(t *testing.T) {
	url, _ := openAITarget(t)
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{"old.json", "new.json"} {
		p := filepath.Join(dir, name)
		var stdout, stderr bytes.Buffer
		if code := cli.Main(context.Background(), []string{"bench", "--target", "a=" + url, "--requests", "2", "--rounds", "1", "--json", p},
			os.Getenv, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		paths = append(paths, p)
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Main(context.Background(), []string{"bench", "--compare", paths[0], paths[1]}, os.Getenv, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	// No setting differs; a warning that the machine was busy may come
	// (the tests share it), and is TestBusyWarning's.
	if !strings.Contains(stdout.String(), "→") || !strings.Contains(stdout.String(), "       a     1") || strings.Contains(stdout.String(), "differs") {
		t.Errorf("compare printed:\n%s", stdout.String())
	}
	// A file that is JSON but no report is refused, not compared as empty.
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte("{}"), 0o644)
	stdout.Reset()
	stderr.Reset()
	if code := cli.Main(context.Background(), []string{"bench", "--compare", paths[0], empty}, os.Getenv, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "not a bench report") {
		t.Errorf("compare with {}: exit %d, stderr %q", code, stderr.String())
	}
}

// TestBenchTargetsErrorsKeepKeys: the refusals that echo a URL or a
// header name what is wrong without the user information, query or
// header value where a key would be.
func TestBenchTargetsErrorsKeepKeys(t *testing.T) {
	const key = "sk-ERR-K3Y"
	for _, args := range [][]string{
		{"--target", "a=http://u:" + key + "@127.0.0.1:1/v1", "--target=a=http://127.0.0.1:2/?key=" + key},
		{"--target=a=http://127.0.0.1:1/v1", "--target", "a=http://u:" + key + "@127.0.0.1:2/v1"},
		{"--target", "a=ftp://u:" + key + "@127.0.0.1:1/v1"},
		{"--target", "a=ftp://127.0.0.1:1/v1?key=" + key},
		{"--target", "a=http://127.0.0.1:1", "--header", "b=Authorization:Bearer " + key},
		{"--target", "a=http://127.0.0.1:1", "--header", "a=" + key},
		{"--target", "a=http://127.0.0.1:1", "--header", key},
		{"--target", "far=https://u:" + key + "@203.0.113.9/v1?key=" + key},
	} {
		var stdout, stderr bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"bench"}, args...), func(string) string { return "" }, nil, &stdout, &stderr)
		if code != 2 {
			t.Errorf("bench %v: exit %d, want 2 (usage); stderr %q", args, code, stderr.String())
		}
		if strings.Contains(stderr.String()+stdout.String(), "K3Y") {
			t.Errorf("bench %v: the key is echoed:\n%s", args, stderr.String())
		}
	}
}

// TestBenchTargetsInterrupted: a run stopped midway (Ctrl-C cancels the
// context) still writes its report, says it was interrupted, and exits 130.
func TestBenchTargetsInterrupted(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	n := 0
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		n++
		if n == 3 {
			stop()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" one"},"finish_reason":null}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, []string{"bench", "--target", "a=" + s.URL, "--requests", "100", "--json", jsonPath}, os.Getenv, nil, &stdout, &stderr)
	b, err := os.ReadFile(jsonPath)
	if code != 130 || err != nil || !bytes.Contains(b, []byte(`"interrupted": true`)) || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, JSON %v %q..., stderr %q: want 130, a report saying interrupted", code, err, b[:min(len(b), 200)], stderr.String())
	}
}
