package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/firstword/firstword/internal/chat"
)

// MessageText is a message's text: Content, or the text of its parts
// joined when it has parts (images carry none), for the formats and the
// places that take text only.
func MessageText(m *chat.Message) string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Marshal encodes v as json.Marshal does but without escaping <, > and &:
// the upstreams do not need it, and a prompt full of \u003c is harder to
// read in logs and recorded requests.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ArgsObject checks that a tool call's arguments, a string of JSON in the
// chat vocabulary (as OpenAI sends them), are a JSON object, and returns
// them compacted, for the formats that carry arguments as an object
// (Gemini's args, Ollama's arguments). "" counts as {}: a call with no
// arguments sometimes comes with none at all.
func ArgsObject(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	if s[0] != '{' || !json.Valid([]byte(s)) {
		return nil, errors.New("must be a JSON object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
