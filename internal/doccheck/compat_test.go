package doccheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/config"
)

// post sends a JSON body and returns the status and body.
func post(t *testing.T, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: commandTimeout}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, string(b)
}

// compatBlock returns the YAML block of docs/compatibility.md that
// contains marker.
func compatBlock(t *testing.T, marker string) block {
	t.Helper()
	for _, b := range readBlocks(t, "docs/compatibility.md") {
		if b.lang == "yaml" && strings.Contains(b.text, marker) {
			return b
		}
	}
	t.Fatalf("docs/compatibility.md has no YAML block with %q", marker)
	return block{}
}

// serveConfig saves a config in the session's directory and starts serve
// with it.
func serveConfig(t *testing.T, s *session, b block, text string) *server {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, "doc.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return s.start(b, []string{"serve", "--config", "doc.yaml"})
}

const streamedHi = `{"model":%q,"stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

// TestAzureExample runs docs/compatibility.md's Azure OpenAI config as
// written, but for the resource's host (https://RESOURCE.openai.azure.com
// becomes a local fake of the API): a streamed request reaches
// /openai/v1/chat/completions with the key in the api-key header and the
// deployment's name as the model.
func TestAzureExample(t *testing.T) {
	const host = "https://RESOURCE.openai.azure.com"
	b := compatBlock(t, host)
	env := fakeEnv{}
	cfg, err := config.Parse(b.String(), []byte(b.text), env.getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 1 {
		t.Fatalf("%s: want one alias, got %d", b, len(cfg.Models))
	}
	var alias, deployment string
	for name, m := range cfg.Models {
		alias, deployment = name, m.Deployments[0].Model
	}

	fake := newFakeOpenAI(t, "Hello ", "from ", "Azure.")
	s := newSession(t)
	for k, v := range env {
		s.env[k] = v
	}
	srv := serveConfig(t, s, b, strings.ReplaceAll(b.text, host, fake.URL))
	status, body := post(t, srv.url+"/v1/chat/completions", fmt.Sprintf(streamedHi, alias))
	if status != http.StatusOK || !strings.Contains(body, "Azure.") || !strings.Contains(body, "data: [DONE]") {
		t.Fatalf("POST /v1/chat/completions = %d %s", status, body)
	}
	reqs := fake.requests()
	if len(reqs) != 1 {
		t.Fatalf("the fake got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/openai/v1/chat/completions" || r.Query != "" || r.Model != deployment || r.APIKey != env["AZURE_OPENAI_API_KEY"] || r.Authorization != "" {
		t.Errorf("the fake got %+v; want /openai/v1/chat/completions, model %q, the key in api-key and no Authorization", r, deployment)
	}
}

// TestBaseURLQueryString shows what docs/compatibility.md says of
// Azure's deployment URLs: base_url is used as a prefix, /chat/completions
// appended to it whole, so a query string in it (api-version) ends up in
// front of the path's tail and the request misses the endpoint.
func TestBaseURLQueryString(t *testing.T) {
	fake := newFakeOpenAI(t, "x")
	s := newSession(t)
	b := block{file: "TestBaseURLQueryString", line: 1}
	cfg := "providers:\n  azure:\n    type: openai\n    base_url: " + fake.URL + "/openai/deployments/my-gpt-4o-mini?api-version=2024-10-21\n" +
		"models:\n  chat:\n    deployments: [{provider: azure, model: my-gpt-4o-mini}]\n"
	srv := serveConfig(t, s, b, cfg)
	post(t, srv.url+"/v1/chat/completions", fmt.Sprintf(streamedHi, "chat"))
	reqs := fake.requests()
	if len(reqs) != 0 {
		t.Fatalf("the fake answered %+v; docs/compatibility.md says a base_url with a query string does not work: update it", reqs)
	}
}

// TestUnsupportedEndpoints checks the endpoints docs/compatibility.md
// lists as not supported: each answers 404 not_found.
func TestUnsupportedEndpoints(t *testing.T) {
	s := newSession(t)
	srv := s.start(block{file: "TestUnsupportedEndpoints", line: 1}, []string{"serve"})
	for _, route := range []string{
		"POST /v1/embeddings",
		"POST /v1/completions",
		"POST /v1/images/generations",
		"POST /v1/audio/transcriptions",
		"POST /v1/audio/speech",
		"POST /v1/moderations",
		"GET /v1/files",
		"POST /v1/batches",
		"GET /v1/realtime",
		"POST /v1/messages/count_tokens",
	} {
		method, path, _ := strings.Cut(route, " ")
		var status int
		var body string
		if method == http.MethodPost {
			status, body = post(t, srv.url+path, `{"model":"chat","input":"hi"}`)
		} else {
			status, body = get(t, srv.url+path)
		}
		if status != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
			t.Errorf("%s = %d %s, want 404 not_found; if it is served now, update docs/compatibility.md, which says it is not supported", route, status, body)
		}
	}
}

// TestRoutesWithoutKey checks what the README says once a key exists:
// which routes still answer without one, which need one, and that
// `firstword budget` needs --key (or FIRSTWORD_API_KEY).
func TestRoutesWithoutKey(t *testing.T) {
	s := newSession(t)
	b := block{file: "TestRoutesWithoutKey", line: 1}
	key := strings.TrimSpace(s.run(b, []string{"keys", "create", "--tenant", "acme"}, 0))
	if !strings.HasPrefix(key, "fw_") {
		t.Fatalf("keys create printed %q, want an fw_ key", key)
	}
	srv := s.start(b, []string{"serve"})
	for _, path := range []string{"/v1/models", "/", "/budget", "/favicon.ico", "/static/chat.css", "/healthz", "/readyz", "/metrics"} {
		if status, body := get(t, srv.url+path); status != http.StatusOK {
			t.Errorf("GET %s without a key = %d %.200s, want 200", path, status, body)
		}
	}
	for _, route := range []string{
		"POST /v1/chat/completions", "POST /v1/responses", "POST /v1/messages", "POST /v1/chat",
		"GET /v1/conversations", "GET /v1/usage", "GET /v1/budget", "GET /admin/health",
		"POST /v1/ui/chat", "GET /v1/ui/chat/c1/stream", "POST /v1/ui/chat/c1/stop", "GET /v1/ui/chat/c1/messages",
	} {
		method, path, _ := strings.Cut(route, " ")
		var status int
		if method == http.MethodPost {
			status, _ = post(t, srv.url+path, `{"model":"chat","message":"hi","input":"hi","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
		} else {
			status, _ = get(t, srv.url+path)
		}
		if status != http.StatusUnauthorized {
			t.Errorf("%s without a key = %d, want 401", route, status)
		}
	}
	if status, body := post(t, srv.url+"/v1/chat/completions", fmt.Sprintf(streamedHi, "chat"), "Authorization", "Bearer "+key); status != http.StatusOK {
		t.Errorf("POST /v1/chat/completions with the key = %d %.200s", status, body)
	}
	s.run(b, []string{"budget", "--server", srv.url}, 1)
	s.run(b, []string{"budget", "--server", srv.url, "--key", key}, 0)
	s.env["FIRSTWORD_API_KEY"] = key
	s.run(b, []string{"budget", "--server", srv.url}, 0)
}

// TestMaxTokensField: a provider of type openai with max_tokens_field:
// max_completion_tokens (what OpenAI's reasoning models need, as
// docs/compatibility.md says) sends the request's cap in that field and
// no max_tokens; without the setting, max_tokens.
func TestMaxTokensField(t *testing.T) {
	fake := newFakeOpenAI(t, "x")
	s := newSession(t)
	b := block{file: "TestMaxTokensField", line: 1}
	cfg := "providers:\n" +
		"  plain: {type: openai, base_url: " + fake.URL + "/v1}\n" +
		"  reasoning: {type: openai, base_url: " + fake.URL + "/v1, max_tokens_field: max_completion_tokens}\n" +
		"models:\n" +
		"  plain: {deployments: [{provider: plain, model: gpt-4o-mini}]}\n" +
		"  reasoning: {deployments: [{provider: reasoning, model: gpt-5}]}\n"
	srv := serveConfig(t, s, b, cfg)
	for _, alias := range []string{"plain", "reasoning"} {
		if status, body := post(t, srv.url+"/v1/chat/completions", fmt.Sprintf(streamedHi, alias)); status != http.StatusOK {
			t.Fatalf("POST /v1/chat/completions (%s) = %d %s", alias, status, body)
		}
	}
	reqs := fake.requests()
	if len(reqs) != 2 {
		t.Fatalf("the fake got %d requests, want 2: %+v", len(reqs), reqs)
	}
	show := func(p *int) string {
		if p == nil {
			return "absent"
		}
		return fmt.Sprint(*p)
	}
	for i, want := range []struct{ model, maxTokens, maxCompletionTokens string }{
		{"gpt-4o-mini", "5", "absent"},
		{"gpt-5", "absent", "5"},
	} {
		r := reqs[i]
		if r.Model != want.model || show(r.MaxTokens) != want.maxTokens || show(r.MaxCompletionTokens) != want.maxCompletionTokens {
			t.Errorf("request %d: model %s, max_tokens %s, max_completion_tokens %s; want %s, %s, %s",
				i, r.Model, show(r.MaxTokens), show(r.MaxCompletionTokens), want.model, want.maxTokens, want.maxCompletionTokens)
		}
	}
}

// TestResponsesGaps asserts the gaps docs/compatibility.md lists for the
// Responses API, as they stand: previous_response_id and built-in tools
// are refused with a 400 naming the field, and GET /v1/responses/{id}
// knows background responses only. Each failure says to update the doc:
// it means the gap was closed.
func TestResponsesGaps(t *testing.T) {
	s := newSession(t)
	srv := s.start(block{file: "TestResponsesGaps", line: 1}, []string{"serve"})
	for _, tc := range []struct {
		name, body, param string
	}{
		{"previous_response_id", `{"model":"chat","input":"hi","max_output_tokens":5,"previous_response_id":"resp_1"}`, "previous_response_id"},
		{"built-in tool", `{"model":"chat","input":"hi","max_output_tokens":5,"tools":[{"type":"web_search"}]}`, "tools[0].type"},
	} {
		status, body := post(t, srv.url+"/v1/responses", tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, fmt.Sprintf(`"param":%q`, tc.param)) {
			t.Errorf("%s: POST /v1/responses = %d %.300s; want 400 on %s, as docs/compatibility.md says (no %s): if it is served now, update the doc", tc.name, status, body, tc.param, tc.name)
		}
	}

	// A response that was not created in background mode is not kept.
	status, body := post(t, srv.url+"/v1/responses", `{"model":"chat","input":"hi","max_output_tokens":5}`)
	var created struct {
		ID string `json:"id"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &created) != nil || created.ID == "" {
		t.Fatalf("POST /v1/responses = %d %.300s", status, body)
	}
	if status, body := get(t, srv.url+"/v1/responses/"+created.ID); status != http.StatusNotFound {
		t.Errorf("GET /v1/responses/%s (not background) = %d %.300s; want 404, as docs/compatibility.md says (background responses only): if it is kept now, update the doc", created.ID, status, body)
	}
}

// TestNoResumeOnChatCompletions asserts the gap docs/compatibility.md
// names in "resuming a broken stream": the streams of
// /v1/chat/completions and /v1/messages carry no event ids, so a client
// has no cursor to resume from, and one that reconnects with the
// Last-Event-ID it would send gets a new answer from the start. /v1/chat,
// which does resume, is the control: its events carry ids.
func TestNoResumeOnChatCompletions(t *testing.T) {
	s := newSession(t)
	srv := s.start(block{file: "TestNoResumeOnChatCompletions", line: 1}, []string{"serve"})
	idLine := regexp.MustCompile(`(?m)^id:`)
	completionID := regexp.MustCompile(`"id":"(chatcmpl-[^"]+)"`)
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		status, body := post(t, srv.url+path, fmt.Sprintf(streamedHi, "chat"))
		if status != http.StatusOK {
			t.Fatalf("POST %s = %d %.300s", path, status, body)
		}
		if idLine.MatchString(body) {
			t.Errorf("POST %s: the stream has event ids now:\n%.500s\nif its clients can resume, update docs/compatibility.md (resuming a broken stream)", path, body)
		}
	}
	_, first := post(t, srv.url+"/v1/chat/completions", fmt.Sprintf(streamedHi, "chat"))
	m := completionID.FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("no completion id in %.300s", first)
	}
	_, again := post(t, srv.url+"/v1/chat/completions", fmt.Sprintf(streamedHi, "chat"), "Last-Event-ID", m[1]+":2")
	if n := completionID.FindStringSubmatch(again); n == nil || n[1] == m[1] {
		t.Errorf("a reconnect with Last-Event-ID %s:2 got %.300s; want a new answer: if it resumes now, update docs/compatibility.md (resuming a broken stream)", m[1], again)
	}
	// The control: /v1/chat's first event has an id (read up to it only:
	// the answer is not capped).
	req, err := http.NewRequest(http.MethodPost, srv.url+"/v1/chat", strings.NewReader(`{"model":"chat","message":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: commandTimeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "id:") {
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(sc.Text(), "id:") {
		t.Fatalf("POST /v1/chat = %d, ended %q (%v); want a stream with event ids", resp.StatusCode, sc.Text(), sc.Err())
	}
	// Stop the answer, so that the server need not finish it to exit.
	var meta struct {
		ConversationID string `json:"conversation_id"`
	}
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data:") {
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data:")), &meta); err != nil || meta.ConversationID == "" {
		t.Fatalf("the first event's data %q: %v", sc.Text(), err)
	}
	if status, body := post(t, srv.url+"/v1/conversations/"+meta.ConversationID+"/stop", ""); status != http.StatusOK {
		t.Errorf("POST /v1/conversations/%s/stop = %d %s", meta.ConversationID, status, body)
	}
}
