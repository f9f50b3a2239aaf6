// Package ollama translates between firstword's chat vocabulary and Ollama's
// native chat API: the body of POST /api/chat and its NDJSON response
// stream (one JSON object per line, the last with "done": true).
//
// The final object also reports timings in nanoseconds (total_duration,
// load_duration, prompt_eval_duration, eval_duration). chat.Chunk has no
// place for them and firstword measures its own stages, so they are not
// carried; a model load shows up as a long time to first token.
package ollama

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// Request is the body of POST /api/chat.
type Request struct {
	Model    string          `json:"model"`
	Messages []Message       `json:"messages"`
	Stream   bool            `json:"stream"`
	Tools    []Tool          `json:"tools,omitempty"`
	Format   json.RawMessage `json:"format,omitempty"`
	Options  *Options        `json:"options,omitempty"`
	// Think is true, false or a level ("low", "medium", "high"); nil
	// leaves the model's default (see think).
	Think any `json:"think,omitempty"`
}

// Message is a chat message. ToolName names the tool whose result a "tool"
// message carries; ToolCallID and ToolCall.ID are understood by recent
// Ollama versions and ignored by older ones.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Thinking   string     `json:"thinking,omitempty"`
	Images     []string   `json:"images,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a call the model made; Arguments is a JSON object.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function. Index is the call's position in
// the response (Ollama sends it; firstword numbers calls itself).
type FunctionCall struct {
	Index     *int            `json:"index,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Tool is a function definition.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a function; Parameters is a JSON Schema.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Options are the model parameters firstword sets (the Modelfile's names).
type Options struct {
	NumPredict  int      `json:"num_predict,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
}

// EncodeRequest encodes req as a streaming /api/chat request.
//
// Ollama takes images inline only, one text per message, and has no
// tool_choice: "none" sends no tools, "tool" sends only the named one, and
// "auto" and "required" send them all (the model may still answer in
// text). It fails on what Ollama cannot do: several choices (n > 1), image
// URLs, tool arguments that are not a JSON object.
func EncodeRequest(req *chat.Request) ([]byte, error) {
	if req.N > 1 {
		return nil, fmt.Errorf("n: Ollama generates one choice, not %d", req.N)
	}
	out := Request{Model: req.Model, Stream: true, Messages: make([]Message, 0, len(req.Messages))}
	for i := range req.Messages {
		m, err := message(req.Messages[:i], &req.Messages[i])
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		out.Messages = append(out.Messages, m)
	}
	tools := req.Tools
	if tc := req.ToolChoice; tc != nil {
		switch tc.Mode {
		case "none":
			tools = nil
		case "tool":
			tools = nil
			for _, t := range req.Tools {
				if t.Name == tc.Name {
					tools = append(tools, t)
				}
			}
			if len(tools) == 0 {
				return nil, fmt.Errorf("tool_choice: no tool named %q", tc.Name)
			}
		case "auto", "required", "":
		default:
			return nil, fmt.Errorf("tool_choice: unknown mode %q", tc.Mode)
		}
	}
	for _, t := range tools {
		out.Tools = append(out.Tools, Tool{Type: "function", Function: ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	format, err := responseFormat(req.ResponseFormat)
	if err != nil {
		return nil, err
	}
	out.Format = format
	out.Think = think(req.Model, req.Thinking)
	opts := Options{NumPredict: req.MaxTokens, Temperature: req.Temperature, TopP: req.TopP, Stop: req.Stop, Seed: req.Seed}
	if opts.NumPredict > 0 || opts.Temperature != nil || opts.TopP != nil || len(opts.Stop) > 0 || opts.Seed != nil {
		out.Options = &opts
	}
	return json.Marshal(out)
}

// think is the think member for what a request asks of the thinking:
// false for effort "none", a level for gpt-oss (the one family Ollama
// gives levels, and only low, medium and high: minimal is sent as low),
// true otherwise. Levels go to gpt-oss only: Ollama versions before
// levels refuse a string, and some later ones refuse it for models
// without levels.
func think(model string, t *chat.ThinkingAsk) any {
	if t == nil {
		return nil
	}
	effort := t.Effort
	if effort == "" {
		effort = chat.BudgetEffort(t.BudgetTokens)
	}
	switch {
	case effort == "none":
		return false
	case !strings.Contains(model, "gpt-oss"):
		return true
	case effort == "minimal":
		return "low"
	case effort == "low" || effort == "medium" || effort == "high":
		return effort
	case effort == "xhigh":
		return "high"
	}
	return true
}

// message encodes one message. An assistant message's thinking is not
// sent: Ollama's chat templates drop earlier turns' thinking, and it
// carries no signature to keep.
func message(history []chat.Message, m *chat.Message) (Message, error) {
	out := Message{Role: string(m.Role)}
	switch m.Role {
	case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant:
	case chat.RoleTool:
		out.ToolCallID = m.ToolCallID
		out.ToolName = toolName(history, m)
	default:
		return out, fmt.Errorf("unknown role %q", m.Role)
	}
	if len(m.Parts) == 0 {
		out.Content = m.Content
	}
	var text strings.Builder
	for j, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			text.WriteString(p.Text)
		case chat.PartImage:
			data, err := imageData(p)
			if err != nil {
				return out, fmt.Errorf("parts[%d]: %w", j, err)
			}
			out.Images = append(out.Images, data)
		default:
			return out, fmt.Errorf("parts[%d]: unsupported part type %q", j, p.Type)
		}
	}
	if len(m.Parts) > 0 {
		out.Content = text.String()
	}
	for j, tc := range m.ToolCalls {
		args, err := upstream.ArgsObject(tc.Arguments)
		if err != nil {
			return out, fmt.Errorf("tool_calls[%d].arguments: %w", j, err)
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Function: FunctionCall{Name: tc.Name, Arguments: args}})
	}
	return out, nil
}

// toolName finds the name of the call a tool result answers: the nearest
// earlier assistant call with its ID, else the message's own name.
func toolName(history []chat.Message, m *chat.Message) string {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role != chat.RoleAssistant {
			continue
		}
		for _, tc := range history[i].ToolCalls {
			if tc.ID == m.ToolCallID {
				return tc.Name
			}
		}
	}
	return m.Name
}

func imageData(p chat.Part) (string, error) {
	if p.Data != "" {
		return p.Data, nil
	}
	if rest, ok := strings.CutPrefix(p.ImageURL, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok && strings.HasSuffix(meta, ";base64") {
			return data, nil
		}
		return "", errors.New("image data: URL must be base64")
	}
	return "", errors.New("image URLs are not supported: Ollama takes inline images only")
}

// responseFormat maps OpenAI's response_format onto Ollama's format: "json"
// or a JSON Schema.
func responseFormat(raw json.RawMessage) (json.RawMessage, error) {
	on, schema, err := upstream.JSONMode(raw)
	switch {
	case err != nil || !on:
		return nil, err
	case schema != nil:
		return schema, nil
	}
	return json.RawMessage(`"json"`), nil
}
