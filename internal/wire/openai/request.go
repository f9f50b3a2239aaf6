// Package openai encodes and decodes OpenAI's Chat Completions wire format in
// both directions: requests and responses as a client sends and receives
// them, and as an upstream receives and sends them. It knows nothing of
// HTTP routing or providers.
package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

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
// (logprobs, logit_bias, reasoning_effort...) still reaches an upstream
// that speaks Chat Completions, instead of being dropped silently.
var known = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true,
	"max_tokens": true, "max_completion_tokens": true, "temperature": true,
	"top_p": true, "n": true, "stop": true, "seed": true, "user": true,
	"tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"response_format": true,
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
	wm, err := reqbody.Messages[Message](raw)
	if err != nil {
		return nil, err
	}
	req.Messages = make([]chat.Message, len(wm))
	for i := range wm {
		m, err := wm[i].toChat()
		if err != nil {
			return nil, reqbody.Errorf(fmt.Sprintf("messages[%d]", i), "%v", err)
		}
		req.Messages[i] = m
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
