package levers

import (
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// TestFingerprint: the same content has the same hashes; any change to
// the content changes the repeat hash, and only a change to the system
// prompt or the tools changes the prefix hash; a request no cache would
// take has no repeat hash.
func TestFingerprint(t *testing.T) {
	zero := 0.0
	req := func(system, user string, mod ...func(*chat.Request)) *chat.Request {
		r := &chat.Request{Model: "chat", Temperature: &zero, Messages: []chat.Message{{Role: chat.RoleSystem, Content: system}, {Role: chat.RoleUser, Content: user}}}
		r.Hints.Tenant = "acme"
		for _, m := range mod {
			m(r)
		}
		return r
	}
	r0, p0, n0 := fingerprint(req("You help.", "hi"))
	if r0 == 0 || p0 == 0 || n0 == 0 {
		t.Fatalf("fingerprint = %d, %d, %d; want hashes and the prefix's tokens", r0, p0, n0)
	}
	if r, p, _ := fingerprint(req("You help.", "hi")); r != r0 || p != p0 {
		t.Error("the same request hashes differently")
	}
	for name, other := range map[string]*chat.Request{
		"another user message": req("You help.", "hello"),
		"another tenant":       req("You help.", "hi", func(r *chat.Request) { r.Hints.Tenant = "globex" }),
		"another max_tokens":   req("You help.", "hi", func(r *chat.Request) { r.MaxTokens = 10 }),
		"no temperature":       req("You help.", "hi", func(r *chat.Request) { r.Temperature = nil }),
	} {
		if r, p, _ := fingerprint(other); r == r0 || r == 0 {
			t.Errorf("%s: repeat hash %d, want another", name, r)
		} else if (name == "another user message" || name == "another max_tokens" || name == "no temperature") && p != p0 {
			t.Errorf("%s: the prefix hash changed", name)
		}
	}
	if _, p, _ := fingerprint(req("You help more.", "hi")); p == p0 {
		t.Error("another system prompt has the same prefix hash")
	}
	if _, p, n := fingerprint(&chat.Request{Model: "chat", Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}); p != 0 || n != 0 {
		t.Errorf("no system prompt, no tools: prefix %d of %d tokens, want none", p, n)
	}
	if r, _, _ := fingerprint(req("You help.", "hi", func(r *chat.Request) { r.N = 2 })); r != 0 {
		t.Errorf("two choices: repeat hash %d, want 0 (no cache takes it)", r)
	}
}

// BenchmarkFingerprint is its cost on every request: a system prompt of
// about 300 tokens and a short question.
func BenchmarkFingerprint(b *testing.B) {
	r := &chat.Request{Model: "chat", Messages: []chat.Message{{Role: chat.RoleSystem, Content: strings.Repeat("You are a helpful assistant. ", 50)}, {Role: chat.RoleUser, Content: "Where is my order?"}}}
	b.ReportAllocs()
	for b.Loop() {
		fingerprint(r)
	}
}
