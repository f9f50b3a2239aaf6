package gateway_test

import (
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/levers"
)

// TestThinkingPolicyWired: an alias's thinking policy in the config
// reaches its levers: show: false is what they report for its requests
// (for its calls to clear the thinking), and only for its own.
func TestThinkingPolicyWired(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, `
providers:
  sim: {type: sim}
models:
  quiet:
    thinking: {effort: high, max_budget_tokens: 4096, show: false}
    deployments: [{provider: sim, model: small}]
  chat:
    thinking: {effort: low}
    deployments: [{provider: sim, model: small}]
`))
	for alias, hide := range map[string]bool{"quiet": true, "chat": false} {
		rep := &levers.Report{}
		gw.Levers().Plan(&chat.Request{Model: alias, Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}, rep)
		if rep.HideThinking != hide {
			t.Errorf("%s: HideThinking %v, want %v", alias, rep.HideThinking, hide)
		}
	}
}
