package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/anthropic"
	"github.com/firstword/firstword/internal/provider/gemini"
	"github.com/firstword/firstword/internal/provider/ollama"
	"github.com/firstword/firstword/internal/provider/openai"
	"github.com/firstword/firstword/internal/provider/openairesponses"
	"github.com/firstword/firstword/internal/provider/sim"
	wireanthropic "github.com/firstword/firstword/internal/wire/anthropic"
	wireopenai "github.com/firstword/firstword/internal/wire/openai"
	wireresponses "github.com/firstword/firstword/internal/wire/responses"
)

// serve starts the sim's handler on a real socket.
func serve(t *testing.T, seed uint64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(sim.New(sim.Config{Seed: seed}).Handler())
	t.Cleanup(srv.Close)
	return srv
}

// adapters are firstword's upstream adapters, each pointed at the sim's
// endpoint for its dialect; reasoning says whether the dialect reports
// reasoning tokens apart (Messages and Ollama count them in the output
// only).
var adapters = []struct {
	name      string
	reasoning bool
	new       func(base string, c *http.Client) provider.Provider
}{
	{"chat completions", true, func(base string, c *http.Client) provider.Provider {
		return openai.New(openai.Config{HTTPConfig: provider.HTTPConfig{Name: "sim", BaseURL: base + "/v1", Client: c}})
	}},
	{"messages", false, func(base string, c *http.Client) provider.Provider {
		return anthropic.New(anthropic.Config{HTTPConfig: provider.HTTPConfig{Name: "sim", BaseURL: base + "/v1", Client: c}})
	}},
	{"responses", true, func(base string, c *http.Client) provider.Provider {
		return openairesponses.New(openairesponses.Config{HTTPConfig: provider.HTTPConfig{Name: "sim", BaseURL: base + "/v1", Client: c}})
	}},
	{"gemini", true, func(base string, c *http.Client) provider.Provider {
		return gemini.New(gemini.Config{HTTPConfig: provider.HTTPConfig{Name: "sim", BaseURL: base + "/v1beta", Client: c}})
	}},
	{"ollama", false, func(base string, c *http.Client) provider.Provider {
		return ollama.New(ollama.Config{HTTPConfig: provider.HTTPConfig{Name: "sim", BaseURL: base, Client: c}})
	}},
}

// TestEndpointsThroughAdapters: every endpoint of the sim is read by
// firstword's own adapter for its dialect: the answer the sim plays in
// process, its finish reason and its usage (thinking counted as output),
// a tool call, and a failure during thinking, retryable as the router
// needs it to be to fall back.
func TestEndpointsThroughAdapters(t *testing.T) {
	const question = "why stream? [sim ttft=1ms gap=1ms tokens=12 think=20ms think_tps=500]"
	want, err := chat.Collect(sim.New(sim.Config{Seed: 5}).Stream(context.Background(), userReq("reasoner", question)))
	if err != nil {
		t.Fatal(err)
	}
	if want.Usage.ReasoningTokens != 10 || want.Usage.OutputTokens != 22 {
		t.Fatalf("in process: usage %+v, want 10 thinking and 12 answer tokens", want.Usage)
	}
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			srv := serve(t, 5)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			p := a.new(srv.URL, &http.Client{Transport: tr})

			got, err := chat.Collect(p.Stream(context.Background(), userReq("reasoner", question)))
			if err != nil {
				t.Fatal(err)
			}
			c := got.Choices[0]
			if c.Text != want.Choices[0].Text || c.FinishReason != chat.FinishStop {
				t.Errorf("answer %q (%s), want %q (stop)", c.Text, c.FinishReason, want.Choices[0].Text)
			}
			if u := got.Usage; u == nil || u.OutputTokens != 22 || u.InputTokens == 0 || (a.reasoning && u.ReasoningTokens != 10) {
				t.Errorf("usage %+v, want 22 output tokens (10 of them reasoning)", u)
			}

			got, err = chat.Collect(p.Stream(context.Background(), userReq("small", "weather? [sim tool=get_weather ttft=1ms gap=1ms]")))
			if err != nil {
				t.Fatal(err)
			}
			if tc := got.Choices[0].ToolCalls; len(tc) != 1 || tc[0].Name != "get_weather" || tc[0].Arguments != `{"query":"weather?"}` || got.Choices[0].FinishReason != chat.FinishToolCalls {
				t.Errorf("tool call %+v (%s), want get_weather({\"query\":\"weather?\"})", tc, got.Choices[0].FinishReason)
			}

			_, err = chat.Collect(p.Stream(context.Background(), userReq("reasoner", "q [sim ttft=1ms think=10ms think_tps=1000 fault=error_thinking after=3]")))
			var ce *chat.Error
			if !errors.As(err, &ce) || !ce.Retryable {
				t.Errorf("failure during thinking: %v, want a retryable error", err)
			}
		})
	}
}

func userReq(model, text string) *chat.Request {
	return &chat.Request{Model: model, Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}}
}

// post sends body to the sim's path and returns the response's body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// encodes reports whether a client-side encoder writes thinking yet:
// another part of issue 32 teaches them, and the bytes below are theirs.
func encodes(out []byte, marker string) bool { return strings.Contains(string(out), marker) }

// TestThinkingOnTheWire reads each endpoint's raw bytes: thinking is
// written, with its signature where the dialect has one, when the
// request asks for it in the dialect's words, and not otherwise.
func TestThinkingOnTheWire(t *testing.T) {
	// msg thinks 150 tokens whatever the request asks (a directive wins);
	// plain leaves it to the request.
	const msg, plain = `"why stream? [sim ttft=1ms gap=1ms tokens=5 think=30ms think_tps=5000]"`, `"why stream? [sim ttft=1ms gap=1ms tokens=5 think_tps=5000]"`
	thinkChunk := &chat.Chunk{Thinking: "x"}
	for _, tc := range []struct {
		name, path, body string
		want, not        []string // in the body, and not
		pending          bool     // the client-side encoder does not write thinking yet
	}{
		{"gemini, thoughts included", "/v1beta/models/reasoner:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":` + msg + `}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`,
			[]string{`"thought":true`, `"thoughtSignature":"simsig1`, `"thoughtsTokenCount":150`, `"finishReason":"STOP"`}, nil, false},
		{"gemini, thoughts not included", "/v1beta/models/reasoner:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":` + msg + `}]}]}`,
			[]string{`"thoughtsTokenCount":150`, `"thoughtSignature":"simsig1`}, []string{`"thought":true`}, false},
		{"gemini, not streamed, thoughts not included", "/v1beta/models/reasoner:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":` + msg + `}]}]}`,
			[]string{`"thoughtsTokenCount":150`, `"thoughtSignature":"simsig1`}, []string{`"thought":true`}, false},
		{"gemini, budget 0", "/v1beta/models/reasoner:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":` + plain + `}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":0,"includeThoughts":true}}}`,
			[]string{`"candidatesTokenCount":5`}, []string{`"thought":true`, `thoughtsTokenCount`}, false},
		{"gemini, not streamed", "/v1beta/models/reasoner:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":` + msg + `}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`,
			[]string{`"thought":true`, `"thoughtSignature":"simsig1`, `"thoughtsTokenCount":150`}, nil, false},
		{"ollama", "/api/chat",
			`{"model":"reasoner","messages":[{"role":"user","content":` + msg + `}]}`,
			[]string{`"thinking":"`, `"done":true,"done_reason":"stop"`, `"eval_count":155`}, nil, false},
		{"ollama, think false", "/api/chat",
			`{"model":"reasoner","think":false,"messages":[{"role":"user","content":` + plain + `}]}`,
			[]string{`"eval_count":5`}, []string{`"thinking"`}, false},
		{"ollama, not streamed", "/api/chat",
			`{"model":"reasoner","stream":false,"think":"high","messages":[{"role":"user","content":` + msg + `}]}`,
			[]string{`"thinking":"`, `"done":true`, `"eval_count":155`}, nil, false},
		{"messages, thinking enabled", "/v1/messages",
			`{"model":"reasoner","max_tokens":2048,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":` + msg + `}]}`,
			[]string{"event: content_block_delta", `"thinking_delta"`, `"signature_delta"`, `"signature":"simsig1`, `"output_tokens":155`}, nil,
			!encodes((&wireanthropic.EventEncoder{Thinking: wireanthropic.ShowAll}).Chunk(nil, thinkChunk), "thinking_delta")},
		{"messages, display omitted", "/v1/messages",
			`{"model":"reasoner","max_tokens":2048,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024,"display":"omitted"},"messages":[{"role":"user","content":` + msg + `}]}`,
			[]string{`"signature_delta"`, `"signature":"simsig1`, `"output_tokens":155`}, []string{"thinking_delta"},
			!encodes((&wireanthropic.EventEncoder{Thinking: wireanthropic.ShowAll}).Chunk(nil, thinkChunk), "thinking_delta")},
		{"messages, not streamed", "/v1/messages",
			`{"model":"reasoner","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":` + msg + `}]}`,
			[]string{`"type":"thinking"`, `"signature":"simsig1`, `"output_tokens":155`}, nil,
			!encodes((&wireanthropic.EventEncoder{Thinking: wireanthropic.ShowAll}).Chunk(nil, thinkChunk), "thinking_delta")},
		{"messages, thinking not enabled", "/v1/messages",
			`{"model":"reasoner","max_tokens":2048,"stream":true,"messages":[{"role":"user","content":` + plain + `}]}`,
			[]string{`"output_tokens":5`}, []string{`thinking`}, false},
		{"responses, summary asked", "/v1/responses",
			`{"model":"reasoner","stream":true,"reasoning":{"effort":"medium","summary":"auto"},"input":` + msg + `}`,
			[]string{"response.reasoning_summary_text.delta", `"reasoning_tokens":150`}, nil,
			!encodes((&wireresponses.EventEncoder{Summary: true}).Chunk(nil, thinkChunk), "reasoning")},
		{"responses, encrypted content", "/v1/responses",
			`{"model":"reasoner","stream":true,"include":["reasoning.encrypted_content"],"input":` + msg + `}`,
			[]string{`"encrypted_content":"simsig1`, `"reasoning_tokens":150`}, []string{"reasoning_summary_text"},
			!encodes((&wireresponses.EventEncoder{Summary: true}).Chunk(nil, thinkChunk), "reasoning")},
		{"responses, no summary", "/v1/responses",
			`{"model":"reasoner","stream":true,"input":` + msg + `}`,
			[]string{`"reasoning_tokens":150`, "response.completed"}, []string{"reasoning_summary"}, false},
		{"chat completions", "/v1/chat/completions",
			`{"model":"reasoner","stream":true,"messages":[{"role":"user","content":` + msg + `}]}`,
			[]string{`"reasoning_content":"`}, nil,
			!encodes((&wireopenai.ChunkEncoder{}).AppendChunk(nil, thinkChunk), "reasoning")},
		{"chat completions, effort none", "/v1/chat/completions",
			`{"model":"reasoner","stream":true,"reasoning_effort":"none","stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + plain + `}]}`,
			[]string{`"completion_tokens":5`}, []string{"reasoning_content"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pending {
				t.Skip("the client-side encoder does not write thinking yet")
			}
			srv := serve(t, 1)
			code, body := post(t, srv.URL+tc.path, tc.body)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("no %s in\n%s", w, body)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("%s in\n%s", n, body)
				}
			}
		})
	}
}

// TestNotStreamed: each dialect's whole response, decoded as its clients
// decode it.
func TestNotStreamed(t *testing.T) {
	srv := serve(t, 1)
	const msg = `"hi [sim ttft=1ms gap=1ms tokens=4 think=0]"`
	for _, tc := range []struct {
		name, path, body string
		text             func(map[string]any) any
	}{
		{"chat completions", "/v1/chat/completions", `{"model":"small","messages":[{"role":"user","content":` + msg + `}]}`,
			func(m map[string]any) any { return dig(m, "choices", 0, "message", "content") }},
		{"messages", "/v1/messages", `{"model":"small","max_tokens":100,"messages":[{"role":"user","content":` + msg + `}]}`,
			func(m map[string]any) any { return dig(m, "content", 0, "text") }},
		{"responses", "/v1/responses", `{"model":"small","input":` + msg + `}`,
			func(m map[string]any) any { return dig(m, "output", 0, "content", 0, "text") }},
		{"gemini", "/v1beta/models/small:generateContent", `{"contents":[{"parts":[{"text":` + msg + `}]}]}`,
			func(m map[string]any) any { return dig(m, "candidates", 0, "content", "parts", 0, "text") }},
		{"ollama", "/api/chat", `{"model":"small","stream":false,"messages":[{"role":"user","content":` + msg + `}]}`,
			func(m map[string]any) any { return dig(m, "message", "content") }},
	} {
		code, body := post(t, srv.URL+tc.path, tc.body)
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil || code != 200 {
			t.Errorf("%s: status %d, %v: %s", tc.name, code, err, body)
			continue
		}
		if s, _ := tc.text(m).(string); len(strings.Fields(s)) < 2 {
			t.Errorf("%s: no answer text in %s", tc.name, body)
		}
	}
}

// dig walks a decoded JSON value by keys and indexes; nil when absent.
func dig(v any, path ...any) any {
	for _, k := range path {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// TestErrorsInEachDialect: a failure before the answer is a real status
// with the dialect's error body, which the dialect's own decoder
// classifies; an unknown Gemini method and a bad body are refused.
func TestErrorsInEachDialect(t *testing.T) {
	srv := serve(t, 1)
	for _, a := range adapters {
		p := a.new(srv.URL, nil)
		_, err := chat.Collect(p.Stream(context.Background(), userReq("small", "q [sim fault=429 retry_after=2s]")))
		var ce *chat.Error
		if !errors.As(err, &ce) || ce.Category != chat.CategoryRateLimited || ce.Status != 429 {
			t.Errorf("%s: %v, want rate limited (429)", a.name, err)
		}
		_, err = chat.Collect(p.Stream(context.Background(), userReq("no-such-tier", "q")))
		if !errors.As(err, &ce) || ce.Category != chat.CategoryNotFound {
			t.Errorf("%s: unknown model: %v, want not found", a.name, err)
		}
	}
	for path, body := range map[string]string{
		"/v1beta/models/small:countTokens":     `{}`,
		"/v1beta/models/small:generateContent": `{"contents":[]}`,
		"/api/chat":                            `{"model":"small"`,
		"/v1/messages":                         `{"model":"small"}`,
		"/v1/responses":                        `[]`,
	} {
		if code, b := post(t, srv.URL+path, body); code < 400 || code >= 500 || !strings.Contains(b, "error") {
			t.Errorf("POST %s %s: %d %s, want a client error", path, body, code, b)
		}
	}
}

// TestMessagesSignatureChecked: a Messages request whose assistant turn
// carries the sim's thinking block unchanged is answered; one whose
// block's text or signature changed is refused, as Anthropic refuses it.
func TestMessagesSignatureChecked(t *testing.T) {
	srv := serve(t, 1)
	text := "Let me think."
	turn := func(thinking, sig string) string {
		return `{"model":"small","max_tokens":100,"messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"` + thinking + `","signature":"` + sig + `"},{"type":"text","text":"a"}]},` +
			`{"role":"user","content":"and? [sim ttft=1ms gap=1ms tokens=2]"}]}`
	}
	if code, body := post(t, srv.URL+"/v1/messages", turn(text, sim.Signature(text))); code != 200 {
		t.Errorf("an unchanged block: %d %s", code, body)
	}
	for _, body := range []string{turn(text+"!", sim.Signature(text)), turn(text, sim.Signature(text)+"x")} {
		if code, b := post(t, srv.URL+"/v1/messages", body); code != 400 || !strings.Contains(b, "invalid signature") {
			t.Errorf("a changed block: %d %s, want 400 invalid signature", code, b)
		}
	}
}
