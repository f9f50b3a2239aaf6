package gemini

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// TestThinkingConfig checks the per-model mapping of a thinking ask.
func TestThinkingConfig(t *testing.T) {
	type want struct {
		Config    *ThinkingConfig
		MaxTokens int
	}
	tests := []struct {
		name      string
		model     string
		ask       *chat.ThinkingAsk
		maxTokens int
		want      want
	}{
		{"no ask", "gemini-2.5-flash", nil, 100, want{nil, 100}},
		{"budget from the effort, added to the answer cap", "gemini-2.5-flash", &chat.ThinkingAsk{Effort: "low"}, 100,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingBudget: ptr(2048)}, 2148}},
		{"no cap stays unset", "models/gemini-2.5-flash", &chat.ThinkingAsk{Effort: "low"}, 0,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingBudget: ptr(2048)}, 0}},
		{"the client's budget, within the model's range", "gemini-2.5-pro", &chat.ThinkingAsk{BudgetTokens: 50000}, 100,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingBudget: ptr(32768)}, 32868}},
		{"no effort nor budget: dynamic", "gemini-2.5-flash-lite", &chat.ThinkingAsk{}, 100,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingBudget: ptr(-1)}, 100}},
		{"none turns Flash's thinking off", "gemini-2.5-flash", &chat.ThinkingAsk{Effort: "none"}, 100,
			want{&ThinkingConfig{ThinkingBudget: ptr(0)}, 100}},
		{"none on Pro, which cannot stop: the least", "gemini-2.5-pro", &chat.ThinkingAsk{Effort: "none"}, 100,
			want{&ThinkingConfig{ThinkingBudget: ptr(128)}, 100}},
		{"hidden thinking is not streamed", "gemini-2.5-flash", &chat.ThinkingAsk{Effort: "minimal", Hide: true}, 0,
			want{&ThinkingConfig{ThinkingBudget: ptr(1024)}, 0}},
		{"Gemini 3 Flash by level", "gemini-3-flash-preview", &chat.ThinkingAsk{Effort: "minimal"}, 100,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingLevel: "minimal"}, 1124}},
		{"Gemini 3 Pro: medium is high", "gemini-3-pro-preview", &chat.ThinkingAsk{Effort: "medium"}, 100,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingLevel: "high"}, 8292}},
		{"Gemini 3 Pro: xhigh is its highest", "gemini-3-pro-preview", &chat.ThinkingAsk{Effort: "xhigh"}, 0,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingLevel: "high"}, 0}},
		{"Gemini 3 Pro: none is low", "gemini-3-pro-preview", &chat.ThinkingAsk{Effort: "none"}, 100,
			want{&ThinkingConfig{ThinkingLevel: "low"}, 100}},
		{"a level from a budget", "gemini-3-flash", &chat.ThinkingAsk{BudgetTokens: 3000}, 0,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingLevel: "low"}, 0}},
		{"a later Gemini of no row", "gemini-3.8-flash", &chat.ThinkingAsk{Effort: "minimal"}, 0,
			want{&ThinkingConfig{IncludeThoughts: true, ThinkingLevel: "low"}, 0}},
		{"no effort: the model's default level", "gemini-4-neon", &chat.ThinkingAsk{}, 0,
			want{&ThinkingConfig{IncludeThoughts: true}, 0}},
		{"a model that cannot think", "gemini-2.0-flash", &chat.ThinkingAsk{Effort: "high"}, 100, want{nil, 100}},
		{"a name no row knows: only asked to include thoughts", "learnlm-2.0", &chat.ThinkingAsk{Effort: "high"}, 100,
			want{&ThinkingConfig{IncludeThoughts: true}, 100}},
		{"a name no row knows, thinking hidden", "reasoner", &chat.ThinkingAsk{Effort: "high", Hide: true}, 100, want{nil, 100}},
		{"a name no row knows, no thinking", "reasoner", &chat.ThinkingAsk{Effort: "none"}, 100, want{nil, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, n := thinkingConfig(tt.model, tt.ask, tt.maxTokens)
			if diff := cmp.Diff(tt.want, want{tc, n}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeRequestThinking(t *testing.T) {
	req := &chat.Request{
		Model: "gemini-2.5-flash", MaxTokens: 100,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hi"}},
		Thinking: &chat.ThinkingAsk{Effort: "low"},
	}
	got, err := EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"maxOutputTokens":2148,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":2048}}}`
	if string(got) != want {
		t.Errorf("EncodeRequest = %s, want %s", got, want)
	}
}

// TestThoughtSignatureRoundTrip reads recorded Gemini streams as the
// router does, keeps the collected thinking with the assistant message,
// and checks that the next request puts each recorded thoughtSignature
// back, byte for byte, on the part Gemini put it on, in place of the
// placeholder; thought text is not sent back.
func TestThoughtSignatureRoundTrip(t *testing.T) {
	tests := []struct {
		file string
		sigs []string // per model part of the next request's assistant turn
	}{
		{"gemini_tool_call.sse", []string{sigSquareRoot}},
		{"gemini_parallel_tool_calls.sse", []string{sigBestCountry, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			var col chat.Collector
			for c, err := range pull(bytes.NewReader(raw), 0) {
				if err != nil {
					t.Fatal(err)
				}
				col.Add(c)
			}
			choice := col.Response().Choices[0]
			if n := len(choice.Thinking); n != 1 || choice.Thinking[0].Format != chat.ThinkingGemini || choice.Thinking[0].Text == "" {
				t.Fatalf("collected thinking %+v, want one signed Gemini block with its text", choice.Thinking)
			}
			msgs := []chat.Message{
				{Role: chat.RoleUser, Content: "q"},
				{Role: chat.RoleAssistant, Content: choice.Text, ToolCalls: choice.ToolCalls, Thinking: choice.Thinking},
			}
			for _, tc := range choice.ToolCalls {
				msgs = append(msgs, chat.Message{Role: chat.RoleTool, ToolCallID: tc.ID, Content: "1"})
			}
			body, err := EncodeRequest(&chat.Request{Model: "gemini-3-pro-preview", Messages: msgs})
			if err != nil {
				t.Fatal(err)
			}
			var sent Request
			if err := json.Unmarshal(body, &sent); err != nil {
				t.Fatal(err)
			}
			var sigs []string
			for _, p := range sent.Contents[1].Parts {
				if p.Thought || p.Text != "" {
					t.Errorf("thought or text part %+v sent back", p)
				}
				sigs = append(sigs, p.ThoughtSignature)
			}
			if diff := cmp.Diff(tt.sigs, sigs); diff != "" {
				t.Errorf("signatures per part (-want +got):\n%s", diff)
			}
		})
	}
}

// TestModelPartsSignatures checks where signatures go on a turn, and
// which thinking blocks are not Gemini's to take.
func TestModelPartsSignatures(t *testing.T) {
	calls := []chat.ToolCall{{ID: "a", Name: "f", Arguments: "{}"}, {ID: "b", Name: "g", Arguments: "{}"}}
	gem := func(sig string) chat.ThinkingBlock {
		return chat.ThinkingBlock{Text: "t", Signature: sig, Format: chat.ThinkingGemini}
	}
	others := []chat.ThinkingBlock{
		{Text: "unsigned"},
		{Text: "Claude's", Signature: "EqQB", Format: chat.ThinkingAnthropic},
		{Redacted: "xyz", Format: chat.ThinkingAnthropic},
	}
	tests := []struct {
		name string
		m    chat.Message
		want []string
	}{
		{"no signature: the placeholder on every call", chat.Message{Content: "x", ToolCalls: calls, Thinking: others},
			[]string{"", SkipThoughtSignature, SkipThoughtSignature}},
		{"the first call", chat.Message{Content: "x", ToolCalls: calls, Thinking: append([]chat.ThinkingBlock{gem("s1")}, others...)},
			[]string{"", "s1", ""}},
		{"two signatures, two calls", chat.Message{ToolCalls: calls, Thinking: []chat.ThinkingBlock{gem("s1"), gem("s2")}},
			[]string{"s1", "s2"}},
		{"no call: the text", chat.Message{Content: "x", Thinking: []chat.ThinkingBlock{gem("s1")}},
			[]string{"s1"}},
		{"no call, another format: nothing", chat.Message{Content: "x", Thinking: others},
			[]string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.m.Role = chat.RoleAssistant
			parts, err := modelParts(&tt.m)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range parts {
				got = append(got, p.ThoughtSignature)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
