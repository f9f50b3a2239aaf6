package sim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// FuzzServerRequests sends any body to every endpoint: each is answered
// (a client error for a body it cannot read), never a panic; the
// decoders and askThinking take it alone too.
func FuzzServerRequests(f *testing.F) {
	for _, s := range []string{
		`{"model":"small","messages":[{"role":"user","content":"hi"}],"stream":true,"reasoning_effort":"low"}`,
		`{"model":"reasoner","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":1024,"display":"omitted"},"output_config":{"effort":"high"},"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"reasoner","input":"hi","reasoning":{"effort":"none","summary":"auto"},"include":["reasoning.encrypted_content"]}`,
		`{"contents":[{"role":"model","parts":[{"text":"t","thought":true},{"functionCall":{"name":"f","args":{}}}]},{"parts":[{"functionResponse":{"name":"f","response":{}}}]}],"systemInstruction":{"parts":[{"text":"s"}]},"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}},"generationConfig":{"candidateCount":2,"maxOutputTokens":3,"thinkingConfig":{"thinkingBudget":0,"includeThoughts":true,"thinkingLevel":"low"}}}`,
		`{"model":"reasoner","stream":false,"think":"high","options":{"num_predict":2},"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","content":"r"}]}`,
		`{"think":false}`, `null`, `[]`, `{"model":"small","messages":[]}`, `{"contents":null}`,
	} {
		f.Add(s)
	}
	p := New(Config{Seed: 1})
	h := p.Handler()
	paths := []string{"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1beta/models/small:streamGenerateContent?alt=sse", "/v1beta/models/small:generateContent", "/api/chat"}
	f.Fuzz(func(t *testing.T, body string) {
		geminiRequest("small", []byte(body))
		ollamaRequest([]byte(body))
		for d := dialectChat; d <= dialectOllama; d++ {
			var req chat.Request
			askThinking([]byte(body), d, &req)
			if req.Thinking == nil {
				t.Fatalf("dialect %d: no thinking ask", d)
			}
		}
		for _, path := range paths {
			r := httptest.NewRequest("POST", path, strings.NewReader(body))
			r.Header.Set("X-Firstword-Sim", "ttft=0s gap=0s tokens=2 think=0")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK && (w.Code < 400 || w.Code >= 500) {
				t.Errorf("POST %s %q: status %d", path, body, w.Code)
			}
		}
	})
}
