package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/jsonerr"
	"github.com/firstword/firstword/internal/wire/reqbody"
)

// RequestError is a client mistake in a request body. Param names the
// offending field, in the API's dotted form (messages.1.content.0.type).
type RequestError = reqbody.Error

// inBlock is a content block as a client sends it.
type inBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	Source       *ImageSource    `json:"source"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	CacheControl json.RawMessage `json:"cache_control"`
	// thinking and redacted_thinking
	Thinking  *string `json:"thinking"`
	Signature *string `json:"signature"`
	Data      *string `json:"data"`
}

func (b *inBlock) cached() bool { return !reqbody.IsNull(b.CacheControl) }

type inMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type inTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ParsedRequest is a decoded request, and what its client is sent of the
// model's thinking.
type ParsedRequest struct {
	reqbody.Parsed
	Thinking Show
}

// ParseRequest decodes a Messages API request body, checking types and
// required fields. Errors are *RequestError naming the field.
//
// A user turn becomes one chat message per tool_result block (RoleTool,
// with ToolCallID and the result's text) and one RoleUser message for the
// other blocks; an assistant turn becomes one message with its text and
// its tool_use blocks as ToolCalls (Arguments is the input's JSON).
// The system string, or each system text block, becomes a leading
// RoleSystem message. A message holding a block with cache_control is
// marked CacheBreakpoint; a tool's cache_control is not kept (with prompt
// caching EncodeRequest marks the last tool whenever a message is marked).
// Thinking and redacted_thinking blocks in assistant turns are the
// message's Thinking, unchanged (Format anthropic), for Claude to check;
// a turn of nothing else is dropped. Other block types are refused.
// thinking and output_config.effort are the request's ThinkingAsk (see
// parseThinking). metadata.user_id becomes Request.User. Fields firstword
// does not model (top_k, service_tier...) are ignored, and not kept in
// Request.Extra: that holds OpenAI fields, which other adapters forward.
func ParseRequest(body []byte) (*ParsedRequest, error) {
	raw, req, err := reqbody.Start(body)
	if err != nil {
		return nil, err
	}
	out := &ParsedRequest{Parsed: reqbody.Parsed{Request: req}}
	var maxTokens *int
	if err := reqbody.Field(raw, "max_tokens", &maxTokens); err != nil {
		return nil, err
	}
	// Required, as Anthropic requires it: a client written against the
	// Messages API always sends it, and one that did not would be
	// refused there too.
	if maxTokens == nil {
		return nil, reqbody.Errorf("max_tokens", "required")
	}
	if *maxTokens < 1 {
		return nil, reqbody.Errorf("max_tokens", "must be at least 1")
	}
	req.MaxTokens = *maxTokens
	if err := reqbody.Field(raw, "stream", &out.Stream); err != nil {
		return nil, err
	}
	if req.Thinking, out.Thinking, err = parseThinking(raw); err != nil {
		return nil, err
	}

	if v, ok := raw["system"]; ok && !reqbody.IsNull(v) {
		msgs, err := parseSystem(v)
		if err != nil {
			return nil, err
		}
		req.Messages = msgs
	}
	wm, err := reqbody.Messages[inMessage](raw)
	if err != nil {
		return nil, err
	}
	// turns counts the chat messages the turns became: a turn of only
	// thinking blocks becomes none, and a conversation of nothing else
	// would reach the upstream empty.
	turns := 0
	for i := range wm {
		msgs, err := parseMessage(&wm[i], fmt.Sprintf("messages.%d", i))
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, msgs...)
		turns += len(msgs)
	}
	if turns == 0 {
		return nil, reqbody.Errorf("messages", "must contain at least one message with content other than thinking")
	}

	// Anthropic's ranges, not OpenAI's (temperature up to 2): a value the
	// client's API would refuse is refused here, whichever upstream the
	// request is routed to.
	if err := reqbody.Between(raw, "temperature", &req.Temperature, 0, 1); err != nil {
		return nil, err
	}
	if err := reqbody.Between(raw, "top_p", &req.TopP, 0, 1); err != nil {
		return nil, err
	}
	if err := reqbody.Field(raw, "stop_sequences", &req.Stop); err != nil {
		return nil, err
	}
	if v, ok := raw["metadata"]; ok && !reqbody.IsNull(v) {
		var md struct {
			UserID *string `json:"user_id"`
		}
		if err := json.Unmarshal(v, &md); err != nil {
			return nil, reqbody.Errorf("metadata", "%v", jsonerr.Type(err))
		}
		if md.UserID != nil {
			req.User = *md.UserID
		}
	}
	tools, err := reqbody.List[inTool](raw, "tools", "tool")
	if err != nil {
		return nil, err
	}
	for i, t := range tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, reqbody.Errorf(fmt.Sprintf("tools.%d.type", i), "unsupported tool type %q: only client tools (name, description, input_schema) are supported", t.Type)
		}
		if t.Name == "" {
			return nil, reqbody.Errorf(fmt.Sprintf("tools.%d.name", i), "required")
		}
		// The schema goes upstream as it is, in whichever format: it is
		// only checked to be an object, which every format requires.
		var schema json.RawMessage
		if !reqbody.IsNull(t.InputSchema) {
			if t.InputSchema[0] != '{' {
				return nil, reqbody.Errorf(fmt.Sprintf("tools.%d.input_schema", i), "must be an object")
			}
			schema = t.InputSchema
		}
		req.Tools = append(req.Tools, chat.Tool{Name: t.Name, Description: t.Description, Parameters: schema})
	}
	if v, ok := raw["tool_choice"]; ok && !reqbody.IsNull(v) {
		var tc ToolChoice
		if err := json.Unmarshal(v, &tc); err != nil {
			return nil, reqbody.Errorf("tool_choice", "must be an object: %v", jsonerr.Type(err))
		}
		// Anthropic's modes in the chat vocabulary's (OpenAI's) terms:
		// any is required.
		switch tc.Type {
		case "auto":
			req.ToolChoice = &chat.ToolChoice{Mode: "auto"}
		case "any":
			req.ToolChoice = &chat.ToolChoice{Mode: "required"}
		case "none":
			req.ToolChoice = &chat.ToolChoice{Mode: "none"}
		case "tool":
			if tc.Name == "" {
				return nil, reqbody.Errorf("tool_choice.name", "required when type is tool")
			}
			req.ToolChoice = &chat.ToolChoice{Mode: "tool", Name: tc.Name}
		default:
			return nil, reqbody.Errorf("tool_choice.type", "must be auto, any, tool or none")
		}
		// Anthropic says this inside tool_choice; the chat vocabulary, as
		// OpenAI, beside it.
		if tc.DisableParallelToolUse {
			no := false
			req.ParallelToolCalls = &no
		}
	}
	return out, nil
}

// parseSystem decodes the system prompt: a string or text blocks.
func parseSystem(v json.RawMessage) ([]chat.Message, error) {
	s, blocks, isString, err := reqbody.StringOrList[inBlock](v, "system", "text blocks")
	if err != nil {
		return nil, err
	}
	if isString {
		return []chat.Message{{Role: chat.RoleSystem, Content: s}}, nil
	}
	msgs := make([]chat.Message, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return nil, reqbody.Errorf(fmt.Sprintf("system.%d.type", i), "must be text, not %q", b.Type)
		}
		if b.Text == nil {
			return nil, reqbody.Errorf(fmt.Sprintf("system.%d.text", i), "required")
		}
		msgs = append(msgs, chat.Message{Role: chat.RoleSystem, Content: *b.Text, CacheBreakpoint: b.cached()})
	}
	return msgs, nil
}

// parseMessage decodes one turn into the chat messages it stands for.
func parseMessage(m *inMessage, param string) ([]chat.Message, error) {
	var role chat.Role
	switch m.Role {
	case "user":
		role = chat.RoleUser
	case "assistant":
		role = chat.RoleAssistant
	case "":
		return nil, reqbody.Errorf(param+".role", "required")
	case "system":
		return nil, reqbody.Errorf(param+".role", "must be user or assistant: the system prompt goes in the top-level system field")
	default:
		return nil, reqbody.Errorf(param+".role", "must be user or assistant, not %q", m.Role)
	}
	if reqbody.IsNull(m.Content) {
		return nil, reqbody.Errorf(param+".content", "required")
	}
	s, blocks, isString, err := reqbody.StringOrList[inBlock](m.Content, param+".content", "content blocks")
	if err != nil {
		return nil, err
	}
	if isString {
		return []chat.Message{{Role: role, Content: s}}, nil
	}
	if len(blocks) == 0 {
		return nil, reqbody.Errorf(param+".content", "must contain at least one content block")
	}

	// One turn can become several messages: each tool_result is a tool
	// message of its own (the chat vocabulary's, OpenAI's, shape), and
	// the user's other blocks around them are a user message. cur is the
	// message the next text or image joins; a tool result closes it, so
	// the order of blocks survives.
	var (
		out []chat.Message
		cur *chat.Message // the user or assistant message being filled
	)
	current := func() *chat.Message {
		if cur == nil {
			out = append(out, chat.Message{Role: role})
			cur = &out[len(out)-1]
		}
		return cur
	}
	for j := range blocks {
		b := &blocks[j]
		bp := fmt.Sprintf("%s.content.%d", param, j)
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, reqbody.Errorf(bp+".text", "required")
			}
			c := current()
			c.Parts = append(c.Parts, chat.Part{Type: chat.PartText, Text: *b.Text})
		case "image":
			if role != chat.RoleUser {
				return nil, reqbody.Errorf(bp+".type", "image blocks are allowed only in user messages")
			}
			p, err := imagePart(b.Source, bp+".source")
			if err != nil {
				return nil, err
			}
			c := current()
			c.Parts = append(c.Parts, p)
		case "tool_use":
			if role != chat.RoleAssistant {
				return nil, reqbody.Errorf(bp+".type", "tool_use blocks are allowed only in assistant messages")
			}
			if b.ID == "" {
				return nil, reqbody.Errorf(bp+".id", "required")
			}
			if b.Name == "" {
				return nil, reqbody.Errorf(bp+".name", "required")
			}
			// input is an object; the chat vocabulary carries arguments
			// as JSON text, as OpenAI does. No input is no arguments.
			args := "{}"
			if !reqbody.IsNull(b.Input) {
				if b.Input[0] != '{' {
					return nil, reqbody.Errorf(bp+".input", "must be an object")
				}
				args = string(b.Input)
			}
			c := current()
			c.ToolCalls = append(c.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "tool_result":
			if role != chat.RoleUser {
				return nil, reqbody.Errorf(bp+".type", "tool_result blocks are allowed only in user messages")
			}
			if b.ToolUseID == "" {
				return nil, reqbody.Errorf(bp+".tool_use_id", "required")
			}
			tm := chat.Message{Role: chat.RoleTool, ToolCallID: b.ToolUseID}
			if err := toolResultContent(&tm, b.Content, bp+".content"); err != nil {
				return nil, err
			}
			out = append(out, tm)
			cur = nil // blocks after a tool result start a new user message
		case "thinking", "redacted_thinking":
			if role != chat.RoleAssistant {
				return nil, reqbody.Errorf(bp+".type", "%s blocks are allowed only in assistant messages", b.Type)
			}
			tb, err := thinkingBlock(b, bp)
			if err != nil {
				return nil, err
			}
			c := current()
			c.Thinking = append(c.Thinking, tb)
			continue
		case "":
			return nil, reqbody.Errorf(bp+".type", "required")
		default:
			return nil, reqbody.Errorf(bp+".type", "unsupported content block type %q: firstword accepts text, image, tool_use and tool_result blocks", b.Type)
		}
		// A cache_control mark ends a cacheable prefix at this block;
		// the chat vocabulary marks messages, so the message holding the
		// block carries it (see EncodeRequest's prompt caching).
		if b.cached() {
			out[len(out)-1].CacheBreakpoint = true
		}
	}
	for i := range out {
		flattenParts(&out[i])
	}
	// A turn of thinking and nothing else says nothing an upstream could
	// answer: it is dropped, as before firstword kept thinking.
	if len(out) == 1 && onlyThinking(&out[0]) {
		return nil, nil
	}
	return out, nil
}

func onlyThinking(m *chat.Message) bool {
	return len(m.Thinking) > 0 && m.Content == "" && len(m.Parts) == 0 && len(m.ToolCalls) == 0
}

// thinkingBlock decodes a thinking or redacted_thinking block (param
// names it in errors). Its text and signature, or its data, are kept as
// they came: Claude refuses a block changed in any way.
func thinkingBlock(b *inBlock, param string) (chat.ThinkingBlock, error) {
	tb := chat.ThinkingBlock{Format: chat.ThinkingAnthropic}
	if b.Type == "redacted_thinking" {
		if b.Data == nil || *b.Data == "" {
			return tb, reqbody.Errorf(param+".data", "required")
		}
		tb.Redacted = *b.Data
		return tb, nil
	}
	if b.Thinking == nil {
		return tb, reqbody.Errorf(param+".thinking", "required")
	}
	if b.Signature == nil {
		return tb, reqbody.Errorf(param+".signature", "required")
	}
	tb.Text, tb.Signature = *b.Thinking, *b.Signature
	return tb, nil
}

// efforts maps output_config.effort onto the chat vocabulary's efforts:
// Anthropic's levels above high are its highest.
var efforts = map[string]string{"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}

// parseThinking decodes thinking and output_config.effort into the
// request's ThinkingAsk, and what the client is to be sent of the
// thinking:
//   - {"type":"enabled","budget_tokens":N}: BudgetTokens N (at least
//     1024, as Anthropic requires), with the effort if one is given;
//   - {"type":"adaptive"}: the effort given, or high (Anthropic's
//     default);
//   - {"type":"disabled"}: effort none;
//   - no thinking: no ask (nil), and, as Anthropic does, no thinking
//     blocks: whatever the model's alias thinks by default is measured
//     and billed but not sent. output_config.effort alone is then not a
//     thinking ask.
//
// display "omitted" is Hide too, and the client gets its thinking blocks
// with their signatures but no text, as Anthropic sends them.
func parseThinking(raw map[string]json.RawMessage) (*chat.ThinkingAsk, Show, error) {
	var oc OutputConfig
	if err := reqbody.Field(raw, "output_config", &oc); err != nil {
		return nil, ShowNone, err
	}
	effort, ok := efforts[oc.Effort]
	if oc.Effort != "" && !ok {
		return nil, ShowNone, reqbody.Errorf("output_config.effort", "must be one of low, medium, high, xhigh, max")
	}
	var t ThinkingParam
	if err := reqbody.Field(raw, "thinking", &t); err != nil {
		return nil, ShowNone, err
	}
	ask := &chat.ThinkingAsk{Effort: effort}
	switch t.Type {
	case "":
		if !reqbody.IsNull(raw["thinking"]) {
			return nil, ShowNone, reqbody.Errorf("thinking.type", "required")
		}
		return nil, ShowNone, nil
	case "disabled":
		return &chat.ThinkingAsk{Effort: "none"}, ShowNone, nil
	case "enabled":
		if t.BudgetTokens < 1024 {
			return nil, ShowNone, reqbody.Errorf("thinking.budget_tokens", "required when type is enabled, and at least 1024")
		}
		ask.BudgetTokens = t.BudgetTokens
	case "adaptive":
		if ask.Effort == "" {
			ask.Effort = "high"
		}
	default:
		return nil, ShowNone, reqbody.Errorf("thinking.type", "must be enabled, adaptive or disabled")
	}
	switch t.Display {
	case "", "summarized":
		return ask, ShowAll, nil
	case "omitted":
		ask.Hide = true
		return ask, ShowSigned, nil
	}
	return nil, ShowNone, reqbody.Errorf("thinking.display", "must be summarized or omitted")
}

// flattenParts sets Content to the text of Parts, and drops Parts when a
// single text part says it all.
func flattenParts(m *chat.Message) {
	if len(m.Parts) == 0 {
		return
	}
	var text strings.Builder
	images := false
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			text.WriteString(p.Text)
		} else {
			images = true
		}
	}
	m.Content = text.String()
	if len(m.Parts) == 1 && !images {
		m.Parts = nil
	}
}

// toolResultContent decodes a tool_result's content: a string, or text and
// image blocks.
func toolResultContent(m *chat.Message, v json.RawMessage, param string) error {
	err := reqbody.ToolResult(m, v, param, "text and image blocks", func(k int, b *inBlock) (chat.Part, error) {
		switch b.Type {
		case "text":
			if b.Text == nil {
				return chat.Part{}, reqbody.Errorf(fmt.Sprintf("%s.%d.text", param, k), "required")
			}
			return chat.Part{Type: chat.PartText, Text: *b.Text}, nil
		case "image":
			return imagePart(b.Source, fmt.Sprintf("%s.%d.source", param, k))
		}
		return chat.Part{}, reqbody.Errorf(fmt.Sprintf("%s.%d.type", param, k), "unsupported tool_result content block type %q: text and image are supported", b.Type)
	})
	if err != nil {
		return err
	}
	flattenParts(m)
	return nil
}

// imagePart decodes an image block's source. A base64 image keeps its
// data and media type, for the upstreams that take inline images
// (Anthropic, Gemini, Ollama), and is also written as a data: URL, for
// those that take URLs (Chat Completions, Responses).
func imagePart(src *ImageSource, param string) (chat.Part, error) {
	if src == nil {
		return chat.Part{}, reqbody.Errorf(param, "required")
	}
	switch src.Type {
	case "base64":
		if src.MediaType == "" {
			return chat.Part{}, reqbody.Errorf(param+".media_type", "required")
		}
		if src.Data == "" {
			return chat.Part{}, reqbody.Errorf(param+".data", "required")
		}
		return chat.Part{Type: chat.PartImage, MediaType: src.MediaType, Data: src.Data, ImageURL: "data:" + src.MediaType + ";base64," + src.Data}, nil
	case "url":
		if src.URL == "" {
			return chat.Part{}, reqbody.Errorf(param+".url", "required")
		}
		return chat.Part{Type: chat.PartImage, ImageURL: src.URL}, nil
	case "":
		return chat.Part{}, reqbody.Errorf(param+".type", "required")
	}
	return chat.Part{}, reqbody.Errorf(param+".type", "unsupported image source %q: base64 and url are supported", src.Type)
}
