package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/jsonerr"
	"github.com/firstword/firstword/internal/wire/reqbody"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// Message is a Chat Completions message on the wire.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	// ReasoningContent is an answer's thinking (DeepSeek's name, which
	// the OpenAI-compatible ecosystem reads); Reasoning the same at
	// OpenRouter, Groq and newer vLLM. Read from an upstream's whole
	// completion; never sent upstream (see fromChat).
	ReasoningContent string `json:"reasoning_content,omitempty"`
	Reasoning        string `json:"reasoning,omitempty"`
}

// ToolCall is a complete tool call.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function and arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool definition.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail,omitempty"`
	} `json:"image_url,omitempty"`
}

// chatRole maps a message's role onto the chat vocabulary's, reporting
// whether it is one: developer is a system message, and function the
// deprecated role of tool results before tool calls had IDs (read as a
// tool message without one).
func chatRole(role string) (chat.Role, bool) {
	switch role {
	case "system", "developer":
		return chat.RoleSystem, true
	case "user":
		return chat.RoleUser, true
	case "assistant":
		return chat.RoleAssistant, true
	case "tool", "function":
		return chat.RoleTool, true
	}
	return "", false
}

// toChat decodes a client's message. Errors name the member within the
// message ("content[1].type"); ParseRequest adds the message's index.
func (m *Message) toChat() (chat.Message, error) {
	var out chat.Message
	role, ok := chatRole(m.Role)
	switch {
	case m.Role == "":
		return out, errors.New("role: required")
	case !ok:
		return out, fmt.Errorf("role: unknown role %q", m.Role)
	}
	out.Role = role
	out.Name = m.Name
	out.ToolCallID = m.ToolCallID
	if out.Role == chat.RoleTool && m.ToolCallID == "" && m.Role == "tool" {
		return out, errors.New("tool_call_id: required for tool messages")
	}
	for _, tc := range m.ToolCalls {
		if tc.Function.Name == "" {
			return out, errors.New("tool_calls: function.name required")
		}
		out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	// An assistant turn that only called tools has no content; every
	// other message needs one.
	if reqbody.IsNull(m.Content) {
		if out.Role != chat.RoleAssistant {
			return out, errors.New("content: required")
		}
		return out, nil
	}
	switch m.Content[0] {
	case '"':
		if err := json.Unmarshal(m.Content, &out.Content); err != nil {
			return out, fmt.Errorf("content: %v", err)
		}
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return out, fmt.Errorf("content: must be a string or an array of content parts: %v", jsonerr.Type(err))
		}
		// Parts are kept (the upstream encoders need the images), and
		// Content is their text joined, for whatever reads a message as
		// text only.
		var text strings.Builder
		for j, p := range parts {
			switch p.Type {
			case "text", "input_text":
				out.Parts = append(out.Parts, chat.Part{Type: chat.PartText, Text: p.Text})
				text.WriteString(p.Text)
			case "image_url":
				if p.ImageURL == nil || p.ImageURL.URL == "" {
					return out, fmt.Errorf("content[%d].image_url.url: required", j)
				}
				out.Parts = append(out.Parts, chat.ImagePart(p.ImageURL.URL))
			default:
				return out, fmt.Errorf("content[%d].type: unsupported content part %q", j, p.Type)
			}
		}
		out.Content = text.String()
	default:
		return out, errors.New("content: must be a string or an array of content parts")
	}
	return out, nil
}

// fromChat encodes a message for an upstream: content as a string when
// it is text only (what every server takes), as parts when it has
// images.
//
// An assistant message's thinking is not sent: Chat Completions has no
// field for it that servers agree on, DeepSeek answers 400 to
// reasoning_content in the input, and no OpenAI-compatible server checks
// a signature, so nothing is lost that the model needs (its chat template
// drops earlier turns' thinking anyway).
func fromChat(m *chat.Message) Message {
	out := Message{Role: string(m.Role), Name: m.Name, ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	switch {
	case len(m.Parts) > 0:
		parts := make([]contentPart, 0, len(m.Parts))
		for _, p := range m.Parts {
			switch p.Type {
			case chat.PartText:
				parts = append(parts, contentPart{Type: "text", Text: p.Text})
			case chat.PartImage:
				// Chat Completions takes images as URLs only: inline data
				// (from Anthropic's base64 sources) goes as a data: URL.
				cp := contentPart{Type: "image_url"}
				cp.ImageURL = &struct {
					URL    string `json:"url"`
					Detail string `json:"detail,omitempty"`
				}{URL: upstream.ImageURL(&p)}
				parts = append(parts, cp)
			}
		}
		out.Content, _ = json.Marshal(parts)
	case m.Content == "" && len(m.ToolCalls) > 0:
		// content omitted: null is what OpenAI sends for tool-call turns
	default:
		out.Content, _ = json.Marshal(m.Content)
	}
	return out
}

// fromChatMessages encodes messages for an upstream. A tool message takes
// text only: the images of a run of tool results (a tool that returns a
// screenshot) follow the run, as a user message.
func fromChatMessages(ms []chat.Message) []Message {
	out := make([]Message, 0, len(ms))
	var images []chat.Part
	for i := range ms {
		m := &ms[i]
		if m.Role != chat.RoleTool && len(images) > 0 {
			out = append(out, fromChat(&chat.Message{Role: chat.RoleUser, Parts: images}))
			images = nil
		}
		if m.Role == chat.RoleTool && hasImage(m.Parts) {
			tm := *m
			tm.Parts = nil
			for _, p := range m.Parts {
				if p.Type == chat.PartImage {
					images = append(images, p)
				}
			}
			out = append(out, fromChat(&tm))
			continue
		}
		out = append(out, fromChat(m))
	}
	if len(images) > 0 {
		out = append(out, fromChat(&chat.Message{Role: chat.RoleUser, Parts: images}))
	}
	return out
}

func hasImage(ps []chat.Part) bool {
	for _, p := range ps {
		if p.Type == chat.PartImage {
			return true
		}
	}
	return false
}

// EncodeRequest encodes req as a streaming Chat Completions request for an
// upstream, asking for usage so that firstword can meter. The common
// request is written by encodeSimpleRequest, without reflection; the
// rest by encodeRequest, with the same bytes for what both can write. Fields in
// req.Extra are passed through. maxTokensField names the field for the
// answer cap: "max_tokens" (empty means this) or "max_completion_tokens".
func EncodeRequest(req *chat.Request, maxTokensField string) ([]byte, error) {
	if maxTokensField == "" {
		maxTokensField = "max_tokens"
	}
	if b, ok := encodeSimpleRequest(req, maxTokensField); ok {
		return b, nil
	}
	return encodeRequest(req, maxTokensField)
}

// reasoningEffort is the reasoning_effort sent for what a request asks of
// the model's thinking: its effort, or the effort nearest its budget. ""
// sends none: nothing was asked, or "none", which OpenAI takes only from
// gpt-5.1 on (where it is the default) and older models refuse with a
// 400; a model that always thinks then thinks at its default.
// Servers that do not know the field (most DeepSeek-style ones) ignore it.
func reasoningEffort(t *chat.ThinkingAsk) string {
	if t == nil || t.Effort == "none" {
		return ""
	}
	if t.Effort != "" {
		return t.Effort
	}
	return chat.BudgetEffort(t.BudgetTokens)
}

// encodeRequest is EncodeRequest for any request.
//
// The body is a map, not a struct: Extra carries members of the client's
// that firstword does not model, and they must be merged at the top level
// without overriding what firstword sets (the model after routing, stream
// and stream_options it needs).
func encodeRequest(req *chat.Request, maxTokensField string) ([]byte, error) {
	body := map[string]any{
		"model":          req.Model,
		"stream":         true,
		"stream_options": StreamOptions{IncludeUsage: true},
	}
	body["messages"] = fromChatMessages(req.Messages)
	if req.MaxTokens > 0 {
		body[maxTokensField] = req.MaxTokens
	}
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		body["top_p"] = *req.TopP
	}
	if req.N > 1 {
		body["n"] = req.N
	}
	if e := reasoningEffort(req.Thinking); e != "" {
		body["reasoning_effort"] = e
	}
	if len(req.Stop) > 0 {
		body["stop"] = req.Stop
	}
	if req.Seed != nil {
		body["seed"] = *req.Seed
	}
	if req.User != "" {
		body["user"] = req.User
	}
	if len(req.Tools) > 0 {
		tools := make([]Tool, len(req.Tools))
		for i, t := range req.Tools {
			tools[i].Type = "function"
			tools[i].Function.Name = t.Name
			tools[i].Function.Description = t.Description
			tools[i].Function.Parameters = t.Parameters
		}
		body["tools"] = tools
	}
	if tc := req.ToolChoice; tc != nil {
		if tc.Mode == "tool" {
			body["tool_choice"] = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		} else {
			body["tool_choice"] = tc.Mode
		}
	}
	if req.ParallelToolCalls != nil {
		body["parallel_tool_calls"] = *req.ParallelToolCalls
	}
	if len(req.ResponseFormat) > 0 {
		body["response_format"] = req.ResponseFormat
	}
	for k, v := range req.Extra {
		if _, ok := body[k]; !ok {
			body[k] = v
		}
	}
	return json.Marshal(body)
}
