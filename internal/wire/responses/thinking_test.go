package responses

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// reasoningChunks: an upstream reasoning item named before it opens, its
// summary in two deltas, its encrypted content, then a failed attempt's
// thinking, a restart, and the new attempt's thinking and answer.
var reasoningChunks = []chat.Chunk{
	{Thought: &chat.Thought{ID: "rs_up1", Format: chat.ThinkingResponses}},
	{Thinking: "**Planning**\n\n"},
	{Thinking: "I'll add \"12\" and 7."},
	{Thought: &chat.Thought{Signature: "gAAAAABpPDIU", ID: "rs_up1", Format: chat.ThinkingResponses}},
	{Thinking: "a failed attempt"},
	{Thought: &chat.Thought{Restart: true}},
	{Thinking: "again"},
	{Thought: &chat.Thought{Signature: "claude's", Format: chat.ThinkingAnthropic}},
	{Text: "19"},
}

func TestEncodeReasoning(t *testing.T) {
	tests := []struct {
		name               string
		summary, encrypted bool
		events             string
		output             string // the final response's output, as JSON
		unnamed            bool   // no Thought names the upstream's item before it ends
	}{
		{"summary and encrypted", true, true,
			"response.created response.in_progress " +
				"response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta response.reasoning_summary_text.delta " +
				"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
				"response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta " +
				"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
				"response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta " +
				"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
				"response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
				"response.completed",
			`[{"id":"rs_up1","type":"reasoning","encrypted_content":"gAAAAABpPDIU","summary":[{"type":"summary_text","text":"**Planning**\n\nI'll add \"12\" and 7."}]},` +
				`{"id":"rs_1_resp_1","type":"reasoning","summary":[{"type":"summary_text","text":"a failed attempt"}]},` +
				`{"id":"rs_2_resp_1","type":"reasoning","summary":[{"type":"summary_text","text":"again"}]},` +
				`{"id":"msg_3_resp_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"19","annotations":[],"logprobs":[]}]}]`, false},
		{"summary, then encrypted content in an item of the upstream's id", true, true,
			"response.created response.in_progress " +
				"response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta response.reasoning_summary_text.delta " +
				"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
				"response.output_item.added response.output_item.done " +
				"response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta " +
				"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
				"response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta " +
				"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done " +
				"response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
				"response.completed",
			`[{"id":"rs_0_resp_1","type":"reasoning","summary":[{"type":"summary_text","text":"**Planning**\n\nI'll add \"12\" and 7."}]},` +
				`{"id":"rs_up1","type":"reasoning","encrypted_content":"gAAAAABpPDIU","summary":[]},` +
				`{"id":"rs_2_resp_1","type":"reasoning","summary":[{"type":"summary_text","text":"a failed attempt"}]},` +
				`{"id":"rs_3_resp_1","type":"reasoning","summary":[{"type":"summary_text","text":"again"}]},` +
				`{"id":"msg_4_resp_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"19","annotations":[],"logprobs":[]}]}]`,
			true},
		{"encrypted only", false, true,
			"response.created response.in_progress response.output_item.added response.output_item.done " +
				"response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
				"response.completed",
			`[{"id":"rs_up1","type":"reasoning","encrypted_content":"gAAAAABpPDIU","summary":[]},` +
				`{"id":"msg_1_resp_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"19","annotations":[],"logprobs":[]}]}]`, false},
		{"neither", false, false,
			"response.created response.in_progress " +
				"response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
				"response.completed",
			`[{"id":"msg_0_resp_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"19","annotations":[],"logprobs":[]}]}]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &EventEncoder{ID: "resp_1", Model: "gpt-5", CreatedAt: 1700000000, Summary: tt.summary, Encrypted: tt.encrypted}
			chunks := reasoningChunks
			if tt.unnamed {
				chunks = chunks[1:]
			}
			var b []byte
			for i := range chunks {
				b = e.Chunk(b, &chunks[i])
			}
			b = e.Finish(b, chat.FinishStop, &chat.Usage{InputTokens: 5, OutputTokens: 40, ReasoningTokens: 38})
			if tt.name == "summary and encrypted" {
				golden(t, "constructed_encode_reasoning.sse", b)
			}
			evs := events(t, b)
			if got := types(evs); got != tt.events {
				t.Errorf("events:\n got %s\nwant %s", got, tt.events)
			}
			// Every event of an item names the item's output_index and id
			// as output_item.added did.
			ids := map[float64]any{}
			for _, ev := range evs {
				idx, ok := ev["output_index"].(float64)
				if !ok {
					continue
				}
				id := ev["item_id"]
				if item, ok := ev["item"].(map[string]any); ok {
					id = item["id"]
				}
				if ev["type"] == "response.output_item.added" {
					ids[idx] = id
				} else if ids[idx] != id {
					t.Errorf("%s at output_index %v names %v, want %v", ev["type"], idx, id, ids[idx])
				}
			}
			out, _ := json.Marshal(evs[len(evs)-1]["response"].(map[string]any)["output"])
			var want any
			json.Unmarshal([]byte(tt.output), &want)
			wantJSON, _ := json.Marshal(want)
			if string(out) != string(wantJSON) {
				t.Errorf("output =\n%s\nwant\n%s", out, wantJSON)
			}
			// The whole response says the same as the stream's last event.
			col := chat.ThinkingCollector{}
			for i := range reasoningChunks {
				col.Add(&reasoningChunks[i])
			}
			whole := (&EventEncoder{ID: "resp_1", Model: "gpt-5", Summary: tt.summary, Encrypted: tt.encrypted}).Response(&chat.Response{Choices: []chat.Choice{{Text: "19", Thinking: col.Blocks(), FinishReason: chat.FinishStop}}})
			var r struct {
				Output []struct {
					Type             string `json:"type"`
					EncryptedContent string `json:"encrypted_content"`
				} `json:"output"`
			}
			if err := json.Unmarshal(whole, &r); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range r.Output {
				kinds = append(kinds, o.Type+":"+o.EncryptedContent)
			}
			wantKinds := map[string][]string{
				"summary and encrypted": {"reasoning:", "message:"}, // the restart dropped the first attempt's
				"summary, then encrypted content in an item of the upstream's id": {"reasoning:", "message:"},
				"encrypted only": {"message:"},
				"neither":        {"message:"},
			}[tt.name]
			if d := cmp.Diff(wantKinds, kinds); d != "" {
				t.Errorf("Response output (-want +got):\n%s\n%s", d, whole)
			}
		})
	}
}

// TestEncodeResponseReasoning: a whole response lists its reasoning items
// first, a Responses block with its upstream id and encrypted content.
func TestEncodeResponseReasoning(t *testing.T) {
	e := &EventEncoder{ID: "resp_9", Model: "m", Summary: true, Encrypted: true}
	b := e.Response(&chat.Response{Choices: []chat.Choice{{Text: "ok", FinishReason: chat.FinishStop, Thinking: []chat.ThinkingBlock{
		{Text: "sum", Signature: "enc", Format: chat.ThinkingResponses, ID: "rs_abc"},
		{Redacted: "claude's", Format: chat.ThinkingAnthropic},
		{Text: "gemini", Signature: "g", Format: chat.ThinkingGemini, ID: "x"},
	}}}})
	var r struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Output) != 3 {
		t.Fatalf("Response = %s (%v)", b, err)
	}
	for i, want := range []string{
		`{"id":"rs_abc","type":"reasoning","encrypted_content":"enc","summary":[{"type":"summary_text","text":"sum"}]}`,
		`{"id":"rs_1_resp_9","type":"reasoning","summary":[{"type":"summary_text","text":"gemini"}]}`,
	} {
		if string(r.Output[i]) != want {
			t.Errorf("output[%d] = %s, want %s", i, r.Output[i], want)
		}
	}
}

// TestParseRequestReasoning: reasoning and include ask for thinking and
// say what the client sees; reasoning input items are the thinking of
// the assistant turn that follows.
func TestParseRequestReasoning(t *testing.T) {
	tests := []struct {
		name, fields       string
		ask                *chat.ThinkingAsk
		summary, encrypted bool
		err                string
	}{
		{name: "none"},
		{name: "effort", fields: `"reasoning":{"effort":"low"},`, ask: &chat.ThinkingAsk{Effort: "low", Hide: true}},
		{name: "summary", fields: `"reasoning":{"effort":"xhigh","summary":"auto"},`, ask: &chat.ThinkingAsk{Effort: "xhigh"}, summary: true},
		{name: "summary only", fields: `"reasoning":{"summary":"detailed"},`, ask: &chat.ThinkingAsk{}, summary: true},
		{name: "summary none", fields: `"reasoning":{"effort":"medium","summary":"none"},`, ask: &chat.ThinkingAsk{Effort: "medium", Hide: true}},
		{name: "encrypted", fields: `"reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"],`, ask: &chat.ThinkingAsk{Effort: "high", Hide: true}, encrypted: true},
		{name: "empty reasoning", fields: `"reasoning":{},`},
		{name: "bad effort", fields: `"reasoning":{"effort":"max"},`, err: `reasoning.effort: "max" is not one of none, minimal, low, medium, high, xhigh`},
		{name: "bad summary", fields: `"reasoning":{"summary":"long"},`, err: `reasoning.summary: "long" is not one of auto, concise, detailed, none`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, err := ParseRequest([]byte(`{"model":"m",`+tt.fields+`"input":"hi"}`), nil)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("ParseRequest() error = %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.ask, pr.Request.Thinking); d != "" || pr.Summary != tt.summary || pr.Encrypted != tt.encrypted {
				t.Errorf("Summary %v Encrypted %v, want %v %v; ask (-want +got):\n%s", pr.Summary, pr.Encrypted, tt.summary, tt.encrypted, d)
			}
		})
	}

	body := `{"model":"m","input":[
		{"role":"user","content":"12+7?"},
		{"type":"reasoning","id":"rs_1","encrypted_content":"gAAA1","summary":[{"type":"summary_text","text":"Plan"},{"type":"summary_text","text":"Add."}]},
		{"type":"function_call","call_id":"c1","name":"add","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"19"},
		{"type":"reasoning","id":"rs_2","summary":[]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"19"}]},
		{"type":"reasoning","id":"rs_3","encrypted_content":"dropped","summary":[]},
		{"role":"user","content":"thanks"},
		{"type":"item_reference","id":"rs_0_resp_earlier"}]}`
	pr, err := ParseRequest([]byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]chat.ThinkingBlock
	for _, m := range pr.Request.Messages {
		got = append(got, m.Thinking)
	}
	want := [][]chat.ThinkingBlock{
		nil,
		{{Text: "Plan\n\nAdd.", Signature: "gAAA1", Format: chat.ThinkingResponses, ID: "rs_1"}},
		nil,
		{{Format: chat.ThinkingResponses, ID: "rs_2"}},
		nil,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("messages' thinking (-want +got):\n%s", d)
	}
}

// TestEncodeReasoningAllocs: a summary delta costs no allocation (the
// summary is kept in a buffer that grows by doubling).
func TestEncodeReasoningAllocs(t *testing.T) {
	e := &EventEncoder{ID: "resp_1", Model: "m", Summary: true}
	b := make([]byte, 0, 4096)
	c := chat.Chunk{Thinking: "a thinking delta of some words"}
	if n := testing.AllocsPerRun(1000, func() { b = e.Chunk(b[:0], &c) }); n != 0 {
		t.Errorf("Chunk(thinking) allocates %v times per delta", n)
	}
}
