package conversation

import (
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
	"github.com/google/go-cmp/cmp"
)

// TestPrompt checks the prompt's order (the stable part first, what is new
// with the question last) and its cache breakpoints: the system prompt,
// the end of the history, and the message unless this turn's context
// follows the history.
func TestPrompt(t *testing.T) {
	history := []store.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}}
	sys := chat.Message{Role: chat.RoleSystem, Content: "Be kind.", CacheBreakpoint: true}
	ctx := chat.Message{Role: chat.RoleUser, Content: "Context for this question:\n\nreturns.md\n\nshipping.md"}
	tests := []struct {
		name    string
		system  string
		history []store.Message
		texts   []string
		want    []chat.Message
	}{
		{
			name:   "first turn",
			system: "Be kind.",
			want:   []chat.Message{sys, {Role: chat.RoleUser, Content: "Returns?", CacheBreakpoint: true}},
		},
		{
			name:    "later turn",
			system:  "Be kind.",
			history: history,
			want: []chat.Message{sys, {Role: chat.RoleUser, Content: "Hi"}, {Role: chat.RoleAssistant, Content: "Hello!", CacheBreakpoint: true},
				{Role: chat.RoleUser, Content: "Returns?", CacheBreakpoint: true}},
		},
		{
			// The context changes with every question: after the history,
			// and not cached.
			name:    "later turn with context",
			system:  "Be kind.",
			history: history,
			texts:   []string{"returns.md", "shipping.md"},
			want: []chat.Message{sys, {Role: chat.RoleUser, Content: "Hi"}, {Role: chat.RoleAssistant, Content: "Hello!", CacheBreakpoint: true},
				ctx, {Role: chat.RoleUser, Content: "Returns?"}},
		},
		{
			name:  "no system prompt, context",
			texts: []string{"returns.md", "shipping.md"},
			want:  []chat.Message{ctx, {Role: chat.RoleUser, Content: "Returns?"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Options{SystemPrompt: func(alias string) string {
				if alias != "chat" {
					t.Errorf("system prompt asked for alias %q", alias)
				}
				return tt.system
			}})
			turn := &Turn{s: s, in: Input{Model: "chat", Hints: chat.Hints{Sim: "echo"}}}
			req := turn.prompt("Returns?", &gathered{history: tt.history, texts: tt.texts})
			if req.Model != "chat" || req.Hints.Sim != "echo" {
				t.Errorf("model %q, hints %+v", req.Model, req.Hints)
			}
			if diff := cmp.Diff(tt.want, req.Messages); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}
