package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// TestThinkingTagsDeployment: a deployment with thinking_tags reads the
// model's <think>...</think> (split across chunks here) as thinking, so
// the answer a client gets is the text after it; the same model without
// the setting answers the tags as text.
func TestThinkingTagsDeployment(t *testing.T) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		for _, ev := range []string{gatewaytest.ChunkJSON("<thi"), gatewaytest.ChunkJSON(`nk>\nLet me add.`), gatewaytest.ChunkJSON(`\n</think>\n\n`),
			gatewaytest.ChunkJSON("It is 4."), gatewaytest.FinishJSON} {
			if !gatewaytest.SSEWrite(w, ev) {
				return
			}
		}
	})
	gw := gatewaytest.StartYAML(t, `
providers:
  local:
    type: openai
    base_url: {{UP}}/v1
models:
  r1:
    deployments: [{provider: local, model: deepseek-r1, thinking_tags: true}]
  plain:
    deployments: [{provider: local, model: deepseek-r1}]
`, up.URL)
	for model, want := range map[string]string{"r1": "It is 4.", "plain": "<think>\nLet me add.\n</think>\n\nIt is 4."} {
		resp := gatewaytest.Post(t, gw.URL, `{"model":"`+model+`","messages":[{"role":"user","content":"2+2?"}]}`)
		var body struct {
			Choices []struct {
				Message struct{ Content string }
			}
		}
		err := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(body.Choices) != 1 {
			t.Fatalf("%s: status %d, %v, %+v", model, resp.StatusCode, err, body)
		}
		if got := body.Choices[0].Message.Content; got != want {
			t.Errorf("%s: content = %q, want %q", model, got, want)
		}
	}
}
