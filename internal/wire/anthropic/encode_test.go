package anthropic

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonscan"
	"github.com/google/go-cmp/cmp"
)

// encoderChunks is a stream as the router yields it: text, then two tool
// calls whose arguments arrive in pieces.
var encoderChunks = []chat.Chunk{
	{Model: "claude-sonnet-4-5"},
	{Text: "Let me "},
	{Text: "check ✓ \"now\"\n"},
	{Choice: 1, Text: "a second choice is not encoded"},
	{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "toolu_a", Name: "get_weather"}}},
	{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: `{"city": `}}},
	{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: `"Zürich"}`}, {Index: 1, ID: "toolu_b", Name: "now", Arguments: "{}"}}},
}

var encoderUsage = &chat.Usage{InputTokens: 1200, OutputTokens: 42, CachedInputTokens: 1000, CacheWriteTokens: 150}

func encodeEvents(chunks []chat.Chunk, reason chat.FinishReason, u *chat.Usage) []byte {
	enc := EventEncoder{ID: "msg_fw_1", Model: "claude-sonnet-4-5", InputTokens: 1200}
	b := enc.Start(nil)
	b = enc.Ping(b)
	for i := range chunks {
		b = enc.Chunk(b, &chunks[i])
	}
	return enc.Finish(b, reason, u)
}

// TestEventEncoderGolden pins the exact events, and checks that every one
// is what its event: line says and that deltas take the fast decoder.
func TestEventEncoderGolden(t *testing.T) {
	got := encodeEvents(encoderChunks, chat.FinishToolCalls, encoderUsage)
	const path = "testdata/encode_events.sse"
	if *update {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
	for _, ev := range strings.Split(strings.TrimSuffix(string(got), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\n")
		if !ok || !strings.HasPrefix(name, "event: ") || !strings.HasPrefix(data, "data: ") {
			t.Fatalf("malformed event %q", ev)
		}
		data = strings.TrimPrefix(data, "data: ")
		var v struct{ Type string }
		if err := json.Unmarshal([]byte(data), &v); err != nil || v.Type != strings.TrimPrefix(name, "event: ") {
			t.Errorf("event %q: data type %q, %v", name, v.Type, err)
		}
		if v.Type == "content_block_delta" {
			e := event{Index: noIndex}
			if sc := (eventScanner{jsonscan.New([]byte(data))}); sc.event(&e) != nil {
				t.Errorf("%s took the slow path", data)
			}
		}
	}
}

// TestEventEncoderRoundTrip decodes what the encoder wrote: text, tool
// calls with their arguments, the finish and the usage survive.
func TestEventEncoderRoundTrip(t *testing.T) {
	for _, reason := range []chat.FinishReason{chat.FinishStop, chat.FinishLength, chat.FinishToolCalls, chat.FinishContentFilter} {
		raw := encodeEvents(encoderChunks, reason, encoderUsage)
		want := result{
			Model: "claude-sonnet-4-5",
			Text:  "Let me check ✓ \"now\"\n",
			Tools: []chat.ToolCall{
				{ID: "toolu_a", Name: "get_weather", Arguments: `{"city": "Zürich"}`},
				{ID: "toolu_b", Name: "now", Arguments: "{}"},
			},
			Finish: reason,
			Usage:  encoderUsage,
		}
		for name, mk := range readers(raw) {
			if diff := cmp.Diff(want, run(t, mk(), 0)); diff != "" {
				t.Errorf("%s, %s: (-want +got):\n%s", reason, name, diff)
			}
		}
	}
}

func TestEventEncoderBlocks(t *testing.T) {
	enc := EventEncoder{ID: "m1", Model: "x"}
	var b []byte
	// Chunk sends message_start itself; text after a tool call opens a
	// new block; arguments for a closed tool block go to its index.
	b = enc.Chunk(b, &chat.Chunk{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "t0", Name: "f", Arguments: "{"}}})
	b = enc.Chunk(b, &chat.Chunk{Text: "mid"})
	b = enc.Chunk(b, &chat.Chunk{ToolCalls: []chat.ToolCallDelta{{Index: 0, Arguments: "}"}, {Index: -1, Arguments: "x"}, {Index: chat.MaxToolCalls, ID: "x"}}})
	b = enc.Chunk(b, &chat.Chunk{Refusal: " refused"})
	b = enc.Chunk(b, &chat.Chunk{Usage: &chat.Usage{}}) // nothing to say
	b = enc.Finish(b, chat.FinishTimeout, nil)
	var types []string
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "data: "); ok {
			var v struct {
				Type  string
				Index *int
			}
			json.Unmarshal([]byte(name), &v)
			if v.Index != nil {
				v.Type += "@" + string(rune('0'+*v.Index))
			}
			types = append(types, v.Type)
		}
	}
	want := []string{
		"message_start",
		"content_block_start@0", "content_block_delta@0",
		"content_block_stop@0", "content_block_start@1", "content_block_delta@1",
		"content_block_delta@0",
		"content_block_delta@1",
		"content_block_stop@1", "message_delta", "message_stop",
	}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("events (-want +got):\n%s\n%s", diff, b)
	}
	if !bytes.Contains(b, []byte(`"stop_reason":"end_turn"`)) {
		t.Errorf("a timeout is not an end_turn: %s", b)
	}
	// Decoded, it is all there.
	got := run(t, bytes.NewReader(b), 0)
	want2 := result{Model: "x", Text: "mid refused", Tools: []chat.ToolCall{{ID: "t0", Name: "f", Arguments: "{}"}}, Finish: chat.FinishStop, Usage: &chat.Usage{}}
	if diff := cmp.Diff(want2, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func TestEventEncoderError(t *testing.T) {
	enc := EventEncoder{ID: "m1", Model: "x"}
	b := enc.Chunk(nil, &chat.Chunk{Text: "partial"})
	b = enc.Error(b, &chat.Error{Category: chat.CategoryOverloaded, Message: "every deployment is busy"})
	if !bytes.HasSuffix(b, []byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"every deployment is busy\"}}\n\n")) {
		t.Errorf("error event: %s", b)
	}
	// Classified errors survive the trip through the wire.
	for _, c := range []chat.Category{chat.CategoryRateLimited, chat.CategoryOverloaded, chat.CategoryInvalidRequest, chat.CategoryNotFound, chat.CategoryTimeout, chat.CategoryUpstreamUnavailable} {
		enc := EventEncoder{ID: "m1", Model: "x"}
		b := enc.Chunk(nil, &chat.Chunk{Text: "hi"})
		b = enc.Error(b, &chat.Error{Category: c, Message: "m"})
		got := run(t, bytes.NewReader(b), 0)
		if got.Err == nil || got.Err.Category != c || got.Text != "hi" {
			t.Errorf("%s: decoded %+v", c, got)
		}
	}
	if got := string(enc.Ping(nil)); got != "event: ping\ndata: {\"type\": \"ping\"}\n\n" {
		t.Errorf("Ping() = %q", got)
	}
}

func TestStopReason(t *testing.T) {
	for in, want := range map[chat.FinishReason]string{
		chat.FinishStop: "end_turn", chat.FinishLength: "max_tokens", chat.FinishToolCalls: "tool_use",
		chat.FinishContentFilter: "refusal", chat.FinishTimeout: "end_turn", "": "end_turn",
		"pause_turn": "pause_turn", "stop_sequence": "stop_sequence", "weird": "end_turn",
	} {
		if got := StopReason(in); got != want {
			t.Errorf("StopReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorType(t *testing.T) {
	tests := []struct {
		c      chat.Category
		typ    string
		status int
	}{
		{chat.CategoryRateLimited, "rate_limit_error", 429},
		{chat.CategoryOverloaded, "overloaded_error", 529},
		{chat.CategoryInvalidRequest, "invalid_request_error", 400},
		{chat.CategoryContextLength, "invalid_request_error", 400},
		{chat.CategoryContentFilter, "invalid_request_error", 400},
		{chat.CategoryBlocked, "invalid_request_error", 400},
		{chat.CategoryNotFound, "not_found_error", 404},
		{chat.CategoryTimeout, "timeout_error", 504},
		{chat.CategoryAuth, "api_error", 502},
		{chat.CategoryUpstreamUnavailable, "api_error", 502},
		{chat.CategoryProtocol, "api_error", 502},
		{chat.CategoryInternal, "api_error", 500},
		{chat.CategoryContextUnavailable, "api_error", 500},
	}
	for _, tt := range tests {
		typ, status := ErrorType(tt.c)
		if typ != tt.typ || status != tt.status {
			t.Errorf("ErrorType(%s) = %s, %d, want %s, %d", tt.c, typ, status, tt.typ, tt.status)
		}
	}
	got := ErrorResponse("invalid_request_error", "max_tokens: required\n\"x\"")
	if want := `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required\n\"x\""}}`; string(got) != want {
		t.Errorf("ErrorResponse() = %s, want %s", got, want)
	}
	// What firstword answers, DecodeError reads back.
	if e := DecodeError(429, got); e.Category != chat.CategoryInvalidRequest || e.Message != "max_tokens: required\n\"x\"" {
		t.Errorf("DecodeError(ErrorResponse()) = %+v", e)
	}
}

func TestEncodeMessage(t *testing.T) {
	resp := &chat.Response{
		Model: "claude-sonnet-4-5",
		Choices: []chat.Choice{{
			Text:         "Checking.",
			ToolCalls:    []chat.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: `{"city": "Paris"}`}, {ID: "toolu_2", Name: "now"}},
			FinishReason: chat.FinishToolCalls,
		}, {Text: "ignored"}},
		Usage: &chat.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 80},
	}
	got, err := json.Marshal(EncodeMessage("msg_1", "claude-sonnet-4-5", resp, ShowAll))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
		`{"type":"text","text":"Checking."},` +
		`{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},` +
		`{"type":"tool_use","id":"toolu_2","name":"now","input":{}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,` +
		`"usage":{"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":80,"output_tokens":20}}`
	if string(got) != want {
		t.Errorf("EncodeMessage() =\n%s\nwant\n%s", got, want)
	}
	empty, _ := json.Marshal(EncodeMessage("msg_2", "m", &chat.Response{}, ShowAll))
	if want := `{"id":"msg_2","type":"message","role":"assistant","model":"m","content":[],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`; string(empty) != want {
		t.Errorf("EncodeMessage(empty) =\n%s\nwant\n%s", empty, want)
	}
}

// TestEncodeMessageThinking: thinking blocks come first, as show says:
// with their text and Anthropic signatures, with signatures only, or not
// at all; another format's signature is not Anthropic's to check.
func TestEncodeMessageThinking(t *testing.T) {
	resp := &chat.Response{Choices: []chat.Choice{{
		Text: "21",
		Thinking: []chat.ThinkingBlock{
			{Text: "GCD \"first\"", Signature: "EqQB", Format: chat.ThinkingAnthropic},
			{Redacted: "EmwK", Format: chat.ThinkingAnthropic},
			{Text: "gemini's", Signature: "g", Format: chat.ThinkingGemini},
			{Text: "unsigned"},
		},
		FinishReason: chat.FinishStop,
	}}}
	tail := `{"type":"text","text":"21"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`
	for _, tt := range []struct {
		show   Show
		blocks string
	}{
		{ShowAll, `{"type":"thinking","thinking":"GCD \"first\"","signature":"EqQB"},{"type":"redacted_thinking","data":"EmwK"},` +
			`{"type":"thinking","thinking":"gemini's","signature":""},{"type":"thinking","thinking":"unsigned","signature":""},`},
		{ShowSigned, `{"type":"thinking","thinking":"","signature":"EqQB"},{"type":"redacted_thinking","data":"EmwK"},`},
		{ShowNone, ``},
	} {
		got, err := json.Marshal(EncodeMessage("msg_1", "m", resp, tt.show))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[` + tt.blocks + tail; string(got) != want {
			t.Errorf("EncodeMessage(show %d) =\n%s\nwant\n%s", tt.show, got, want)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\", "\x00\x1f\t\n\r", "é 東京 😀", "\u2028\u2029", "bad \xff utf8", "<&>"} {
		got := appendString(nil, s)
		want, _ := json.Marshal(strings.ToValidUTF8(s, "\uFFFD"))
		var back, wantBack string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("appendString(%q) = %s: %v", s, got, err)
		}
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("appendString(%q) decodes to %q, want %q", s, back, wantBack)
		}
	}
}

// TestEventEncoderThinkingAllocs: a thinking delta costs no allocation.
func TestEventEncoderThinkingAllocs(t *testing.T) {
	e := EventEncoder{ID: "m", Model: "x", Thinking: ShowAll}
	b := make([]byte, 0, 4096)
	c := chat.Chunk{Thinking: "a thinking delta of some words"}
	if n := testing.AllocsPerRun(1000, func() { b = e.Chunk(b[:0], &c) }); n != 0 {
		t.Errorf("Chunk(thinking) allocates %v times per delta", n)
	}
}
