package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/provider/sim"
)

// piece is one thing a client read: thinking or answer text.
type piece struct {
	thinking bool
	text     string
}

// read is what a client of one dialect read from a stream, in order.
type read struct {
	pieces []piece
	sig    string
}

// split returns the thinking, the answer, and whether every piece of
// thinking came before the first piece of answer.
func (r read) split() (thinking, answer string, ordered bool) {
	var th, an strings.Builder
	ordered = true
	for _, p := range r.pieces {
		if p.thinking {
			if an.Len() > 0 {
				ordered = false
			}
			th.WriteString(p.text)
		} else {
			an.WriteString(p.text)
		}
	}
	return th.String(), an.String(), ordered
}

// clientDialect is a surface firstword serves: how to ask for a thinking
// answer, and how its events say thinking and answer.
type clientDialect struct {
	name string
	path string
	body func(model, prompt string) string
	read func(t *testing.T, evs []gatewaytest.Event) read
}

func decode(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("event %q: %v", data, err)
	}
	return m
}

func str(v any) string { s, _ := v.(string); return s }

var clientDialects = []clientDialect{
	{"chat-completions", "/v1/chat/completions",
		func(model, prompt string) string {
			return fmt.Sprintf(`{"model":%q,"stream":true,"reasoning_effort":"low","messages":[{"role":"user","content":%q}]}`, model, prompt)
		},
		func(t *testing.T, evs []gatewaytest.Event) read {
			var r read
			for _, e := range evs {
				if e.Comment || e.Data == "[DONE]" {
					continue
				}
				ch, _ := decode(t, e.Data)["choices"].([]any)
				if len(ch) == 0 {
					continue
				}
				d, _ := ch[0].(map[string]any)["delta"].(map[string]any)
				if s := str(d["reasoning_content"]); s != "" {
					r.pieces = append(r.pieces, piece{true, s})
				}
				if s := str(d["content"]); s != "" {
					r.pieces = append(r.pieces, piece{false, s})
				}
			}
			return r
		}},
	{"messages", "/v1/messages",
		func(model, prompt string) string {
			return fmt.Sprintf(`{"model":%q,"max_tokens":1024,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":%q}]}`, model, prompt)
		},
		func(t *testing.T, evs []gatewaytest.Event) read {
			var r read
			for _, e := range evs {
				if e.Name != "content_block_delta" {
					continue
				}
				d, _ := decode(t, e.Data)["delta"].(map[string]any)
				switch str(d["type"]) {
				case "thinking_delta":
					r.pieces = append(r.pieces, piece{true, str(d["thinking"])})
				case "signature_delta":
					r.sig += str(d["signature"])
				case "text_delta":
					r.pieces = append(r.pieces, piece{false, str(d["text"])})
				}
			}
			return r
		}},
	{"responses", "/v1/responses",
		func(model, prompt string) string {
			return fmt.Sprintf(`{"model":%q,"stream":true,"reasoning":{"effort":"low","summary":"auto"},"input":%q}`, model, prompt)
		},
		func(t *testing.T, evs []gatewaytest.Event) read {
			var r read
			for _, e := range evs {
				if e.Comment {
					continue
				}
				m := decode(t, e.Data)
				switch str(m["type"]) {
				case "response.reasoning_summary_text.delta":
					r.pieces = append(r.pieces, piece{true, str(m["delta"])})
				case "response.output_text.delta":
					r.pieces = append(r.pieces, piece{false, str(m["delta"])})
				}
			}
			return r
		}},
	{"v1-chat", "/v1/chat",
		func(model, prompt string) string {
			return fmt.Sprintf(`{"model":%q,"message":%q}`, model, prompt)
		},
		func(t *testing.T, evs []gatewaytest.Event) read {
			var r read
			for _, e := range evs {
				switch e.Name {
				case "thinking":
					r.pieces = append(r.pieces, piece{true, str(decode(t, e.Data)["text"])})
				case "delta":
					r.pieces = append(r.pieces, piece{false, str(decode(t, e.Data)["text"])})
				}
			}
			return r
		}},
}

// TestThinkingEveryDialectPair streams a thinking answer through each of
// firstword's four client dialects from each of the five upstream
// dialects it reads, all on real sockets: the sim, served over HTTP in
// each upstream dialect, thinks and then answers. Every upstream must
// give a client dialect the same thinking, then the same answer, in that
// order.
func TestThinkingEveryDialectPair(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Config{Name: "sim", Seed: 1}).Handler())
	defer up.Close()
	gw := gatewaytest.StartYAML(t, `
providers:
  openai: {type: openai, base_url: "{{UP}}/v1"}
  responses: {type: openai-responses, base_url: "{{UP}}/v1"}
  anthropic: {type: anthropic, base_url: "{{UP}}/v1"}
  gemini: {type: gemini, base_url: "{{UP}}/v1beta"}
  ollama: {type: ollama, base_url: "{{UP}}"}
models:
  openai: {thinking: {effort: low}, deployments: [{provider: openai, model: reasoner}]}
  responses: {thinking: {effort: low}, deployments: [{provider: responses, model: reasoner}]}
  anthropic: {thinking: {effort: low}, deployments: [{provider: anthropic, model: reasoner}]}
  gemini: {thinking: {effort: low}, deployments: [{provider: gemini, model: reasoner}]}
  ollama: {thinking: {effort: low}, deployments: [{provider: ollama, model: reasoner}]}
`, up.URL)
	const prompt = "Why is the sky blue? [sim think=60ms tokens=8 ttft=5ms gap=1ms]"
	// Per client dialect: /v1/chat's prompt (its system prompt, the
	// history) differs from the others', and the sim's words follow the
	// prompt.
	want := map[string][2]string{}
	for _, upstream := range []string{"openai", "responses", "anthropic", "gemini", "ollama"} {
		for _, cd := range clientDialects {
			t.Run(cd.name+"/"+upstream, func(t *testing.T) {
				resp := gatewaytest.PostPath(t, gw.URL, cd.path, cd.body(upstream, prompt))
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
				r := cd.read(t, gatewaytest.ReadEvents(resp.Body))
				thinking, answer, ordered := r.split()
				if thinking == "" || answer == "" || !ordered {
					t.Fatalf("thinking %q, answer %q, thinking before the answer: %v", thinking, answer, ordered)
				}
				if strings.Contains(answer, thinking) {
					t.Errorf("the thinking is in the answer text: %q", answer)
				}
				w, ok := want[cd.name]
				if !ok {
					w = [2]string{thinking, answer}
					want[cd.name] = w
				}
				if thinking != w[0] || answer != w[1] {
					t.Errorf("thinking %q, answer %q; from the first upstream %q, %q", thinking, answer, w[0], w[1])
				}
				if cd.name == "messages" && upstream == "anthropic" && r.sig == "" {
					t.Errorf("no signature_delta from an Anthropic upstream")
				}
			})
		}
	}
}

// TestThinkingFailureFallsBack: the first deployment fails while it is
// thinking, before its first answer token; the second answers. The
// /v1/chat client is told to drop the first attempt's thinking, sees the
// second's from its start, and the stored message holds only the
// thinking of the attempt that answered.
func TestThinkingFailureFallsBack(t *testing.T) {
	gw := gatewaytest.StartYAML(t, `
providers:
  broken: {type: sim, fault: {mode: error_thinking, after: 3}}
  good: {type: sim}
models:
  chat:
    max_attempts: 2
    deployments: [{provider: broken, model: reasoner, priority: 0}, {provider: good, model: reasoner, priority: 1}]
`, "")
	resp := gatewaytest.PostPath(t, gw.URL, "/v1/chat", `{"model":"chat","message":"Why? [sim think=80ms ttft=5ms gap=1ms tokens=5]"}`)
	defer resp.Body.Close()
	var seen []string
	var convID, after string
	for _, e := range gatewaytest.ReadEvents(resp.Body) {
		if e.Comment {
			continue
		}
		m := decode(t, e.Data)
		switch e.Name {
		case "meta":
			convID = str(m["conversation_id"])
		case "thinking":
			if m["restart"] == true {
				seen = append(seen, "restart")
				after = ""
				continue
			}
			seen = append(seen, "thinking")
			after += str(m["text"])
		case "delta", "done", "error":
			seen = append(seen, e.Name)
		}
	}
	restart := slices.Index(seen, "restart")
	if restart < 1 || seen[restart-1] != "thinking" || seen[restart+1] != "thinking" || seen[len(seen)-1] != "done" || slices.Contains(seen, "error") {
		t.Fatalf("events %v: want thinking, restart, thinking, the answer, done", seen)
	}
	if slices.Index(seen, "delta") < restart {
		t.Fatalf("events %v: answer text before the restart", seen)
	}
	_, conv := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+convID, "")
	msgs, _ := conv["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	th, _ := last["thinking"].(map[string]any)
	if got := str(th["text"]); got != after || got == "" {
		t.Errorf("stored thinking %q, want the answering attempt's %q", got, after)
	}
}
