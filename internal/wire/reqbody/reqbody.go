// Package reqbody decodes the JSON body of a client's request member by
// member, for the request parsers of the client-facing wire formats
// (wire/openai, wire/anthropic, wire/responses).
//
// A body decoded in one encoding/json call fails with one message about
// the whole body, naming a Go field if anything. Decoded a member at a
// time, each mistake is reported with the member it is in (Error.Param),
// which is what the APIs firstword imitates answer with and what a
// client's SDK shows its user.
package reqbody

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/jsonerr"
)

// Parsed is a decoded client request: the request and whether the client
// asked for the answer as a stream.
type Parsed struct {
	Request *chat.Request
	Stream  bool
}

// Error is a client mistake in a request body. Param names the offending
// member in the dialect of the API that was called (OpenAI's
// messages[1].content, Anthropic's messages.1.content); it is empty when
// the mistake is the body's as a whole.
type Error struct {
	Param   string
	Message string
}

func (e *Error) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

// Errorf returns an *Error for param with a formatted message.
func Errorf(param, format string, args ...any) error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}

// Object decodes body, which must be exactly one JSON object, into its
// members, each kept raw for Field and the parser's own decoding. A JSON
// null is refused too: it would decode into a nil map without error.
func Object(body []byte) (map[string]json.RawMessage, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return nil, Errorf("", "request body is not a JSON object: %v", err)
	}
	// Decode stops after the first value; a second one (two requests
	// pasted together) would otherwise pass unseen.
	if dec.More() {
		return nil, Errorf("", "request body has data after the JSON object")
	}
	if raw == nil {
		return nil, Errorf("", "request body must be a JSON object")
	}
	return raw, nil
}

// IsNull reports whether a member is absent (empty) or JSON null, which
// every API firstword imitates treats alike.
func IsNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

// Field decodes raw[name] into dst when it is present and not null,
// leaving dst as it was otherwise. A value of the wrong type is an *Error
// naming the member and the JSON type it should have.
func Field(raw map[string]json.RawMessage, name string, dst any) error {
	v, ok := raw[name]
	if !ok || IsNull(v) {
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return Errorf(name, "%v", jsonerr.Type(err))
	}
	return nil
}

// StringOrList decodes v, a JSON string or an array of T: the shape the
// APIs give a message's content, a system prompt or a tool's result. It
// returns the string and isString true, or the array's elements. what
// names the elements in the error for any other value ("content blocks":
// "must be a string or an array of content blocks"). v must not be null
// (callers decide what a missing value means).
func StringOrList[T any](v json.RawMessage, param, what string) (s string, list []T, isString bool, err error) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '"' {
		if err := json.Unmarshal(v, &s); err != nil {
			return "", nil, false, Errorf(param, "%v", err)
		}
		return s, nil, true, nil
	}
	if err := json.Unmarshal(v, &list); err != nil {
		return "", nil, false, Errorf(param, "must be a string or an array of %s: %v", what, jsonerr.Type(err))
	}
	return "", list, false, nil
}

// ToolResult sets m's content from content, a tool's result: nothing
// when it is absent or null; a string, as m.Content; or an array of T
// (what names its elements in errors, as for StringOrList), whose
// elements part makes into m.Parts, given each one's index, and whose
// text parts, joined, are m.Content. Whether m keeps its Parts is the
// caller's to decide.
func ToolResult[T any](m *chat.Message, content json.RawMessage, param, what string, part func(i int, e *T) (chat.Part, error)) error {
	if IsNull(bytes.TrimSpace(content)) {
		return nil
	}
	s, list, isString, err := StringOrList[T](content, param, what)
	if err != nil {
		return err
	}
	if isString {
		m.Content = s
		return nil
	}
	var text strings.Builder
	for i := range list {
		p, err := part(i, &list[i])
		if err != nil {
			return err
		}
		if p.Type == chat.PartText {
			text.WriteString(p.Text)
		}
		m.Parts = append(m.Parts, p)
	}
	m.Content = text.String()
	return nil
}

// Start decodes body as Object does and returns its members with the
// request they start: its model, which every API requires.
func Start(body []byte) (map[string]json.RawMessage, *chat.Request, error) {
	raw, err := Object(body)
	if err != nil {
		return nil, nil, err
	}
	var model string
	if err := Field(raw, "model", &model); err != nil {
		return nil, nil, err
	}
	if model == "" {
		return nil, nil, Errorf("model", "required")
	}
	return raw, &chat.Request{Model: model}, nil
}

// Between decodes the number raw[name] into dst, as Field does, and
// refuses one outside [lo, hi] (a sampling parameter's range).
func Between(raw map[string]json.RawMessage, name string, dst **float64, lo, hi float64) error {
	if err := Field(raw, name, dst); err != nil {
		return err
	}
	if x := *dst; x != nil && (*x < lo || *x > hi) {
		return Errorf(name, "must be between %g and %g", lo, hi)
	}
	return nil
}

// List decodes raw[name], an array of objects, into a slice: nil when
// the member is absent or null. what names an element in the error for
// anything else ("tool": "must be an array of tool objects").
func List[T any](raw map[string]json.RawMessage, name, what string) ([]T, error) {
	v := raw[name]
	if IsNull(v) {
		return nil, nil
	}
	var list []T
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, Errorf(name, "must be an array of %s objects: %v", what, jsonerr.Type(err))
	}
	return list, nil
}

// Messages decodes the messages member, which Chat Completions and the
// Messages API alike require to be an array of at least one message.
func Messages[T any](raw map[string]json.RawMessage) ([]T, error) {
	if IsNull(raw["messages"]) {
		return nil, Errorf("messages", "required")
	}
	list, err := List[T](raw, "messages", "message")
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, Errorf("messages", "must contain at least one message")
	}
	return list, nil
}
