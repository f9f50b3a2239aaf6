package openai

import (
	"math"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

func checkSimpleEncode(t *testing.T, req *chat.Request, field string) bool {
	t.Helper()
	got, ok := encodeSimpleRequest(req, field)
	if !ok {
		return false
	}
	want, err := encodeRequest(req, field)
	if err != nil {
		t.Fatalf("the fast path encoded what EncodeRequest refuses: %v", err)
	}
	if string(got) != string(want) {
		t.Fatalf("fast path differs:\n got %s\nwant %s", got, want)
	}
	return true
}

func TestEncodeSimpleRequest(t *testing.T) {
	temp, seed := 0.7, int64(-3)
	simple := &chat.Request{Model: "gpt-4o", Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: "Be <brief> & kind"},
		{Role: chat.RoleUser, Content: "héllo \"x\"\n\u2028\x01"},
		{Role: chat.RoleAssistant, Content: ""},
	}, MaxTokens: 64, Temperature: &temp, TopP: &temp, N: 2, Seed: &seed, User: "u"}
	for _, field := range []string{"max_tokens", "max_completion_tokens"} {
		if !checkSimpleEncode(t, simple, field) {
			t.Errorf("the fast path did not take a simple request (%s)", field)
		}
	}
	// Thinking asked for, and an assistant turn's thinking, which is not
	// sent (reasoningEffort's and fromChat's rules, on both paths).
	for _, ask := range []*chat.ThinkingAsk{{Effort: "high"}, {BudgetTokens: 3000}, {Effort: "none"}, {}} {
		req := *simple
		req.Thinking = ask
		req.Messages = append(req.Messages[:2:2], chat.Message{Role: chat.RoleAssistant, Content: "a",
			Thinking: []chat.ThinkingBlock{{Text: "hmm", Signature: "sig", Format: chat.ThinkingAnthropic}}})
		if !checkSimpleEncode(t, &req, "max_tokens") {
			t.Errorf("the fast path did not take a request with thinking %+v", ask)
		}
	}
	nan := math.NaN()
	for _, req := range []*chat.Request{
		{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "x", Name: "n"}}},
		{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, Stop: []string{"a"}},
		{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, Tools: []chat.Tool{{Name: "f"}}},
		{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, Temperature: &nan},
	} {
		if checkSimpleEncode(t, req, "max_tokens") {
			t.Errorf("the fast path took %+v", req)
		}
	}
}

func FuzzEncodeSimpleRequest(f *testing.F) {
	f.Add("gpt-4o", "user", "hello", "u", 0.7, 64, int64(1), 1, true, "")
	f.Add("m<>&", "system", "\xff\u2028", "", 1e-9, 0, int64(-1), 3, false, "low")
	f.Add("o3", "user", "x", "", 1.0, 0, int64(0), 1, false, "none")
	f.Fuzz(func(t *testing.T, model, role, content, user string, temp float64, maxTokens int, seed int64, n int, withSeed bool, effort string) {
		req := &chat.Request{Model: model, Messages: []chat.Message{{Role: chat.Role(role), Content: content}, {Role: chat.RoleUser, Content: content + role}},
			MaxTokens: maxTokens, Temperature: &temp, N: n, User: user}
		if effort != "" {
			req.Thinking = &chat.ThinkingAsk{Effort: effort, BudgetTokens: maxTokens}
		}
		if withSeed {
			req.Seed = &seed
		} else {
			req.TopP = &temp
		}
		checkSimpleEncode(t, req, "max_tokens")
	})
}

func BenchmarkEncodeRequest(b *testing.B) {
	temp := 0.7
	req := &chat.Request{Model: "gpt-4o", Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: "You are a helpful assistant."},
		{Role: chat.RoleUser, Content: "What is the capital of France?"},
	}, MaxTokens: 256, Temperature: &temp}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			EncodeRequest(req, "")
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			encodeRequest(req, "max_tokens")
		}
	})
}
