// Package responses speaks OpenAI's Responses API (POST /v1/responses), the
// format the Vercel AI SDK's OpenAI provider and newer OpenAI SDK code use by
// default: requests are decoded into a chat.Request and the normalised
// stream is encoded as Responses events, so any upstream can serve them.
//
// firstword keeps no responses, so previous_response_id is refused with a
// clear error and the whole conversation is sent in input, as the SDKs do;
// item references to the message items it sent are resolved by the
// caller's Resolver.
package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/jsonerr"
	"github.com/firstword/firstword/internal/wire/reqbody"
)

// ParsedRequest is a decoded request.
type ParsedRequest struct {
	reqbody.Parsed
	// Background: the response is produced whatever becomes of the
	// request's connection, and can be read back by its id (OpenAI's
	// background mode).
	Background bool
	// Summary: the client asked for reasoning summaries; Encrypted, for
	// reasoning items' encrypted content (see EventEncoder).
	Summary, Encrypted bool
}

// RequestError is a client error in a request, naming the parameter in
// OpenAI's form (input[1].content[0].type).
type RequestError = reqbody.Error

type request struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	Stream             bool            `json:"stream"`
	Background         bool            `json:"background"`
	Store              *bool           `json:"store"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Tools              []tool          `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	User               string          `json:"user"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Text               *struct {
		Format *format `json:"format"`
	} `json:"text"`
	Reasoning *upReasoning `json:"reasoning"`
	Include   []string     `json:"include"`
}

type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// format is text.format, as clients send it and as firstword sends it
// upstream (where the members it lacks are left out).
type format struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// item is one element of input: a message (with or without type
// "message"), a function call the model made, or a call's output.
type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	ID        string          `json:"id"`
	// reasoning
	EncryptedContent *string `json:"encrypted_content"`
	Summary          []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
	FileID   string          `json:"file_id"`
}

// image is an input_image part (param names it in errors).
func (p *contentPart) image(param string) (chat.Part, error) {
	var url string
	if len(p.ImageURL) > 0 && json.Unmarshal(p.ImageURL, &url) != nil {
		return chat.Part{}, reqbody.Errorf(param+".image_url", "must be a string")
	}
	if url == "" {
		return chat.Part{}, reqbody.Errorf(param, "an input_image needs an image_url (file_id is not supported)")
	}
	return chat.ImagePart(url), nil
}

// Resolver looks up an earlier answer's message item by its ID, for
// item_reference inputs (clients that leave store on send these instead
// of the text). It returns the text and whether the item is known.
type Resolver func(id string) (string, bool)

// ParseRequest decodes a Responses API request body. resolve may be nil:
// every item_reference is then unknown.
//
// The body is decoded into a struct in one call, unlike the other
// surfaces' member-by-member parsing: the Responses API's body is mostly
// optional members, and jsonerr words a type mistake with the member's
// path anyway. The object check comes first so that a body that is not
// an object is refused in the API's words, not encoding/json's.
func ParseRequest(body []byte, resolve Resolver) (*ParsedRequest, error) {
	if !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return nil, reqbody.Errorf("", "request body must be a JSON object (expected object)")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var r request
	if err := dec.Decode(&r); err != nil {
		if te := jsonerr.Type(err); te != err {
			return nil, reqbody.Errorf("", "%v", te)
		}
		return nil, reqbody.Errorf("", "request body is not valid JSON: %v", err)
	}
	// Decode reads one value; a second one after it would pass unseen.
	if dec.More() {
		return nil, reqbody.Errorf("", "request body has data after the JSON object")
	}
	if r.Model == "" {
		return nil, reqbody.Errorf("model", "required")
	}
	if r.PreviousResponseID != nil && *r.PreviousResponseID != "" {
		return nil, reqbody.Errorf("previous_response_id", "not supported: firstword keeps no responses; send the whole conversation in input")
	}
	// A background response is kept to be read back, which store: false
	// forbids; OpenAI refuses the pair too.
	if r.Background && r.Store != nil && !*r.Store {
		return nil, reqbody.Errorf("background", "background mode requires store=true: a background response is kept (for about 10 minutes) so that it can be polled, resumed and cancelled")
	}
	if len(r.Conversation) > 0 && string(r.Conversation) != "null" {
		return nil, reqbody.Errorf("conversation", "not supported: firstword keeps no conversations on this API; send the whole conversation in input (or use POST /v1/chat)")
	}
	req := &chat.Request{Model: r.Model, Temperature: r.Temperature, TopP: r.TopP, User: r.User, ParallelToolCalls: r.ParallelToolCalls}
	if r.MaxOutputTokens != nil {
		if *r.MaxOutputTokens < 1 {
			return nil, reqbody.Errorf("max_output_tokens", "must be at least 1")
		}
		req.MaxTokens = *r.MaxOutputTokens
	}
	// instructions is the system prompt, kept apart from input by the
	// API; the chat vocabulary has it as the leading system message.
	if r.Instructions != nil && *r.Instructions != "" {
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleSystem, Content: *r.Instructions})
	}
	msgs, err := parseInput(r.Input, resolve)
	if err != nil {
		return nil, err
	}
	req.Messages = append(req.Messages, msgs...)
	// Instructions alone are not a conversation: every upstream wants a
	// message to answer.
	if !hasNonSystem(req.Messages) {
		return nil, reqbody.Errorf("input", "required: at least one message")
	}
	for i, t := range r.Tools {
		if t.Type != "function" {
			return nil, reqbody.Errorf(fmt.Sprintf("tools[%d].type", i), "%q is not supported; only function tools are", t.Type)
		}
		if t.Name == "" {
			return nil, reqbody.Errorf(fmt.Sprintf("tools[%d].name", i), "required")
		}
		req.Tools = append(req.Tools, chat.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	if req.ToolChoice, err = parseToolChoice(r.ToolChoice); err != nil {
		return nil, err
	}
	if r.Text != nil && r.Text.Format != nil {
		if req.ResponseFormat, err = responseFormat(r.Text.Format); err != nil {
			return nil, err
		}
	}
	pr := &ParsedRequest{Parsed: reqbody.Parsed{Request: req, Stream: r.Stream}, Background: r.Background}
	pr.Encrypted = slices.Contains(r.Include, "reasoning.encrypted_content")
	if req.Thinking, pr.Summary, err = parseReasoning(r.Reasoning); err != nil {
		return nil, err
	}
	return pr, nil
}

// efforts maps reasoning.effort onto the chat vocabulary's efforts.
var efforts = map[string]string{"none": "none", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh"}

// parseReasoning decodes reasoning into the request's ThinkingAsk (nil
// without reasoning), and whether the client asked for summaries. A
// reasoning.effort without a summary asks the model to think but not to
// show it: Hide (the thinking is still measured and billed), as OpenAI
// sends no summary unless asked.
func parseReasoning(r *upReasoning) (*chat.ThinkingAsk, bool, error) {
	if r == nil || *r == (upReasoning{}) {
		return nil, false, nil
	}
	ask := &chat.ThinkingAsk{}
	if r.Effort != "" {
		e, ok := efforts[r.Effort]
		if !ok {
			return nil, false, reqbody.Errorf("reasoning.effort", "%q is not one of none, minimal, low, medium, high, xhigh", r.Effort)
		}
		ask.Effort = e
	}
	summary := false
	switch r.Summary {
	case "auto", "concise", "detailed":
		summary = true
	case "", "none":
	default:
		return nil, false, reqbody.Errorf("reasoning.summary", "%q is not one of auto, concise, detailed, none", r.Summary)
	}
	ask.Hide = !summary
	return ask, summary, nil
}

func hasNonSystem(ms []chat.Message) bool {
	for i := range ms {
		if ms[i].Role != chat.RoleSystem {
			return true
		}
	}
	return false
}

// parseInput turns input (a string, or a list of items) into messages.
// Consecutive function calls become one assistant message's tool calls.
// A reasoning item is a thinking block (Format responses: its summary's
// text, its encrypted_content as the signature, its id) of the assistant
// message or function call that follows it; one that nothing of the
// assistant's follows is dropped.
func parseInput(raw json.RawMessage, resolve Resolver) ([]chat.Message, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, reqbody.Errorf("input", "required")
	}
	s, items, isString, err := reqbody.StringOrList[item](raw, "input", "items")
	if err != nil {
		return nil, err
	}
	if isString {
		return []chat.Message{{Role: chat.RoleUser, Content: s}}, nil
	}
	var out []chat.Message
	// thinking holds the reasoning items read and not yet given to an
	// assistant message.
	var thinking []chat.ThinkingBlock
	assistant := func() *chat.Message {
		m := &out[len(out)-1]
		m.Thinking = append(m.Thinking, thinking...)
		thinking = nil
		return m
	}
	for i := range items {
		it := &items[i]
		param := fmt.Sprintf("input[%d]", i)
		typ := it.Type
		// An item_reference may come without its type; an item with only
		// an id can be nothing else.
		if typ == "" && it.Role == "" && it.ID != "" && len(it.Content) == 0 {
			typ = "item_reference" // its type is optional
		}
		switch typ {
		case "", "message":
			m, err := message(it, param)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
			if m.Role == chat.RoleAssistant {
				assistant()
			} else {
				thinking = nil
			}
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, reqbody.Errorf(param, "a function_call needs call_id and name")
			}
			// The Responses API lists a turn's calls as separate items;
			// the chat vocabulary, as Chat Completions, has them on the
			// assistant message, so consecutive calls (and the text item
			// before them) become one turn.
			call := chat.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}
			if n := len(out); n == 0 || out[n-1].Role != chat.RoleAssistant {
				out = append(out, chat.Message{Role: chat.RoleAssistant})
			}
			m := assistant()
			m.ToolCalls = append(m.ToolCalls, call)
		case "function_call_output":
			if it.CallID == "" {
				return nil, reqbody.Errorf(param+".call_id", "required")
			}
			m := chat.Message{Role: chat.RoleTool, ToolCallID: it.CallID}
			if err := output(&m, it.Output, param+".output"); err != nil {
				return nil, err
			}
			out = append(out, m)
			thinking = nil
		case "item_reference":
			text, ok := "", false
			if resolve != nil && it.ID != "" {
				text, ok = resolve(it.ID)
			}
			if !ok && strings.HasPrefix(it.ID, "rs_") {
				// A reasoning item of an earlier answer, which clients
				// that leave store on refer to (the Vercel AI SDK):
				// firstword keeps none, and an answer can do without
				// its earlier thinking, so it is dropped.
				continue
			}
			if !ok {
				return nil, reqbody.Errorf(param+".id", "item_reference %q is not an answer this gateway keeps: firstword keeps the message items it sent for an hour; send the text instead (with the Vercel AI SDK, providerOptions: {openai: {store: false}})", it.ID)
			}
			out = append(out, chat.Message{Role: chat.RoleAssistant, Content: text})
			assistant()
		case "reasoning":
			tb := chat.ThinkingBlock{Format: chat.ThinkingResponses, ID: it.ID}
			// Summary parts are paragraphs of one summary.
			for j, s := range it.Summary {
				if j > 0 {
					tb.Text += "\n\n"
				}
				tb.Text += s.Text
			}
			if it.EncryptedContent != nil {
				tb.Signature = *it.EncryptedContent
			}
			thinking = append(thinking, tb)
		default:
			return nil, reqbody.Errorf(param+".type", "%q is not supported (firstword takes messages, function_call, function_call_output and item_reference items)", it.Type)
		}
	}
	return out, nil
}

func message(it *item, param string) (chat.Message, error) {
	m := chat.Message{}
	switch it.Role {
	case "user":
		m.Role = chat.RoleUser
	case "assistant":
		m.Role = chat.RoleAssistant
	case "system", "developer":
		m.Role = chat.RoleSystem
	case "":
		return m, reqbody.Errorf(param+".role", "required")
	default:
		return m, reqbody.Errorf(param+".role", "%q is not one of user, assistant, system, developer", it.Role)
	}
	c := bytes.TrimSpace(it.Content)
	if len(c) == 0 || string(c) == "null" {
		return m, reqbody.Errorf(param+".content", "required")
	}
	s, parts, isString, err := reqbody.StringOrList[contentPart](c, param+".content", "content parts")
	if err != nil {
		return m, err
	}
	if isString {
		m.Content = s
		return m, nil
	}
	// Text parts are joined into Content; Parts are kept only when there
	// is an image, so a text-only message is the plain string every
	// upstream takes.
	var text strings.Builder
	images := false
	for j, p := range parts {
		pp := fmt.Sprintf("%s.content[%d]", param, j)
		switch p.Type {
		case "input_text", "output_text", "text":
			text.WriteString(p.Text)
			m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: p.Text})
		case "refusal":
			// An earlier answer's refusal, sent back as context: to a
			// chat upstream it is what the assistant said.
			text.WriteString(p.Refusal)
			m.Parts = append(m.Parts, chat.Part{Type: chat.PartText, Text: p.Refusal})
		case "input_image":
			img, err := p.image(pp)
			if err != nil {
				return m, err
			}
			images = true
			m.Parts = append(m.Parts, img)
		default:
			return m, reqbody.Errorf(pp+".type", "%q is not supported", p.Type)
		}
	}
	m.Content = text.String()
	if !images {
		m.Parts = nil
	}
	return m, nil
}

// output sets m's content from a function call's output: a string, or
// content parts whose text is joined. Images (a tool that returns a
// screenshot) stay on the tool message as parts; each upstream's encoder
// puts them where its API takes them.
func output(m *chat.Message, raw json.RawMessage, param string) error {
	err := reqbody.ToolResult(m, raw, param, "content parts", func(j int, p *contentPart) (chat.Part, error) {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "input_text", "output_text", "text":
			return chat.Part{Type: chat.PartText, Text: p.Text}, nil
		case "input_image":
			return p.image(pp)
		}
		return chat.Part{}, reqbody.Errorf(pp+".type", "%q is not supported in a function call's output (input_text and input_image are)", p.Type)
	})
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(m.Parts, func(p chat.Part) bool { return p.Type == chat.PartImage }) {
		m.Parts = nil
	}
	return nil
}

// parseToolChoice decodes tool_choice: a mode, or a function named at the
// object's top level (Chat Completions nests it in "function").
func parseToolChoice(raw json.RawMessage) (*chat.ToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		json.Unmarshal(raw, &s)
		switch s {
		case "auto", "none", "required":
			return &chat.ToolChoice{Mode: s}, nil
		}
		return nil, reqbody.Errorf("tool_choice", "%q is not one of auto, none, required", s)
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, reqbody.Errorf("tool_choice", "%v", jsonerr.Type(err))
	}
	if o.Type != "function" || o.Name == "" {
		return nil, reqbody.Errorf("tool_choice", `must be "auto", "none", "required" or {"type":"function","name":...}`)
	}
	return &chat.ToolChoice{Mode: "tool", Name: o.Name}, nil
}

// responseFormat maps text.format to Chat Completions' response_format,
// the form chat.Request carries (each upstream encoder maps that onto its
// own JSON mode). The Responses API puts the schema's name and schema at
// the format's top level; Chat Completions nests them in json_schema.
func responseFormat(f *format) (json.RawMessage, error) {
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		if f.Name == "" || len(f.Schema) == 0 {
			return nil, reqbody.Errorf("text.format", "json_schema needs name and schema")
		}
		js := map[string]any{"name": f.Name, "schema": f.Schema}
		if f.Description != "" {
			js["description"] = f.Description
		}
		if f.Strict != nil {
			js["strict"] = *f.Strict
		}
		return json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
	}
	return nil, reqbody.Errorf("text.format.type", "%q is not one of text, json_object, json_schema", f.Type)
}
