package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// ImageURL is an image part's URL, or its inline data as a data: URL, for
// the formats that take images as URLs only.
func ImageURL(p *chat.Part) string {
	if p.ImageURL == "" && p.Data != "" {
		return "data:" + p.MediaType + ";base64," + p.Data
	}
	return p.ImageURL
}

// JSONMode reads a request's response_format (chat.Request's, in Chat
// Completions' form) for the formats whose JSON mode is on or off, with
// an optional schema: on is whether JSON was asked for (json_object or
// json_schema), schema json_schema's schema when it has one.
func JSONMode(responseFormat json.RawMessage) (on bool, schema json.RawMessage, err error) {
	if len(responseFormat) == 0 || string(responseFormat) == "null" {
		return false, nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(responseFormat, &rf); err != nil {
		return false, nil, fmt.Errorf("response_format: %v", err)
	}
	switch rf.Type {
	case "", "text":
		return false, nil, nil
	case "json_object":
		return true, nil, nil
	case "json_schema":
		if rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 {
			return true, rf.JSONSchema.Schema, nil
		}
		return true, nil, nil
	}
	return false, nil, fmt.Errorf("response_format: unsupported type %q", rf.Type)
}
