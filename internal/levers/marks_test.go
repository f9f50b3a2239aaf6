package levers

import (
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

// TestShapeCacheBreakpoints checks which messages shape marks as cache
// breakpoints: with prompt caching, the last message, the system prompt
// and the previous request's last message, after the client's own marks
// and within four marks in all (one kept for the tools); without it, none.
func TestShapeCacheBreakpoints(t *testing.T) {
	sys := chat.Message{Role: chat.RoleSystem, Content: "Be kind."}
	u := func(s string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: s} }
	a := func(s string) chat.Message { return chat.Message{Role: chat.RoleAssistant, Content: s} }
	marked := func(m chat.Message) chat.Message { m.CacheBreakpoint = true; return m }
	call := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}}}
	result := chat.Message{Role: chat.RoleTool, ToolCallID: "c1", Content: "42"}
	tools := []chat.Tool{{Name: "f"}}
	tests := []struct {
		name    string
		off     bool
		brevity string
		msgs    []chat.Message
		tools   []chat.Tool
		want    []int // the marked messages, in order
	}{
		{name: "first turn", msgs: []chat.Message{sys, u("q1")}, want: []int{0, 1}},
		{name: "first turn, no system prompt", msgs: []chat.Message{u("q1")}, want: []int{0}},
		{
			// The question written now is read by the next request; the
			// previous request's question is read now.
			name: "three turns and tools",
			msgs: []chat.Message{sys, u("q1"), a("a1"), u("q2"), a("a2"), u("q3")}, tools: tools,
			want: []int{0, 3, 5},
		},
		{name: "prefill", msgs: []chat.Message{sys, u("q1"), a("a1"), u("q2"), a("Sure:")}, want: []int{0, 1, 3}},
		{
			name: "tool loop",
			msgs: []chat.Message{sys, u("q1"), call, result, call, result}, tools: tools,
			want: []int{0, 3, 5},
		},
		{
			// Marks on the conversation (a client's, the /v1/chat prompt's)
			// say where the stable part ends: only the system prompt is
			// added.
			name: "client marked the conversation",
			msgs: []chat.Message{sys, u("q1"), marked(a("a1")), u("q2"), marked(u("q3"))}, tools: tools,
			want: []int{0, 2, 4},
		},
		{
			name: "client marked two system blocks: one mark left with tools",
			msgs: []chat.Message{marked(sys), marked(sys), u("q1"), a("a1"), u("q2")}, tools: tools,
			want: []int{0, 1, 4},
		},
		{
			name: "client marked two system blocks: two marks left without tools",
			msgs: []chat.Message{marked(sys), marked(sys), u("q1"), a("a1"), u("q2")},
			want: []int{0, 1, 2, 4},
		},
		{
			name: "four client marks",
			msgs: []chat.Message{marked(sys), marked(u("q1")), marked(a("a1")), marked(u("q2")), a("a2"), u("q3")},
			want: []int{0, 1, 2, 3},
		},
		{name: "brevity inserts the system prompt", brevity: "Be brief.", msgs: []chat.Message{u("q1"), a("a1"), u("q2")}, want: []int{0, 1, 3}},
		{name: "off: the client's marks are dropped", off: true, msgs: []chat.Message{marked(sys), u("q1"), a("a1"), marked(u("q2"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &chat.Request{Model: "chat", Messages: tt.msgs, Tools: tt.tools}
			before := cloneMessages(tt.msgs)
			got := shape(req, Alias{PromptCaching: !tt.off, Brevity: tt.brevity})
			var idx []int
			for i, m := range got.Messages {
				if m.CacheBreakpoint {
					idx = append(idx, i)
				}
			}
			if diff := cmp.Diff(tt.want, idx); diff != "" {
				t.Errorf("marked messages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, req.Messages); diff != "" {
				t.Errorf("the request was changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestShapeKeepsASettledRequest: a request whose marks need no change is
// passed on as it is, without a copy.
func TestShapeKeepsASettledRequest(t *testing.T) {
	marked := []chat.Message{{Role: chat.RoleSystem, Content: "s", CacheBreakpoint: true}, {Role: chat.RoleUser, Content: "q", CacheBreakpoint: true}}
	for _, tt := range []struct {
		name string
		req  *chat.Request
		a    Alias
	}{
		{"caching, marked", &chat.Request{Messages: marked}, Alias{PromptCaching: true}},
		{"no caching, unmarked", &chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "q"}}}, Alias{}},
	} {
		if got := shape(tt.req, tt.a); got != tt.req {
			t.Errorf("%s: shape copied the request", tt.name)
		}
	}
}

func cloneMessages(msgs []chat.Message) []chat.Message { return append([]chat.Message(nil), msgs...) }
