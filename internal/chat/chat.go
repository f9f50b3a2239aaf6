// Package chat is firstword's domain vocabulary: the normalised request, the
// normalised stream chunk, usage, finish reasons and the typed upstream error.
//
// Providers translate their wire formats into these types and the HTTP
// surfaces translate out of them; nothing in between knows a wire format.
// This package imports only the standard library.
package chat

import (
	"encoding/json"
	"io"
	"iter"
	"strings"
)

// Role is the author of a message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one turn of a conversation.
type Message struct {
	Role Role
	// Content is the message text. When Parts is non-empty it holds the
	// concatenated text of the text parts, for code that only wants text.
	Content string
	// Parts is set when the message mixes text and images.
	Parts []Part
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID names the call a RoleTool message answers.
	ToolCallID string
	// Name is the optional participant name.
	Name string
	// Thinking is an assistant message's thinking, in the order it came;
	// signed blocks go back upstream unchanged (see ThinkingBlock).
	Thinking []ThinkingBlock
	// CacheBreakpoint marks the last message of the stable prompt prefix;
	// providers with explicit prompt caching (Anthropic) mark it.
	CacheBreakpoint bool
}

// PartType says what a Part holds.
type PartType string

const (
	PartText  PartType = "text"
	PartImage PartType = "image"
)

// Part is one piece of a multi-part message.
type Part struct {
	Type PartType
	Text string
	// ImageURL is an http(s) URL or a data: URL.
	ImageURL string
	// MediaType and Data hold an inline image (Data is base64, no prefix).
	MediaType string
	Data      string
}

// ImagePart is an image part for url, an http(s) URL or a data: URL; a
// base64 data: URL is also split into MediaType and Data, for the
// providers that take inline images.
func ImagePart(url string) Part {
	p := Part{Type: PartImage, ImageURL: url}
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok {
			if mt, ok := strings.CutSuffix(meta, ";base64"); ok {
				p.MediaType, p.Data = mt, data
			}
		}
	}
	return p
}

// ToolCall is a complete tool call made by the assistant.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema
}

// ToolChoice constrains tool use: Mode is "auto", "none", "required" or
// "tool", in which case Name names the tool.
type ToolChoice struct {
	Mode string
	Name string
}

// Request is a normalised chat request. Model is an alias when the request
// enters the router and an upstream model name when it leaves it.
type Request struct {
	Model       string
	Messages    []Message
	Tools       []Tool
	ToolChoice  *ToolChoice
	MaxTokens   int // 0: the provider's default
	Temperature *float64
	TopP        *float64
	Stop        []string
	N           int // number of choices; 0 means 1
	Seed        *int64
	User        string
	// ParallelToolCalls is passed through when set.
	ParallelToolCalls *bool
	// Thinking is what the client asked of the model's thinking; nil: the
	// alias's default.
	Thinking *ThinkingAsk
	// ResponseFormat is OpenAI's response_format, passed through as JSON.
	ResponseFormat json.RawMessage
	// Extra holds request fields this package does not model; adapters
	// speaking the same wire format pass them through unchanged.
	Extra map[string]json.RawMessage
	// Hints are what the client asked of the gateway besides the request
	// itself. Never sent upstream.
	Hints Hints
}

// Hints are a request's asks of the gateway itself, from the client's
// headers: they steer the levers (the response cache, routing rules) and
// the simulated provider.
type Hints struct {
	// Tenant scopes the response cache: tenants never share answers.
	Tenant string
	// Cache is the client's cache policy.
	Cache CachePolicy
	// Hint is the client's routing hint (X-Firstword-Hint), e.g. "fast";
	// RouteTag its route tag (X-Firstword-Route-Tag). Routing rules
	// match them.
	Hint, RouteTag string
	// Sim is a directive for the simulated provider (X-Firstword-Sim).
	Sim string
	// Continues is the start of the answer, delivered by an earlier
	// producer that died (a replica killed mid-answer): the router asks
	// for the rest and passes on only that, spliced after it
	// (docs/continuation.md). Such a request is never cached or shared.
	Continues string
}

// CachePolicy is what the client says of the response cache.
type CachePolicy string

const (
	CacheDefault CachePolicy = ""         // the alias's configuration decides
	CacheBypass  CachePolicy = "bypass"   // read nothing (Cache-Control: no-cache); the answer is still stored
	CacheNoStore CachePolicy = "no-store" // store nothing (Cache-Control: no-store)
	CacheOn      CachePolicy = "on"       // cache even a non-deterministic request (X-Firstword-Cache: on)
)

// Clone returns a copy of r that can be changed without changing r. Slices
// of messages and tools are copied; their elements' contents are shared.
func (r *Request) Clone() *Request {
	c := *r
	c.Messages = append([]Message(nil), r.Messages...)
	c.Tools = append([]Tool(nil), r.Tools...)
	c.Stop = append([]string(nil), r.Stop...)
	if r.Thinking != nil {
		t := *r.Thinking
		c.Thinking = &t
	}
	return &c
}

// Choices returns the number of choices the request asks for.
func (r *Request) Choices() int {
	if r.N < 1 {
		return 1
	}
	return r.N
}

// FinishReason says why a choice ended.
type FinishReason string

const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
	// FinishTimeout means the request's overall timeout cut the answer;
	// the text before the cut was delivered. It is firstword's own: the
	// API surfaces end such an answer with their timeout error, and only
	// /v1/chat shows it as a finish reason.
	FinishTimeout FinishReason = "timeout"
)

// Chunk is one normalised piece of a response stream. A chunk carries any
// combination of a text delta, tool-call deltas, a finish reason and usage.
type Chunk struct {
	// Choice is the index of the choice this chunk belongs to.
	Choice int
	// Text is a content delta.
	Text string
	// Thinking is a delta of the model's thinking (reasoning), never part
	// of the answer: it is progress, not a first token (see Thinks).
	Thinking string
	// Thought is set on the rare thinking chunk that ends a block (its
	// signature), carries a redacted block, or restarts the thinking.
	Thought *Thought
	// Refusal is a refusal delta (OpenAI's refusal field).
	Refusal string
	// ToolCalls are tool-call deltas.
	ToolCalls []ToolCallDelta
	// FinishReason is set on the last chunk of a choice.
	FinishReason FinishReason
	// Usage is set on the chunk that reports token counts, usually the
	// last one of the stream. Counts are totals for the request, not
	// increments.
	Usage *Usage
	// UsageSoFar is usage the provider reported before its final count
	// (Anthropic's message_start, an OpenAI-compatible usage chunk not
	// yet followed by [DONE], usage on every chunk): totals up to and
	// including this chunk. Surfaces do not show it and it does not make
	// a chunk a first token; meters keep it, so that a stream that breaks
	// or is cancelled before Usage comes is billed what the provider said
	// rather than an estimate (see EstimateUsage).
	UsageSoFar *Usage
	// Model is the upstream model that produced the chunk, when known.
	Model string
	// More is a hint that the next chunk is already available without
	// waiting (it arrived in the same read). Writers may then hold this
	// chunk and send both in one write: nothing is delayed, since the
	// upstream delivered them together.
	More bool
}

// Visible reports whether the chunk carries anything a user sees: text, a
// refusal or a tool call. The first visible chunk is the "first token".
func (c *Chunk) Visible() bool {
	return c.Text != "" || c.Refusal != "" || len(c.ToolCalls) > 0
}

// ToolCallDelta is a piece of a streamed tool call. The first delta of a
// call carries ID and Name; later ones append to Arguments.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Usage counts a request's tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CachedInputTokens were read from a prompt cache (included in
	// InputTokens).
	CachedInputTokens int `json:"cached_input_tokens,omitempty"`
	// CacheWriteTokens were written to a prompt cache (included in
	// InputTokens).
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	// ReasoningTokens were spent thinking (included in OutputTokens).
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// Estimated is true when any count was computed by firstword rather
	// than reported by the provider: all of them, or only the output of
	// a stream that broke after the provider reported its input (see
	// EstimateUsage).
	Estimated bool `json:"estimated,omitempty"`
}

// MaxUsageTokens bounds a believable count in one request's usage: far
// above any context window, far below what sums of many requests overflow.
const MaxUsageTokens = 1 << 32

// Plausible reports whether every count is in [0, MaxUsageTokens]. A
// provider that reports otherwise is broken, and its numbers must be
// neither billed nor passed on.
func (u *Usage) Plausible() bool {
	for _, n := range [...]int{u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.CacheWriteTokens, u.ReasoningTokens} {
		if n < 0 || n > MaxUsageTokens {
			return false
		}
	}
	return true
}

// Stream is a response stream: each pair is a chunk and a nil error, or a
// zero chunk and a non-nil error, after which the iteration ends.
type Stream = iter.Seq2[Chunk, error]

// Pull returns the Stream of a pull reader: next returns a chunk (valid
// until its next call), io.EOF after the last, or the error that ends the
// stream.
func Pull(next func() (*Chunk, error)) Stream {
	return func(yield func(Chunk, error) bool) {
		for {
			c, err := next()
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(Chunk{}, err)
				return
			}
			if !yield(*c, nil) {
				return
			}
		}
	}
}
