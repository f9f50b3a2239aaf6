package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// This file and upstream_stream.go are the upstream direction: firstword
// calling a Responses API (type openai-responses). request.go and
// encode.go are the client-facing surface.

// MinOutputTokens is the smallest max_output_tokens the Responses API
// takes: it answers 400 integer_below_min_value to less.
const MinOutputTokens = 16

// upRequest is the body of POST /responses as firstword sends it.
type upRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	// Store is always false: OpenAI would otherwise keep every response
	// (and bill its storage) for a conversation state the gateway neither
	// manages nor refers back to; the whole conversation goes in Input.
	Store             bool            `json:"store"`
	Instructions      string          `json:"instructions,omitempty"`
	Input             []upItem        `json:"input"`
	Tools             []upTool        `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens   int             `json:"max_output_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	Text              *upText         `json:"text,omitempty"`
	Reasoning         *upReasoning    `json:"reasoning,omitempty"`
	Include           []string        `json:"include,omitempty"`
	User              string          `json:"user,omitempty"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	PromptCacheKey    string          `json:"prompt_cache_key,omitempty"`
	SafetyIdentifier  string          `json:"safety_identifier,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
}

// upItem is an input item: a message, a function call the model made, a
// call's output, or a reasoning item the model made.
type upItem struct {
	Type string `json:"type"`
	// A reasoning item's id, encrypted_content and summary (which the
	// API requires, [] at least).
	ID               string        `json:"id,omitempty"`
	EncryptedContent string        `json:"encrypted_content,omitempty"`
	Summary          *[]upTextPart `json:"summary,omitempty"`
	Role             string        `json:"role,omitempty"`
	Content          []any         `json:"content,omitempty"` // upText parts and upImage parts
	CallID           string        `json:"call_id,omitempty"`
	Name             string        `json:"name,omitempty"`
	Arguments        string        `json:"arguments,omitempty"`
	// Output is a function_call_output's: a JSON string, or an array of
	// parts when the tool returned images.
	Output json.RawMessage `json:"output,omitempty"`
}

type upTextPart struct {
	Type string `json:"type"` // input_text, output_text or summary_text
	Text string `json:"text"`
}

type upImagePart struct {
	Type     string `json:"type"` // input_image
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
}

type upTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict is always sent, as false: the Responses API defaults it to
	// true (Chat Completions to false) and then refuses any schema that
	// is not in its strict subset, which chat.Tool cannot say.
	Strict bool `json:"strict"`
}

type upToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type upText struct {
	Format    *format `json:"format,omitempty"`
	Verbosity string  `json:"verbosity,omitempty"`
}

type upReasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// EncodeUpstreamRequest encodes req as a streaming Responses API request
// (POST {base_url}/responses) with store false.
//
// The leading system messages become instructions (joined by a blank
// line), later ones developer messages; user messages input_text and
// input_image parts, assistant messages output_text parts followed by a
// function_call item per tool call, and tool messages function_call_output
// items (an array of parts when the tool returned images). Function tools
// are sent with strict false, as Chat Completions treats them.
// response_format becomes text.format; max_tokens max_output_tokens,
// raised to MinOutputTokens when smaller. Of req.Extra (the Chat
// Completions fields chat.Request does not model), reasoning_effort
// becomes reasoning.effort and verbosity text.verbosity; service_tier,
// prompt_cache_key, safety_identifier and metadata, which the two APIs
// share, pass through; the rest is not sent. Seed, which the Responses API
// does not take, is dropped (it is a best-effort hint); more than one
// choice and stop sequences, which it cannot honour, are errors.
// CacheBreakpoint and Name are not sent: OpenAI caches prefixes by
// itself, and input messages have no participant names. A thinking ask
// becomes reasoning (effort, summary "auto") and includes the reasoning
// items' encrypted_content (askReasoning); an assistant turn's thinking
// blocks signed by a Responses API go back as reasoning items before it
// (appendReasoning).
func EncodeUpstreamRequest(req *chat.Request) ([]byte, error) {
	// Built apart from the encoding: a request is encoded under the
	// frames of a stream, and encoding/json's reflection is deep.
	out, err := buildUpstreamRequest(req)
	if err != nil {
		return nil, err
	}
	return upstream.Marshal(out)
}

func buildUpstreamRequest(req *chat.Request) (*upRequest, error) {
	if req.N > 1 {
		return nil, fmt.Errorf("n: the Responses API generates one choice, not %d", req.N)
	}
	if len(req.Stop) > 0 {
		return nil, errors.New("stop: the Responses API takes no stop sequences")
	}
	out := &upRequest{Model: req.Model, Stream: true, Input: []upItem{}, Temperature: req.Temperature, TopP: req.TopP,
		ParallelToolCalls: req.ParallelToolCalls, User: req.User}
	if req.MaxTokens > 0 {
		out.MaxOutputTokens = max(req.MaxTokens, MinOutputTokens)
	}
	var instructions []string
	leading := true
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role != chat.RoleSystem {
			leading = false
		}
		switch m.Role {
		case chat.RoleSystem:
			text := upstream.MessageText(m)
			if text == "" {
				continue
			}
			if leading {
				instructions = append(instructions, text)
				continue
			}
			out.Input = append(out.Input, upItem{Type: "message", Role: "developer", Content: []any{upTextPart{Type: "input_text", Text: text}}})
		case chat.RoleUser:
			out.Input = append(out.Input, upItem{Type: "message", Role: "user", Content: inputParts(m)})
		case chat.RoleAssistant:
			// The turn's reasoning first, as the model made it.
			out.Input = appendReasoning(out.Input, m.Thinking)
			// Assistant content takes output_text parts only (the API
			// refuses input_text there); an assistant turn has no images.
			if text := upstream.MessageText(m); text != "" {
				out.Input = append(out.Input, upItem{Type: "message", Role: "assistant", Content: []any{upTextPart{Type: "output_text", Text: text}}})
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d]: a tool call needs an id and a name", i, j)
				}
				args := tc.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				out.Input = append(out.Input, upItem{Type: "function_call", CallID: tc.ID, Name: tc.Name, Arguments: args})
			}
		case chat.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("messages[%d]: a tool message needs a tool_call_id", i)
			}
			out.Input = append(out.Input, upItem{Type: "function_call_output", CallID: m.ToolCallID, Output: toolOutput(m)})
		default:
			return nil, fmt.Errorf("messages[%d]: unsupported role %q", i, m.Role)
		}
	}
	out.Instructions = strings.Join(instructions, "\n\n")

	for _, t := range req.Tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, upTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params})
	}
	if tc := req.ToolChoice; tc != nil {
		switch tc.Mode {
		case "auto", "none", "required":
			out.ToolChoice = tc.Mode
		case "tool":
			out.ToolChoice = upToolChoice{Type: "function", Name: tc.Name}
		default:
			return nil, fmt.Errorf("tool_choice: unsupported mode %q", tc.Mode)
		}
	}
	f, err := textFormat(req.ResponseFormat)
	if err != nil {
		return nil, err
	}
	if f != nil {
		out.Text = &upText{Format: f}
	}
	if err := extras(req.Extra, out); err != nil {
		return nil, err
	}
	askReasoning(req.Thinking, out)
	return out, nil
}

// askReasoning sets what a request asks of the thinking, over what
// reasoning_effort in Extra set: the effort (or the effort nearest the
// budget), summaries of the reasoning streamed ("auto": the most detailed
// the model gives), and the items' encrypted_content, which is what lets
// a reasoning item go back in the next turn with store false. Effort
// "none" changes nothing: OpenAI takes it only from gpt-5.1 on, where it
// is the default, and older models refuse it.
func askReasoning(t *chat.ThinkingAsk, out *upRequest) {
	if t == nil || t.Effort == "none" {
		return
	}
	effort := t.Effort
	if effort == "" {
		effort = chat.BudgetEffort(t.BudgetTokens)
	}
	if effort == "" && out.Reasoning != nil {
		effort = out.Reasoning.Effort
	}
	out.Reasoning = &upReasoning{Effort: effort}
	if !t.Hide {
		// Only when the thinking is shown: OpenAI refuses summaries to
		// organisations it has not verified.
		out.Reasoning.Summary = "auto"
	}
	out.Include = []string{"reasoning.encrypted_content"}
}

// appendReasoning appends an assistant turn's reasoning items: the
// thinking blocks a Responses API signed (their encrypted_content), with
// their ids and summaries. Other blocks are dropped: another provider's
// signature means nothing here, and reasoning without encrypted content
// cannot be sent back with store false.
func appendReasoning(in []upItem, blocks []chat.ThinkingBlock) []upItem {
	for _, b := range blocks {
		if b.Format != chat.ThinkingResponses || b.Signature == "" {
			continue
		}
		summary := []upTextPart{}
		if b.Text != "" {
			summary = append(summary, upTextPart{Type: "summary_text", Text: b.Text})
		}
		in = append(in, upItem{Type: "reasoning", ID: b.ID, EncryptedContent: b.Signature, Summary: &summary})
	}
	return in
}

// inputParts are a user or tool message's input_text and input_image parts.
func inputParts(m *chat.Message) []any {
	if len(m.Parts) == 0 {
		return []any{upTextPart{Type: "input_text", Text: m.Content}}
	}
	parts := make([]any, 0, len(m.Parts))
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			parts = append(parts, upTextPart{Type: "input_text", Text: p.Text})
		case chat.PartImage:
			parts = append(parts, upImagePart{Type: "input_image", ImageURL: upstream.ImageURL(&p), Detail: "auto"})
		}
	}
	return parts
}

// toolOutput is a function_call_output's output: the text, or the parts
// when the tool returned images.
func toolOutput(m *chat.Message) json.RawMessage {
	for _, p := range m.Parts {
		if p.Type == chat.PartImage {
			b, _ := upstream.Marshal(inputParts(m))
			return b
		}
	}
	b, _ := upstream.Marshal(upstream.MessageText(m))
	return b
}

// textFormat maps Chat Completions' response_format onto text.format.
func textFormat(raw json.RawMessage) (*format, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, fmt.Errorf("response_format: %v", err)
	}
	switch rf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return &format{Type: "json_object"}, nil
	case "json_schema":
		js := rf.JSONSchema
		if js == nil || js.Name == "" || len(js.Schema) == 0 {
			return nil, errors.New("response_format: json_schema needs json_schema.name and json_schema.schema")
		}
		return &format{Type: "json_schema", Name: js.Name, Description: js.Description, Schema: js.Schema, Strict: js.Strict}, nil
	}
	return nil, fmt.Errorf("response_format: type %q is not one of text, json_object, json_schema", rf.Type)
}

// extras maps the Chat Completions fields of extra that the Responses API
// has a place for.
func extras(extra map[string]json.RawMessage, out *upRequest) error {
	str := func(name string, dst *string) error {
		v, ok := extra[name]
		if !ok || string(v) == "null" {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("%s: must be a string", name)
		}
		return nil
	}
	var effort, verbosity string
	for name, dst := range map[string]*string{
		"reasoning_effort": &effort, "verbosity": &verbosity,
		"service_tier": &out.ServiceTier, "prompt_cache_key": &out.PromptCacheKey, "safety_identifier": &out.SafetyIdentifier,
	} {
		if err := str(name, dst); err != nil {
			return err
		}
	}
	if effort != "" {
		out.Reasoning = &upReasoning{Effort: effort}
	}
	if verbosity != "" {
		if out.Text == nil {
			out.Text = &upText{}
		}
		out.Text.Verbosity = verbosity
	}
	if v, ok := extra["metadata"]; ok && string(bytes.TrimSpace(v)) != "null" {
		if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
			return errors.New("metadata: must be an object")
		}
		out.Metadata = v
	}
	return nil
}
