package upstream

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

func TestExcerpt(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"longer text", 6, "longer…"},
		{"héllo", 2, "h…"}, // é is two bytes: not cut in half
		{"日本", 1, "…"},
	}
	for _, tt := range tests {
		if got := Excerpt(tt.s, tt.n); got != tt.want {
			t.Errorf("Excerpt(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// step is one event of a fake stream: the chunk it produces (if Text is
// not empty), whether the event after it is already buffered, and how it
// ends the stream.
type step struct {
	text     string
	buffered bool
	done     bool
	err      error
}

type fakeStepper struct {
	steps []step
	i     int
}

func (f *fakeStepper) Step(c *chat.Chunk) (emit, done bool, err error) {
	if f.i >= len(f.steps) {
		return false, false, errors.New("read past the end")
	}
	s := f.steps[f.i]
	f.i++
	*c = chat.Chunk{Text: s.text}
	return s.text != "", s.done, s.err
}

func (f *fakeStepper) Buffered() bool {
	return f.i > 0 && f.steps[f.i-1].buffered
}

func TestHoldBack(t *testing.T) {
	broken := errors.New("broken")
	type got struct {
		Text string
		More bool
	}
	tests := []struct {
		name    string
		steps   []step
		want    []got
		wantErr error
	}{
		{
			name:    "each chunk alone",
			steps:   []step{{text: "a"}, {text: "b"}, {done: true}},
			want:    []got{{"a", false}, {"b", false}},
			wantErr: io.EOF,
		},
		{
			name:    "a chunk followed at once is More",
			steps:   []step{{text: "a", buffered: true}, {text: "b"}, {done: true}},
			want:    []got{{"a", true}, {"b", false}},
			wantErr: io.EOF,
		},
		{
			name:    "an event with no chunk between; the end read with the last",
			steps:   []step{{text: "a", buffered: true}, {buffered: true}, {text: "b", buffered: true}, {done: true}},
			want:    []got{{"a", true}, {"b", true}},
			wantErr: io.EOF,
		},
		{
			name:    "the chunk of the ending event is More: nothing is left to wait for",
			steps:   []step{{text: "a"}, {text: "b", done: true}},
			want:    []got{{"a", false}, {"b", true}},
			wantErr: io.EOF,
		},
		{
			name:    "the held chunk goes out before the error",
			steps:   []step{{text: "a", buffered: true}, {err: broken}},
			want:    []got{{"a", false}},
			wantErr: broken,
		},
		{
			name:    "a chunk of the failing event is dropped",
			steps:   []step{{text: "a", err: broken}},
			wantErr: broken,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h HoldBack
			s := &fakeStepper{steps: tt.steps}
			var chunks []got
			var err error
			for {
				var c *chat.Chunk
				if c, err = h.Next(s); err != nil {
					break
				}
				chunks = append(chunks, got{c.Text, c.More})
			}
			if diff := cmp.Diff(tt.want, chunks); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			if err != tt.wantErr {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if _, again := h.Next(s); again != tt.wantErr {
				t.Errorf("Next after the end = %v, want %v again", again, tt.wantErr)
			}
		})
	}
}

func TestArgsObject(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "", want: "{}"},
		{in: "  ", want: "{}"},
		{in: `{ "a" : [1, 2] }`, want: `{"a":[1,2]}`},
		{in: `[1]`, wantErr: true},
		{in: `"s"`, wantErr: true},
		{in: `{"a":`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := ArgsObject(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ArgsObject(%q) = %s, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("ArgsObject(%q) = %s, %v, want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestMessageText(t *testing.T) {
	m := &chat.Message{Content: "ignored", Parts: []chat.Part{{Type: chat.PartText, Text: "a"}, chat.ImagePart("https://x/i.png"), {Type: chat.PartText, Text: "b"}}}
	if got := MessageText(m); got != "ab" {
		t.Errorf("MessageText(parts) = %q, want %q", got, "ab")
	}
	if got := MessageText(&chat.Message{Content: "c"}); got != "c" {
		t.Errorf("MessageText(content) = %q, want %q", got, "c")
	}
}

func TestMarshal(t *testing.T) {
	got, err := Marshal(map[string]string{"p": "<b> & </b>"})
	if want := `{"p":"<b> & </b>"}`; err != nil || string(got) != want {
		t.Errorf("Marshal = %s, %v, want %s (unescaped, no newline)", got, err, want)
	}
}

func TestImageURL(t *testing.T) {
	for _, tt := range []struct {
		p    chat.Part
		want string
	}{
		{chat.ImagePart("https://x/i.png"), "https://x/i.png"},
		{chat.Part{Type: chat.PartImage, MediaType: "image/png", Data: "AAAA"}, "data:image/png;base64,AAAA"},
		{chat.ImagePart("data:image/gif;base64,R0lG"), "data:image/gif;base64,R0lG"},
	} {
		if got := ImageURL(&tt.p); got != tt.want {
			t.Errorf("ImageURL(%+v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestJSONMode(t *testing.T) {
	for _, tt := range []struct {
		in      string
		on      bool
		schema  string
		wantErr string
	}{
		{in: ""},
		{in: "null"},
		{in: `{"type":"text"}`},
		{in: `{"type":"json_object"}`, on: true},
		{in: `{"type":"json_schema","json_schema":{"name":"n"}}`, on: true},
		{in: `{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":"any"}}`, on: true, schema: `{"type":"object"}`},
		{in: `{"type":"xml"}`, wantErr: `response_format: unsupported type "xml"`},
		{in: `[]`, wantErr: "response_format: json: cannot unmarshal array into Go value of type struct"},
	} {
		on, schema, err := JSONMode(json.RawMessage(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("JSONMode(%s) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || on != tt.on || string(schema) != tt.schema {
			t.Errorf("JSONMode(%s) = %v, %s, %v, want %v, %s", tt.in, on, schema, err, tt.on, tt.schema)
		}
	}
}

func TestEnding(t *testing.T) {
	var e Ending
	c := &chat.Chunk{Text: "a"}
	if got, err := e.Keep(c, nil); got != c || err != nil || e.Ended() != nil {
		t.Fatalf("Keep(chunk) = %v, %v; Ended() = %v, want the chunk and no end", got, err, e.Ended())
	}
	boom := errors.New("boom")
	if got, err := e.Keep(nil, boom); got != nil || err != boom || e.Ended() != boom {
		t.Fatalf("Keep(error) = %v, %v; Ended() = %v, want the error kept", got, err, e.Ended())
	}
}

func TestReadError(t *testing.T) {
	for _, in := range []error{io.EOF, io.ErrUnexpectedEOF} {
		err := ReadError(in, "no end after %d events", 3)
		var ce *chat.Error
		if !errors.As(err, &ce) || ce.Category != chat.CategoryProtocol || !errors.Is(err, chat.ErrTruncated) || !strings.Contains(err.Error(), "no end after 3 events") {
			t.Errorf("ReadError(%v) = %v, want a truncated protocol error saying what is missing", in, err)
		}
	}
	big := errors.New("event too large")
	err := ReadError(big, "no end after %d events", 3)
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Category != chat.CategoryProtocol || !errors.Is(err, big) || errors.Is(err, chat.ErrTruncated) {
		t.Errorf("ReadError(%v) = %v, want a protocol error of it, not truncated", big, err)
	}
}

func TestNotObject(t *testing.T) {
	for _, tt := range []struct {
		data, wantErr string
	}{
		{data: "\xff{", wantErr: "upstream sent invalid UTF-8"},
		{data: `[1]`, wantErr: "upstream sent an event that is not a JSON object: [1]"},
	} {
		err := NotObject([]byte(tt.data))
		var ce *chat.Error
		if !errors.As(err, &ce) || ce.Category != chat.CategoryProtocol || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("NotObject(%q) = %v, want a protocol error %q", tt.data, err, tt.wantErr)
		}
	}
}

func TestToolCall(t *testing.T) {
	for _, tt := range []struct {
		id, args string
		want     chat.ToolCallDelta
	}{
		{id: "fc_1", args: `{ "city" : "Paris" }`, want: chat.ToolCallDelta{Index: 1, ID: "fc_1", Name: "f", Arguments: `{"city":"Paris"}`}},
		{args: "", want: chat.ToolCallDelta{Index: 1, ID: "call_7", Name: "f", Arguments: "{}"}},
		{args: "null", want: chat.ToolCallDelta{Index: 1, ID: "call_7", Name: "f", Arguments: "{}"}},
	} {
		if got := ToolCall(1, 7, tt.id, "f", json.RawMessage(tt.args)); got != tt.want {
			t.Errorf("ToolCall(1, 7, %q, f, %s) = %+v, want %+v", tt.id, tt.args, got, tt.want)
		}
	}
}

func TestHold(t *testing.T) {
	var held []chat.Chunk
	held = Hold(held, 1, chat.FinishLength)
	held = Hold(held, 0, chat.FinishStop)
	held = Hold(held, 1, chat.FinishToolCalls) // named again: the last one wins
	want := []chat.Chunk{{Choice: 1, FinishReason: chat.FinishToolCalls}, {Choice: 0, FinishReason: chat.FinishStop}}
	if diff := cmp.Diff(want, held); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}
}
