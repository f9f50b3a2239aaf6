package levers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// TestShapeCaps checks the answer cap (clients may ask for less, never
// more; the default when they ask nothing) and the brevity instruction
// (appended to the last leading system message, or a system message of
// its own), made on a copy.
func TestShapeCaps(t *testing.T) {
	sys := func(s string) chat.Message { return chat.Message{Role: chat.RoleSystem, Content: s} }
	user := chat.Message{Role: chat.RoleUser, Content: "Where is my order?"}
	withParts := sys("Be kind. ")
	withParts.Parts = []chat.Part{{Type: "text", Text: "Be kind. "}}
	tests := []struct {
		name  string
		a     Alias
		max   int // the client's
		msgs  []chat.Message
		want  int
		wantM []chat.Message
	}{
		{name: "no levers", msgs: []chat.Message{user}, wantM: []chat.Message{user}},
		{name: "the default when the client sets none", a: Alias{DefaultMaxTokens: 200}, msgs: []chat.Message{user}, want: 200, wantM: []chat.Message{user}},
		{name: "the cap when the client sets none", a: Alias{MaxTokens: 500}, msgs: []chat.Message{user}, want: 500, wantM: []chat.Message{user}},
		{name: "the client asks for less", a: Alias{MaxTokens: 500, DefaultMaxTokens: 200}, max: 100, msgs: []chat.Message{user}, want: 100, wantM: []chat.Message{user}},
		{name: "the client asks for more", a: Alias{MaxTokens: 500}, max: 1000, msgs: []chat.Message{user}, want: 500, wantM: []chat.Message{user}},
		{name: "a default over the cap", a: Alias{MaxTokens: 500, DefaultMaxTokens: 800}, msgs: []chat.Message{user}, want: 500, wantM: []chat.Message{user}},
		{
			name: "brevity after the system prompt", a: Alias{Brevity: "Be brief."},
			msgs:  []chat.Message{withParts, user},
			wantM: []chat.Message{sys("Be kind. \n\nBe brief."), user},
		},
		{
			name: "brevity after the last system message", a: Alias{Brevity: "Be brief."},
			msgs:  []chat.Message{sys("One."), sys("Two."), user},
			wantM: []chat.Message{sys("One."), sys("Two.\n\nBe brief."), user},
		},
		{
			name: "brevity without a system prompt", a: Alias{Brevity: "Be brief.", MaxTokens: 50},
			msgs: []chat.Message{user}, want: 50,
			wantM: []chat.Message{sys("Be brief."), user},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &chat.Request{Model: "chat", MaxTokens: tt.max, Messages: tt.msgs}
			before := cloneMessages(tt.msgs)
			got := shape(req, tt.a)
			if got.MaxTokens != tt.want {
				t.Errorf("MaxTokens = %d, want %d", got.MaxTokens, tt.want)
			}
			if diff := cmp.Diff(tt.wantM, got.Messages); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, req.Messages); diff != "" || req.MaxTokens != tt.max {
				t.Errorf("the client's request changed (-before +after):\n%s", diff)
			}
			if same := got == req; same != (tt.want == tt.max && tt.a.Brevity == "") {
				t.Errorf("shape returned the request itself: %v", same)
			}
		})
	}
}

// TestRuleMatches checks a routing rule's conditions: every one it sets
// must hold. Keywords are whole words of the last user message, in any
// case.
func TestRuleMatches(t *testing.T) {
	ask := func(hints chat.Hints, msgs ...chat.Message) *chat.Request {
		return &chat.Request{Model: "chat", Hints: hints, Messages: msgs}
	}
	user := func(s string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: s} }
	assistant := func(s string) chat.Message { return chat.Message{Role: chat.RoleAssistant, Content: s} }
	short := ask(chat.Hints{}, user("Where is my order?"))
	tokens := chat.EstimateInputTokens(short)
	fast := chat.Hints{Hint: "fast"}
	tests := []struct {
		name string
		rule Rule
		req  *chat.Request
		want bool
	}{
		{name: "no condition", req: short, want: true},
		{name: "prompt at the limit", rule: Rule{MaxInputTokens: tokens}, req: short, want: true},
		{name: "prompt over the limit", rule: Rule{MaxInputTokens: tokens - 1}, req: short},
		{name: "hint", rule: Rule{Hint: "fast"}, req: ask(fast, user("Hi")), want: true},
		{name: "another hint", rule: Rule{Hint: "fast"}, req: ask(chat.Hints{Hint: "smart"}, user("Hi"))},
		{name: "no hint", rule: Rule{Hint: "fast"}, req: short},
		{name: "route tag", rule: Rule{Route: "faq"}, req: ask(chat.Hints{RouteTag: "faq"}, user("Hi")), want: true},
		{name: "another route tag", rule: Rule{Route: "faq"}, req: ask(chat.Hints{RouteTag: "billing"}, user("Hi"))},
		{name: "keyword, any case, among punctuation", rule: Rule{Keywords: []string{"Refund"}}, req: ask(chat.Hints{}, user("I want a REFUND, please!")), want: true},
		{name: "one of the keywords", rule: Rule{Keywords: []string{"invoice", "refund"}}, req: ask(chat.Hints{}, user("refund?")), want: true},
		{name: "a keyword of digits", rule: Rule{Keywords: []string{"404"}}, req: ask(chat.Hints{}, user("Why a 404?")), want: true},
		{name: "a keyword inside a word", rule: Rule{Keywords: []string{"refund"}}, req: ask(chat.Hints{}, user("refunding"))},
		{
			name: "keywords of the last user message only", rule: Rule{Keywords: []string{"refund"}},
			req: ask(chat.Hints{}, user("refund?"), assistant("A refund takes 5 days."), user("Thanks")),
		},
		{name: "keywords and no user message", rule: Rule{Keywords: []string{"refund"}}, req: ask(chat.Hints{}, chat.Message{Role: chat.RoleSystem, Content: "refund"})},
		{name: "every condition holds", rule: Rule{Hint: "fast", Keywords: []string{"order"}, MaxInputTokens: tokens}, req: ask(fast, user("Where is my order?")), want: true},
		{name: "one condition fails", rule: Rule{Hint: "fast", Keywords: []string{"refund"}}, req: ask(fast, user("Where is my order?"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rule.matches(tt.req); got != tt.want {
				t.Errorf("%+v matches = %v, want %v", tt.rule, got, tt.want)
			}
		})
	}
}

// TestRulesRoute checks which alias the rules send a request to: the
// first rule that matches and names an alias the levers know, named
// "ruleN" when it has no name; the request goes on with that alias's
// levers, and the report says which rule sent it from which alias.
func TestRulesRoute(t *testing.T) {
	chatLevers := Alias{MaxTokens: 1000, Rules: []Rule{
		{Name: "to-nowhere", Hint: "fast", Use: "missing"},
		{Hint: "fast", Use: "small"},
		{Name: "billing", Route: "billing", Use: "small"},
	}}
	small := Alias{MaxTokens: 50, Brevity: "Be brief."}
	tests := []struct {
		name      string
		hints     chat.Hints
		model     string
		rule      string
		requested string
		maxTokens int
	}{
		{name: "no rule matches", model: "chat", maxTokens: 1000},
		{name: "the first rule naming a known alias", hints: chat.Hints{Hint: "fast"}, model: "small", rule: "rule2", requested: "chat", maxTokens: 50},
		{name: "a named rule", hints: chat.Hints{RouteTag: "billing"}, model: "small", rule: "billing", requested: "chat", maxTokens: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scripted{script: hello}
			l := New(Options{Inner: r, Aliases: map[string]Alias{"chat": chatLevers, "small": small}})
			req := &chat.Request{Model: "chat", Hints: tt.hints, Messages: []chat.Message{{Role: chat.RoleUser, Content: "Where is my order?"}}}
			rep := &Report{}
			if _, _, err := read(t.Context(), l, req, rep, 0); err != nil {
				t.Fatal(err)
			}
			reqs, _, _ := r.calls()
			if len(reqs) != 1 {
				t.Fatalf("the router was sent %d requests, want 1", len(reqs))
			}
			got := reqs[0]
			if got.Model != tt.model || got.MaxTokens != tt.maxTokens || rep.Rule != tt.rule || rep.Requested != tt.requested {
				t.Errorf("routed to %q (max %d), rule %q from %q; want %q (max %d), rule %q from %q",
					got.Model, got.MaxTokens, rep.Rule, rep.Requested, tt.model, tt.maxTokens, tt.rule, tt.requested)
			}
			if req.Model != "chat" || req.MaxTokens != 0 {
				t.Errorf("the client's request changed: %q, max %d", req.Model, req.MaxTokens)
			}
		})
	}
}
