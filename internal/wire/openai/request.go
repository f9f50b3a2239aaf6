// Package openai encodes and decodes OpenAI's Chat Completions wire format in
// both directions: requests and responses as a client sends and receives
// them, and as an upstream receives and sends them. It knows nothing of
// HTTP routing or providers.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/jsonerr"
	"github.com/firstword/firstword/internal/wire/reqbody"
)

// StreamOptions is the stream_options request field.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ParsedRequest is a decoded client request.
type ParsedRequest struct {
	Request       *chat.Request
	Stream        bool
	IncludeUsage  bool
	StreamOptions bool // stream_options was present
}

// RequestError is a client mistake in a request body. Param names the
// offending field in OpenAI's form (messages[1].content[0].type).
type RequestError = reqbody.Error

// known are the request fields decoded into chat.Request; every other field
// is kept in Request.Extra, so that a field firstword does not model
// (logprobs, logit_bias...) still reaches an upstream
// that speaks Chat Completions, instead of being dropped silently.
var known = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true,
	"max_tokens": true, "max_completion_tokens": true, "temperature": true,
	"top_p": true, "n": true, "stop": true, "seed": true, "user": true,
	"tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"response_format": true, "reasoning_effort": true, "thinking": true,
}

// inMessage is a client's message: a Message, and on an assistant turn
// the thinking it came with, as LiteLLM writes it. thinking_blocks go
// back to Claude unchanged; reasoning_content, thinking text without a
// signature, is accepted and dropped, as no upstream checks or needs it.
type inMessage struct {
	Message
	ThinkingBlocks   []ThinkingBlock `json:"thinking_blocks"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
}

// thinking decodes m's thinking_blocks into chat blocks of Anthropic's
// format.
func (m *inMessage) thinking() ([]chat.ThinkingBlock, error) {
	var out []chat.ThinkingBlock
	for j, tb := range m.ThinkingBlocks {
		var b chat.ThinkingBlock
		switch tb.Type {
		case "thinking":
			if tb.Thinking == nil {
				return nil, fmt.Errorf("thinking_blocks[%d].thinking: required", j)
			}
			b.Text = *tb.Thinking
			if tb.Signature != nil {
				b.Signature = *tb.Signature
			}
		case "redacted_thinking":
			if tb.Data == nil || *tb.Data == "" {
				return nil, fmt.Errorf("thinking_blocks[%d].data: required", j)
			}
			b.Redacted = *tb.Data
		default:
			return nil, fmt.Errorf("thinking_blocks[%d].type: must be thinking or redacted_thinking, not %q", j, tb.Type)
		}
		b.Format = chat.ThinkingAnthropic
		out = append(out, b)
	}
	if len(out) > 0 && m.Role != "assistant" {
		return nil, errors.New("thinking_blocks: allowed only on assistant messages")
	}
	return out, nil
}

// ParseRequest decodes a Chat Completions request body, checking types and
// required fields. Errors are *RequestError naming the field.
//
// Most requests are decoded by parseSimpleRequest, a single pass without
// reflection; what it declines is decoded here member by member
// (reqbody), so that every error names the member it is about, as
// OpenAI's do.
func ParseRequest(body []byte) (*ParsedRequest, error) {
	if pr, ok := parseSimpleRequest(body); ok {
		return pr, nil
	}
	return parseRequest(body)
}

// parseRequest is ParseRequest for any request.
func parseRequest(body []byte) (*ParsedRequest, error) {
	raw, req, err := reqbody.Start(body)
	if err != nil {
		return nil, err
	}
	out := &ParsedRequest{Request: req}
	if err := reqbody.Field(raw, "stream", &out.Stream); err != nil {
		return nil, err
	}
	if v, ok := raw["stream_options"]; ok && !reqbody.IsNull(v) {
		var so struct {
			IncludeUsage       *bool `json:"include_usage"`
			IncludeObfuscation *bool `json:"include_obfuscation"`
		}
		// Strict, unlike the rest of the body: an option firstword does
		// not know is one it cannot honour, and the client should hear
		// so rather than find out from the stream.
		if err := strictObject(v, &so); err != nil {
			return nil, reqbody.Errorf("stream_options", "%v", err)
		}
		if !out.Stream {
			return nil, reqbody.Errorf("stream_options", "only allowed when stream is true")
		}
		out.StreamOptions = true
		out.IncludeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	wm, err := reqbody.Messages[inMessage](raw)
	if err != nil {
		return nil, err
	}
	req.Messages = make([]chat.Message, len(wm))
	for i := range wm {
		m, err := wm[i].toChat()
		if err == nil {
			m.Thinking, err = wm[i].thinking()
		}
		if err != nil {
			return nil, reqbody.Errorf(fmt.Sprintf("messages[%d]", i), "%v", err)
		}
		req.Messages[i] = m
	}
	if req.Thinking, err = parseThinking(raw); err != nil {
		return nil, err
	}

	var maxTokens, maxCompletion *int
	if err := reqbody.Field(raw, "max_tokens", &maxTokens); err != nil {
		return nil, err
	}
	if err := reqbody.Field(raw, "max_completion_tokens", &maxCompletion); err != nil {
		return nil, err
	}
	// max_completion_tokens replaced max_tokens at OpenAI; clients send
	// either, or both (the newer wins). Which one an upstream takes is
	// the provider's max_tokens_field, not the client's choice.
	for name, p := range map[string]*int{"max_tokens": maxTokens, "max_completion_tokens": maxCompletion} {
		if p != nil && *p < 1 {
			return nil, reqbody.Errorf(name, "must be at least 1")
		}
	}
	if maxCompletion != nil {
		req.MaxTokens = *maxCompletion
	} else if maxTokens != nil {
		req.MaxTokens = *maxTokens
	}
	if err := reqbody.Between(raw, "temperature", &req.Temperature, 0, 2); err != nil {
		return nil, err
	}
	if err := reqbody.Field(raw, "top_p", &req.TopP); err != nil {
		return nil, err
	}
	var n *int
	if err := reqbody.Field(raw, "n", &n); err != nil {
		return nil, err
	}
	if n != nil {
		if *n < 1 || *n > 128 {
			return nil, reqbody.Errorf("n", "must be between 1 and 128")
		}
		req.N = *n
	}
	// stop is a string or an array of strings; chat.Request holds a list.
	if v, ok := raw["stop"]; ok && !reqbody.IsNull(v) {
		var s string
		if json.Unmarshal(v, &s) == nil {
			req.Stop = []string{s}
		} else if err := json.Unmarshal(v, &req.Stop); err != nil {
			return nil, reqbody.Errorf("stop", "must be a string or an array of strings")
		}
	}
	if err := reqbody.Field(raw, "seed", &req.Seed); err != nil {
		return nil, err
	}
	if err := reqbody.Field(raw, "user", &req.User); err != nil {
		return nil, err
	}
	tools, err := reqbody.List[Tool](raw, "tools", "tool")
	if err != nil {
		return nil, err
	}
	for i, t := range tools {
		if t.Type != "function" && t.Type != "" {
			return nil, reqbody.Errorf(fmt.Sprintf("tools[%d].type", i), "unsupported tool type %q", t.Type)
		}
		if t.Function.Name == "" {
			return nil, reqbody.Errorf(fmt.Sprintf("tools[%d].function.name", i), "required")
		}
		req.Tools = append(req.Tools, chat.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	if v, ok := raw["tool_choice"]; ok && !reqbody.IsNull(v) {
		tc, err := parseToolChoice(v)
		if err != nil {
			return nil, err
		}
		req.ToolChoice = tc
	}
	if err := reqbody.Field(raw, "parallel_tool_calls", &req.ParallelToolCalls); err != nil {
		return nil, err
	}
	// response_format is kept raw: each upstream encoder maps it onto its
	// own JSON mode, and Chat Completions upstreams take it as it is.
	if v, ok := raw["response_format"]; ok && !reqbody.IsNull(v) {
		if v[0] != '{' {
			return nil, reqbody.Errorf("response_format", "must be an object")
		}
		req.ResponseFormat = v
	}
	for k, v := range raw {
		if !known[k] {
			if req.Extra == nil {
				req.Extra = make(map[string]json.RawMessage)
			}
			req.Extra[k] = v
		}
	}
	return out, nil
}

// parseThinking decodes what the client asks of the model's thinking:
// reasoning_effort (OpenAI's), and LiteLLM's Anthropic-style thinking
// object ({"type":"enabled","budget_tokens":N} or {"type":"disabled"}).
// nil when it asks nothing.
func parseThinking(raw map[string]json.RawMessage) (*chat.ThinkingAsk, error) {
	var ask chat.ThinkingAsk
	if err := reqbody.Field(raw, "reasoning_effort", &ask.Effort); err != nil {
		return nil, err
	}
	if ask.Effort != "" && !slices.Contains(chat.Efforts, ask.Effort) {
		return nil, reqbody.Errorf("reasoning_effort", "must be one of %s", strings.Join(chat.Efforts, ", "))
	}
	if v, ok := raw["thinking"]; ok && !reqbody.IsNull(v) {
		var t struct {
			Type         string `json:"type"`
			BudgetTokens *int   `json:"budget_tokens"`
		}
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, reqbody.Errorf("thinking", "%v", jsonerr.Type(err))
		}
		switch t.Type {
		case "enabled":
			if t.BudgetTokens == nil || *t.BudgetTokens < 1 {
				return nil, reqbody.Errorf("thinking.budget_tokens", "required, at least 1, when type is enabled")
			}
			ask.BudgetTokens = *t.BudgetTokens
		case "disabled":
			if ask.Effort != "" && ask.Effort != "none" {
				return nil, reqbody.Errorf("thinking", "disabled contradicts reasoning_effort %q", ask.Effort)
			}
			ask.Effort = "none"
		default:
			return nil, reqbody.Errorf("thinking.type", "must be enabled or disabled")
		}
	}
	if ask == (chat.ThinkingAsk{}) {
		return nil, nil
	}
	return &ask, nil
}

// parseToolChoice decodes tool_choice: a mode (auto, none, required) or
// the object that names one function, in the chat vocabulary's terms.
func parseToolChoice(v json.RawMessage) (*chat.ToolChoice, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return &chat.ToolChoice{Mode: s}, nil
		}
		return nil, reqbody.Errorf("tool_choice", "must be auto, none, required or a function object")
	}
	var o struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(v, &o); err != nil || o.Function.Name == "" {
		return nil, reqbody.Errorf("tool_choice", "must be auto, none, required or {\"type\":\"function\",\"function\":{\"name\":...}}")
	}
	return &chat.ToolChoice{Mode: "tool", Name: o.Function.Name}, nil
}

// strictObject decodes the object v into dst, refusing members dst does
// not have.
func strictObject(v json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonerr.Type(err)
	}
	return nil
}
