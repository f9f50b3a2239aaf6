package responses

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/sse"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to rewrite):\n%s", name, got)
	}
}

// events parses an encoded stream with firstword's SSE reader, checking
// that every event is JSON whose type is the event's name and whose
// sequence numbers count up from 0.
func events(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(b), 0)
	var out []map[string]any
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		var m map[string]any
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("event %d: %v: %s", len(out), err, ev.Data)
		}
		if m["type"] != ev.Type {
			t.Errorf("event %q has type %v", ev.Type, m["type"])
		}
		if seq, _ := m["sequence_number"].(float64); int(seq) != len(out) {
			t.Errorf("event %d has sequence_number %v", len(out), m["sequence_number"])
		}
		out = append(out, m)
	}
	return out
}

func types(evs []map[string]any) string {
	var s []string
	for _, e := range evs {
		s = append(s, e["type"].(string))
	}
	return strings.Join(s, " ")
}

func TestEncodeTextAndTools(t *testing.T) {
	e := &EventEncoder{ID: "resp_1", Model: "gpt-x", CreatedAt: 1700000000}
	var b []byte
	for _, c := range []chat.Chunk{
		{Text: "Let me "},
		{Text: "check \"that\"."},
		{Choice: 1, Text: "other choice, not encoded"},
		{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "call_a", Name: "weather"}}},
		{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: `{"city":`}, {Index: 1, ID: "call_b", Name: "time", Arguments: `{}`}}},
		{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: `"Oslo"}`}}},
	} {
		b = e.Chunk(b, &c)
	}
	b = e.Finish(b, chat.FinishToolCalls, &chat.Usage{InputTokens: 20, OutputTokens: 9, CachedInputTokens: 4})
	golden(t, "text_and_tools.sse", b)

	evs := events(t, b)
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done response.completed"
	if got := types(evs); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	resp := evs[len(evs)-1]["response"].(map[string]any)
	out := resp["output"].([]any)
	if len(out) != 3 {
		t.Fatalf("output = %v", out)
	}
	text := out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
	if text != `Let me check "that".` {
		t.Errorf("text = %q", text)
	}
	if args := out[1].(map[string]any)["arguments"]; args != `{"city":"Oslo"}` {
		t.Errorf("arguments = %q", args)
	}
	if u := resp["usage"].(map[string]any); u["total_tokens"] != 29.0 || u["input_tokens_details"].(map[string]any)["cached_tokens"] != 4.0 {
		t.Errorf("usage = %v", u)
	}
}

func TestEncodeEndings(t *testing.T) {
	for _, tt := range []struct {
		name, last, status, reason string
		code                       string // a failure's error code
		end                        func(e *EventEncoder, b []byte) []byte
	}{
		{"length", "response.incomplete", "incomplete", "max_output_tokens", "", func(e *EventEncoder, b []byte) []byte {
			return e.Finish(b, chat.FinishLength, &chat.Usage{InputTokens: 3, OutputTokens: 1})
		}},
		{"failed", "response.failed", "failed", "", "protocol", func(e *EventEncoder, b []byte) []byte {
			return e.Error(b, &chat.Error{Category: chat.CategoryProtocol, Message: "upstream broke"}, &chat.Usage{InputTokens: 3, OutputTokens: 1, Estimated: true})
		}},
		// The deadline cut the answer: no Responses reason says so, and
		// the surface ends it failed, with a timeout.
		{"cut by the deadline", "response.failed", "failed", "", "timeout", func(e *EventEncoder, b []byte) []byte {
			return e.Error(b, &chat.Error{Category: chat.CategoryTimeout, Message: "upstream broke"}, &chat.Usage{InputTokens: 3, OutputTokens: 1, Estimated: true})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &EventEncoder{ID: "resp_2", Model: "m"}
			b := e.Chunk(nil, &chat.Chunk{Text: "partial"})
			b = tt.end(e, b)
			evs := events(t, b)
			last := evs[len(evs)-1]
			if last["type"] != tt.last {
				t.Fatalf("last event %v, want %s", last["type"], tt.last)
			}
			resp := last["response"].(map[string]any)
			if resp["status"] != tt.status {
				t.Errorf("status %v, want %s", resp["status"], tt.status)
			}
			if tt.reason != "" {
				if d, _ := resp["incomplete_details"].(map[string]any); d["reason"] != tt.reason {
					t.Errorf("incomplete_details %v, want reason %s", resp["incomplete_details"], tt.reason)
				}
			}
			if tt.status == "failed" {
				if er, _ := resp["error"].(map[string]any); er["message"] != "upstream broke" || er["code"] != tt.code {
					t.Errorf("error = %v", resp["error"])
				}
				if u, _ := resp["usage"].(map[string]any); u["output_tokens"] != 1.0 || u["input_tokens"] != 3.0 {
					t.Errorf("usage = %v, want what was delivered", resp["usage"])
				}
			}
			if !strings.Contains(string(b), `"text":"partial"`) {
				t.Errorf("the partial text is not in the final response:\n%s", b)
			}
		})
	}
}

func TestEncodeResponse(t *testing.T) {
	e := &EventEncoder{ID: "resp_3", Model: "m", CreatedAt: 1700000000}
	b := e.Response(&chat.Response{
		Choices: []chat.Choice{{Text: "Hi.", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "f", Arguments: "{}"}}, FinishReason: chat.FinishToolCalls}},
		Usage:   &chat.Usage{InputTokens: 5, OutputTokens: 2},
	})
	golden(t, "response.json", b)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if ms := e.Messages(); len(ms) != 1 || ms[0].ID != "msg_0_resp_3" || ms[0].Text != "Hi." {
		t.Errorf("Messages() = %+v", ms)
	}
}

// TestEncodeRefusal: a refusal is a refusal content part with its own
// events, not output_text; text then a refusal are two parts of one
// message, in order.
func TestEncodeRefusal(t *testing.T) {
	e := &EventEncoder{ID: "resp_4", Model: "m"}
	var b []byte
	for _, c := range []chat.Chunk{{Text: "Well. "}, {Refusal: "I can't "}, {Refusal: "help with that."}} {
		b = e.Chunk(b, &c)
	}
	b = e.Finish(b, chat.FinishStop, nil)
	evs := events(t, b)
	want := "response.created response.in_progress response.output_item.added " +
		"response.content_part.added response.output_text.delta response.output_text.done response.content_part.done " +
		"response.content_part.added response.refusal.delta response.refusal.delta response.refusal.done response.content_part.done " +
		"response.output_item.done response.completed"
	if got := types(evs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if p := evs[7]["part"].(map[string]any); p["type"] != "refusal" || p["refusal"] != "" || evs[7]["content_index"] != 1.0 {
		t.Errorf("refusal part added: %v", evs[7])
	}
	if d := evs[8]; d["delta"] != "I can't " || d["content_index"] != 1.0 || d["item_id"] != "msg_0_resp_4" || d["output_index"] != 0.0 {
		t.Errorf("refusal delta: %v", d)
	}
	if d := evs[10]; d["refusal"] != "I can't help with that." {
		t.Errorf("refusal done: %v", d)
	}
	content := evs[len(evs)-1]["response"].(map[string]any)["output"].([]any)[0].(map[string]any)["content"].([]any)
	if len(content) != 2 || content[0].(map[string]any)["text"] != "Well. " ||
		content[1].(map[string]any)["type"] != "refusal" || content[1].(map[string]any)["refusal"] != "I can't help with that." {
		t.Errorf("final content: %v", content)
	}

	whole := (&EventEncoder{ID: "resp_5", Model: "m"}).Response(&chat.Response{Choices: []chat.Choice{{Refusal: "No.", FinishReason: chat.FinishStop}}})
	if !strings.Contains(string(whole), `"content":[{"type":"refusal","refusal":"No."}]`) {
		t.Errorf("whole response: %s", whole)
	}
}

// TestEncodeBackground: a background response's objects say so, its
// response.created is queued, and a cancelled one ends as OpenAI ends
// one: response.failed with status cancelled and no output, with the
// usage of what was produced.
func TestEncodeBackground(t *testing.T) {
	e := &EventEncoder{ID: "resp_6", Model: "m", CreatedAt: 1700000000, Background: true}
	queued := e.Object(nil, "queued")
	b := e.Chunk(nil, &chat.Chunk{Text: "partial"})
	b = e.Cancelled(b, &chat.Usage{InputTokens: 3, OutputTokens: 1})
	golden(t, "background_cancelled.sse", b)
	evs := events(t, b)
	if evs[0]["response"].(map[string]any)["status"] != "queued" || evs[1]["response"].(map[string]any)["status"] != "in_progress" {
		t.Errorf("created %v, in_progress %v", evs[0]["response"], evs[1]["response"])
	}
	last := evs[len(evs)-1]
	resp := last["response"].(map[string]any)
	if last["type"] != "response.failed" || resp["status"] != "cancelled" || len(resp["output"].([]any)) != 0 || resp["error"] != nil || resp["background"] != true {
		t.Errorf("last event: %v", last)
	}
	if u, _ := resp["usage"].(map[string]any); u["output_tokens"] != 1.0 {
		t.Errorf("usage = %v, want what was produced", resp["usage"])
	}
	var q map[string]any
	if err := json.Unmarshal(queued, &q); err != nil || q["status"] != "queued" || q["background"] != true || q["id"] != "resp_6" {
		t.Errorf("queued object %s (%v)", queued, err)
	}
	// Not in the background: the objects are as before.
	if b := (&EventEncoder{ID: "resp_7"}).Start(nil); strings.Contains(string(b), "background") || strings.Contains(string(b), "queued") {
		t.Errorf("a foreground stream's start: %s", b)
	}
}
