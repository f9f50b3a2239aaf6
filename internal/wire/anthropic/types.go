// Package anthropic encodes and decodes Anthropic's Messages API wire format
// in both directions: requests and event streams as an upstream receives
// and sends them (EncodeRequest, NewStreamReader, DecodeError), and as a client
// using Anthropic's SDKs sends and receives them (ParseRequest,
// EventEncoder, EncodeMessage, ErrorType). It knows nothing of HTTP
// routing or providers.
//
// Translation rules that lose information, and why:
//   - Several system messages become one system prompt; their positions
//     among the turns are lost, as the Messages API has only a top-level
//     system.
//   - Tool-call arguments that are not a JSON object (Anthropic's input
//     must be one) are sent as {"_raw": "<arguments>"}, so the model still
//     sees what it wrote rather than the request failing.
//   - Unknown block types in a stream are skipped. A client's thinking
//     blocks are kept unchanged (Message.Thinking), but a tool result's
//     is_error is not: chat.Message has no place for it. Another
//     provider's thinking signatures are not written to a client.
//   - OpenAI-only request fields (n, seed, response_format, Extra) are not
//     sent; temperatures above Anthropic's maximum of 1 are clamped to 1,
//     and top_p is dropped when a temperature is set, as recent models
//     refuse both.
package anthropic

import "encoding/json"

// Request is a Messages API request body.
type Request struct {
	Model         string         `json:"model"`
	MaxTokens     int            `json:"max_tokens"`
	System        any            `json:"system,omitempty"` // string or []Block
	Messages      []MessageParam `json:"messages"`
	Tools         []Tool         `json:"tools,omitempty"`
	ToolChoice    *ToolChoice    `json:"tool_choice,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	TopP          *float64       `json:"top_p,omitempty"`
	StopSequences []string       `json:"stop_sequences,omitempty"`
	Metadata      *Metadata      `json:"metadata,omitempty"`
	Stream        bool           `json:"stream"`
	Thinking      *ThinkingParam `json:"thinking,omitempty"`
	OutputConfig  *OutputConfig  `json:"output_config,omitempty"`
}

// ThinkingParam is a request's thinking object: Type "enabled" with
// BudgetTokens (older models) or "adaptive" (newer ones, whose depth
// OutputConfig.Effort steers). Display is "summarized" or "omitted".
type ThinkingParam struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// OutputConfig is a request's output_config: Effort is low, medium,
// high, xhigh or max.
type OutputConfig struct {
	Effort string `json:"effort,omitempty"`
}

// Metadata is the request's metadata object.
type Metadata struct {
	UserID string `json:"user_id,omitempty"`
}

// MessageParam is one input turn.
type MessageParam struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is an input content block: text, image, tool_use or tool_result.
// Only the fields of its Type are set.
type Block struct {
	Type   string       `json:"type"`
	Text   string       `json:"text,omitempty"`
	Source *ImageSource `json:"source,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result; Content is a string or an array of text and image
	// blocks.
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"`
	CacheControl *CacheControl   `json:"cache_control,omitempty"`
	// thinking (Thinking is sent even when empty: the API requires it)
	// and redacted_thinking (Data), sent back as they came.
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
}

// ImageSource is an image block's source: base64 data or a URL.
type ImageSource struct {
	Type      string `json:"type"` // "base64" or "url"
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// CacheControl marks the end of a cacheable prompt prefix.
type CacheControl struct {
	Type string `json:"type"` // "ephemeral"
}

// Tool is a client tool definition. CacheControl on the last one caches
// all of them, the start of every prompt.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *CacheControl   `json:"cache_control,omitempty"`
}

// ToolChoice is the tool_choice object: Type is auto, any, tool or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// Usage is a message's token counts. InputTokens excludes the tokens read
// from and written to the prompt cache.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// Message is a non-streaming Messages API response.
type Message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"` // "message"
	Role         string         `json:"role"` // "assistant"
	Model        string         `json:"model"`
	Content      []ContentBlock `json:"content"`
	StopReason   string         `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        Usage          `json:"usage"`
}

// ContentBlock is an output content block: text, tool_use, thinking or
// redacted_thinking.
type ContentBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	ContentBlockThinking
}

// ErrorBody is the error object of an error response or error event.
type ErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Thinking members of a ContentBlock: a thinking block has its text in
// Thinking and its Signature; a redacted_thinking block its Data.
// (ContentBlockThinking is embedded in ContentBlock.)
type ContentBlockThinking struct {
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
}
