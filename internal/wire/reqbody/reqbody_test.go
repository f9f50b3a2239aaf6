package reqbody

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

func TestObject(t *testing.T) {
	tests := []struct {
		name, body string
		wantErr    string // "" means success
	}{
		{"object", `{"model":"m"}`, ""},
		{"surrounding space", " \n{}\t", ""},
		{"null", `null`, "request body must be a JSON object"},
		{"array", `[]`, "request body is not a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{"two objects", `{}{}`, "request body has data after the JSON object"},
		{"broken", `{"a":`, "request body is not a JSON object: unexpected EOF"},
		{"empty", ``, "request body is not a JSON object: EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := Object([]byte(tt.body))
			if tt.wantErr == "" {
				if err != nil || raw == nil {
					t.Fatalf("Object(%q) = %v, %v, want a map", tt.body, raw, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Param != "" || e.Message != tt.wantErr {
				t.Errorf("Object(%q) error = %#v, want an *Error with no Param and message %q", tt.body, err, tt.wantErr)
			}
		})
	}
}

func TestStart(t *testing.T) {
	raw, req, err := Start([]byte(`{"model":"m","stream":true}`))
	if err != nil || req.Model != "m" || string(raw["stream"]) != "true" {
		t.Fatalf("Start = %v, %+v, %v, want the members and a request for model m", raw, req, err)
	}
	tests := []struct {
		name, body, param, msg string
	}{
		{"not an object", `[]`, "", "request body is not a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{"no model", `{}`, "model", "required"},
		{"empty model", `{"model":""}`, "model", "required"},
		{"model not a string", `{"model":1}`, "model", "expected string, got number"},
	}
	for _, tt := range tests {
		_, _, err := Start([]byte(tt.body))
		var e *Error
		if !errors.As(err, &e) || e.Param != tt.param || e.Message != tt.msg {
			t.Errorf("%s: Start(%s) error = %v, want %s: %s", tt.name, tt.body, err, tt.param, tt.msg)
		}
	}
}

func TestField(t *testing.T) {
	raw := map[string]json.RawMessage{"n": json.RawMessage(`3`), "s": json.RawMessage(`"x"`), "null": json.RawMessage(`null`)}
	n := 7
	if err := Field(raw, "n", &n); err != nil || n != 3 {
		t.Errorf("Field(n) = %v, n = %d, want nil, 3", err, n)
	}
	for _, name := range []string{"null", "absent"} {
		n = 7
		if err := Field(raw, name, &n); err != nil || n != 7 {
			t.Errorf("Field(%s) = %v, n = %d, want nil and n untouched", name, err, n)
		}
	}
	err := Field(raw, "s", &n)
	if got, want := err.Error(), "s: expected integer, got string"; got != want {
		t.Errorf("Field(s) into an int = %q, want %q", got, want)
	}
}

func TestStringOrList(t *testing.T) {
	tests := []struct {
		name, v  string
		wantS    string
		wantList []int
		isString bool
		wantErr  string
	}{
		{name: "string", v: `"hi"`, wantS: "hi", isString: true},
		{name: "empty string", v: `""`, isString: true},
		{name: "list", v: `[1,2]`, wantList: []int{1, 2}},
		{name: "object", v: `{}`, wantErr: "p: must be a string or an array of numbers: expected array, got object"},
		{name: "wrong element", v: `["a"]`, wantErr: "p: must be a string or an array of numbers: expected integer, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, list, isString, err := StringOrList[int](json.RawMessage(tt.v), "p", "numbers")
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("StringOrList(%s) error = %v, want %q", tt.v, err, tt.wantErr)
				}
				return
			}
			if err != nil || s != tt.wantS || isString != tt.isString || len(list) != len(tt.wantList) {
				t.Fatalf("StringOrList(%s) = %q, %v, %v, %v, want %q, %v, %v, nil", tt.v, s, list, isString, err, tt.wantS, tt.wantList, tt.isString)
			}
			for i := range list {
				if list[i] != tt.wantList[i] {
					t.Errorf("StringOrList(%s) list = %v, want %v", tt.v, list, tt.wantList)
				}
			}
		})
	}
}

func TestToolResult(t *testing.T) {
	// part makes a string element a text part, a number an image, and
	// refuses a boolean.
	part := func(i int, e *any) (chat.Part, error) {
		switch v := (*e).(type) {
		case string:
			return chat.Part{Type: chat.PartText, Text: v}, nil
		case float64:
			return chat.ImagePart(fmt.Sprintf("img%d", i)), nil
		}
		return chat.Part{}, Errorf(fmt.Sprintf("p[%d]", i), "unsupported")
	}
	tests := []struct {
		name, content string
		want          chat.Message
		wantErr       string
	}{
		{name: "absent", content: ``},
		{name: "null", content: ` null `},
		{name: "string", content: `"done"`, want: chat.Message{Content: "done"}},
		{name: "empty list", content: `[]`},
		{name: "parts", content: `["a", 1, "b"]`, want: chat.Message{Content: "ab",
			Parts: []chat.Part{{Type: chat.PartText, Text: "a"}, chat.ImagePart("img1"), {Type: chat.PartText, Text: "b"}}}},
		{name: "object", content: `{}`, wantErr: "p: must be a string or an array of things: expected array, got object"},
		{name: "refused element", content: `["a", true]`, wantErr: "p[1]: unsupported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m chat.Message
			err := ToolResult(&m, json.RawMessage(tt.content), "p", "things", part)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ToolResult(%s) error = %v, want %q", tt.content, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, m); diff != "" {
				t.Errorf("ToolResult(%s) message (-want +got):\n%s", tt.content, diff)
			}
		})
	}
}
