// Package gemini translates between firstword's chat vocabulary and the
// Gemini API (generativelanguage.googleapis.com, v1beta): the request body of
// models.streamGenerateContent and its ?alt=sse response stream.
//
// The wire names follow the API reference's JSON (lowerCamelCase). The API
// also accepts the snake_case spelling of every field; it answers in
// camelCase.
package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// Request is a GenerateContentRequest.
type Request struct {
	Contents          []Content         `json:"contents"`
	SystemInstruction *Content          `json:"systemInstruction,omitempty"`
	Tools             []Tool            `json:"tools,omitempty"`
	ToolConfig        *ToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *GenerationConfig `json:"generationConfig,omitempty"`
}

// Content is one turn: role "user" or "model" (none for the system
// instruction) and its parts.
type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts"`
}

// Part is one piece of a turn; exactly one of its data fields is set.
type Part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	InlineData       *Blob             `json:"inlineData,omitempty"`
	FileData         *FileData         `json:"fileData,omitempty"`
	FunctionCall     *FunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *FunctionResponse `json:"functionResponse,omitempty"`
	// ThoughtSignature is the opaque signature a thinking model attaches
	// to a part; models from Gemini 3 on require it back on the function
	// calls of earlier turns.
	ThoughtSignature string `json:"thoughtSignature,omitempty"`
}

// Blob is inline data, base64 encoded.
type Blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// FileData refers to data by URI (an uploaded file or a public URL).
type FileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

// FunctionCall is a call the model made. Args is a JSON object.
type FunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// FunctionResponse answers a FunctionCall. Response is a JSON object.
type FunctionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// Tool holds function declarations.
type Tool struct {
	FunctionDeclarations []FunctionDeclaration `json:"functionDeclarations"`
}

// FunctionDeclaration declares a function. Its parameters are sent as
// parametersJsonSchema, which takes JSON Schema as OpenAI clients write it
// ("parameters" takes only the API's OpenAPI subset and rejects keywords
// such as additionalProperties or $schema).
type FunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

// ToolConfig constrains function calling.
type ToolConfig struct {
	FunctionCallingConfig FunctionCallingConfig `json:"functionCallingConfig"`
}

// FunctionCallingConfig is AUTO, ANY or NONE, optionally restricted to some
// functions (with ANY).
type FunctionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

// GenerationConfig holds sampling options.
type GenerationConfig struct {
	CandidateCount     int             `json:"candidateCount,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	MaxOutputTokens    int             `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *ThinkingConfig `json:"thinkingConfig,omitempty"`
}

// SkipThoughtSignature is the sentinel the Gemini API documents for function
// calls replayed without their original thought signature: a turn with no
// recorded signature (see modelParts) gets it on every call; without it
// Gemini 3 models answer 400 "Function call is missing a thought_signature".
const SkipThoughtSignature = "skip_thought_signature_validator"

// EncodeRequest encodes req as the body of a streamGenerateContent request.
// System messages become the system instruction; assistant turns become
// "model" contents; tool results become functionResponse parts of a "user"
// content, named after the assistant tool call they answer; consecutive
// contents of the same role are merged. It fails on requests Gemini cannot
// express (a tool result that answers no earlier call, arguments that are
// not a JSON object).
func EncodeRequest(req *chat.Request) ([]byte, error) {
	out := Request{Contents: []Content{}}
	var system []Part
	for i := range req.Messages {
		m := &req.Messages[i]
		var role string
		var parts []Part
		var err error
		switch m.Role {
		case chat.RoleSystem:
			if text := upstream.MessageText(m); text != "" {
				system = append(system, Part{Text: text})
			}
			continue
		case chat.RoleUser:
			role = "user"
			parts, err = userParts(m)
		case chat.RoleAssistant:
			role = "model"
			parts, err = modelParts(m)
		case chat.RoleTool:
			role = "user"
			var p Part
			p, err = toolResult(req.Messages[:i], m)
			parts = []Part{p}
		default:
			err = fmt.Errorf("unknown role %q", m.Role)
		}
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			continue
		}
		out.Contents = append(out.Contents, Content{Role: role, Parts: parts})
	}
	if len(system) > 0 {
		out.SystemInstruction = &Content{Parts: system}
	}
	if len(req.Tools) > 0 {
		decls := make([]FunctionDeclaration, len(req.Tools))
		for i, t := range req.Tools {
			decls[i] = FunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.Parameters}
		}
		out.Tools = []Tool{{FunctionDeclarations: decls}}
	}
	if tc := req.ToolChoice; tc != nil {
		cfg := FunctionCallingConfig{}
		switch tc.Mode {
		case "auto", "":
			cfg.Mode = "AUTO"
		case "none":
			cfg.Mode = "NONE"
		case "required":
			cfg.Mode = "ANY"
		case "tool":
			cfg.Mode = "ANY"
			cfg.AllowedFunctionNames = []string{tc.Name}
		default:
			return nil, fmt.Errorf("tool_choice: unknown mode %q", tc.Mode)
		}
		out.ToolConfig = &ToolConfig{FunctionCallingConfig: cfg}
	}
	gc := GenerationConfig{
		Temperature:   req.Temperature,
		TopP:          req.TopP,
		StopSequences: req.Stop,
		Seed:          req.Seed,
	}
	if req.N > 1 {
		gc.CandidateCount = req.N
	}
	gc.ThinkingConfig, gc.MaxOutputTokens = thinkingConfig(req.Model, req.Thinking, req.MaxTokens)
	if err := responseFormat(req.ResponseFormat, &gc); err != nil {
		return nil, err
	}
	if gc.MaxOutputTokens > 0 || gc.Temperature != nil || gc.TopP != nil || len(gc.StopSequences) > 0 ||
		gc.Seed != nil || gc.CandidateCount > 0 || gc.ResponseMimeType != "" || gc.ThinkingConfig != nil {
		out.GenerationConfig = &gc
	}
	return json.Marshal(out)
}

func userParts(m *chat.Message) ([]Part, error) {
	if len(m.Parts) == 0 {
		if m.Content == "" {
			return nil, nil
		}
		return []Part{{Text: m.Content}}, nil
	}
	parts := make([]Part, 0, len(m.Parts))
	for j, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			if p.Text != "" {
				parts = append(parts, Part{Text: p.Text})
			}
		case chat.PartImage:
			part, err := imagePart(p)
			if err != nil {
				return nil, fmt.Errorf("parts[%d]: %w", j, err)
			}
			parts = append(parts, part)
		default:
			return nil, fmt.Errorf("parts[%d]: unsupported part type %q", j, p.Type)
		}
	}
	return parts, nil
}

// imagePart sends inline data when the part has it (or a base64 data: URL)
// and a file reference otherwise.
func imagePart(p chat.Part) (Part, error) {
	if p.Data != "" {
		return Part{InlineData: &Blob{MimeType: mediaType(p.MediaType), Data: p.Data}}, nil
	}
	if rest, ok := strings.CutPrefix(p.ImageURL, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mt, b64 := strings.CutSuffix(meta, ";base64")
		if !ok || !b64 {
			return Part{}, errors.New("image data: URL must be base64")
		}
		return Part{InlineData: &Blob{MimeType: mediaType(mt), Data: data}}, nil
	}
	if p.ImageURL == "" {
		return Part{}, errors.New("image has neither data nor URL")
	}
	return Part{FileData: &FileData{MimeType: p.MediaType, FileURI: p.ImageURL}}, nil
}

func mediaType(mt string) string {
	if mt == "" {
		return "image/jpeg"
	}
	return mt
}

// modelParts encodes an assistant turn. Its recorded thought signatures go
// back on the parts Gemini puts them on: the first on the first function
// call (the others, in order, on the calls after it), or on the text when
// the turn has no call. chat.Message does not say which part a signature
// came with; this is where Gemini attaches them (on the first of parallel
// calls, and on the last part of an answer, which firstword sends as one
// text part). Without a recorded signature every call gets
// SkipThoughtSignature.
func modelParts(m *chat.Message) ([]Part, error) {
	sigs := signatures(m.Thinking)
	var parts []Part
	if text := upstream.MessageText(m); text != "" {
		parts = append(parts, Part{Text: text})
		if len(m.ToolCalls) == 0 && len(sigs) > 0 {
			parts[0].ThoughtSignature = sigs[0]
		}
	}
	for j, tc := range m.ToolCalls {
		args, err := upstream.ArgsObject(tc.Arguments)
		if err != nil {
			return nil, fmt.Errorf("tool_calls[%d].arguments: %w", j, err)
		}
		p := Part{FunctionCall: &FunctionCall{Name: tc.Name, Args: args}}
		switch {
		case j < len(sigs):
			p.ThoughtSignature = sigs[j]
		case len(sigs) == 0:
			p.ThoughtSignature = SkipThoughtSignature
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// toolResult builds the functionResponse for a tool message. Gemini matches
// responses to calls by function name, so the name is looked up from the
// nearest earlier assistant call with the message's ToolCallID. A result
// that is a JSON object is sent as the response as is; any other text is
// sent as {"output": text}, the key the API reference names for a
// function's output.
func toolResult(history []chat.Message, m *chat.Message) (Part, error) {
	name := ""
	for i := len(history) - 1; i >= 0 && name == ""; i-- {
		if history[i].Role != chat.RoleAssistant {
			continue
		}
		for _, tc := range history[i].ToolCalls {
			if tc.ID == m.ToolCallID {
				name = tc.Name
				break
			}
		}
	}
	if name == "" {
		name = m.Name
	}
	if name == "" {
		return Part{}, fmt.Errorf("tool result %q answers no earlier tool call", m.ToolCallID)
	}
	text := upstream.MessageText(m)
	var resp json.RawMessage
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		var b bytes.Buffer
		if json.Compact(&b, []byte(t)) == nil {
			resp = b.Bytes()
		}
	}
	if resp == nil {
		resp, _ = json.Marshal(map[string]string{"output": text})
	}
	return Part{FunctionResponse: &FunctionResponse{Name: name, Response: resp}}, nil
}

// responseFormat maps OpenAI's response_format onto JSON mode.
func responseFormat(raw json.RawMessage, gc *GenerationConfig) error {
	on, schema, err := upstream.JSONMode(raw)
	if on {
		gc.ResponseMimeType, gc.ResponseJSONSchema = "application/json", schema
	}
	return err
}
