package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// DefaultMaxTokens is the answer cap sent when neither the request nor the
// options set one: Anthropic requires max_tokens.
const DefaultMaxTokens = 4096

// maxCacheBreakpoints is how many cache_control marks a request may carry.
const maxCacheBreakpoints = 4

// EncodeOptions tunes EncodeRequest.
type EncodeOptions struct {
	// DefaultMaxTokens is sent as max_tokens when the request sets none;
	// 0 means DefaultMaxTokens.
	DefaultMaxTokens int
	// PromptCaching puts cache_control on the last block of each message
	// marked chat.Message.CacheBreakpoint (at most the last four) and, when
	// a message is marked and fewer than four are, on the last tool
	// definition; the system prompt is sent as blocks so that it can carry
	// one. Which messages are marked is the caller's choice (the levers').
	PromptCaching bool
}

// EncodeRequest encodes req as a streaming Messages API request for an
// upstream.
//
// System messages become the top-level system, joined by blank lines (or,
// with prompt caching, one text block each). Assistant tool calls become
// tool_use blocks, tool messages tool_result blocks in a user turn, and
// consecutive turns of the same role are merged, as the API wants user and
// assistant to alternate. req.Extra and req.Hints are never sent.
//
// req.Thinking asks for thinking in the form the model takes (see
// thinkingForms), with max_tokens the answer cap plus the thinking budget.
// An assistant message's signed Anthropic thinking blocks go back first in
// its turn, unchanged; other thinking is not sent.
func EncodeRequest(req *chat.Request, opts EncodeOptions) ([]byte, error) {
	// Built apart from the encoding: building takes a 1.4 KiB frame, the
	// encoder's reflection a deep stack, and a request is encoded under
	// the frames of a stream.
	out, err := buildRequest(req, opts)
	if err != nil {
		return nil, err
	}
	return upstream.Marshal(out)
}

func buildRequest(req *chat.Request, opts EncodeOptions) (*Request, error) {
	out := &Request{Model: req.Model, MaxTokens: req.MaxTokens, Stream: true, Messages: []MessageParam{}}
	if out.MaxTokens <= 0 {
		out.MaxTokens = opts.DefaultMaxTokens
		if out.MaxTokens <= 0 {
			out.MaxTokens = DefaultMaxTokens
		}
	}

	// A breakpoint is where a marked message's last block ended up: a
	// system block (turn -1) or a block of a merged turn.
	type mark struct{ turn, block int }
	var (
		system []Block
		marks  []mark
	)
	for i := range req.Messages {
		m := &req.Messages[i]
		var blocks []Block
		role := "user"
		switch m.Role {
		case chat.RoleSystem:
			if text := upstream.MessageText(m); text != "" {
				system = append(system, Block{Type: "text", Text: text})
				if m.CacheBreakpoint {
					marks = append(marks, mark{-1, len(system) - 1})
				}
			}
			continue
		case chat.RoleUser:
			blocks = contentBlocks(m, true)
		case chat.RoleAssistant:
			role = "assistant"
			blocks = append(thinkingBlocks(m.Thinking), contentBlocks(m, false)...)
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d]: a tool call needs an id and a name", i, j)
				}
				blocks = append(blocks, Block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
			}
		case chat.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("messages[%d]: a tool message needs a tool_call_id", i)
			}
			b := Block{Type: "tool_result", ToolUseID: m.ToolCallID}
			if len(m.Parts) > 0 {
				b.Content, _ = upstream.Marshal(contentBlocks(m, true))
			} else if m.Content != "" {
				b.Content, _ = upstream.Marshal(m.Content)
			}
			blocks = []Block{b}
		default:
			return nil, fmt.Errorf("messages[%d]: unsupported role %q", i, m.Role)
		}
		if len(blocks) == 0 {
			// The API refuses empty turns and empty text blocks. A mark
			// here ends the same prefix as one on the last block so far.
			if m.CacheBreakpoint {
				if n := len(out.Messages); n > 0 {
					marks = append(marks, mark{n - 1, len(out.Messages[n-1].Content) - 1})
				} else if len(system) > 0 {
					marks = append(marks, mark{-1, len(system) - 1})
				}
			}
			continue
		}
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
		} else {
			out.Messages = append(out.Messages, MessageParam{Role: role, Content: blocks})
		}
		if m.CacheBreakpoint {
			last := &out.Messages[len(out.Messages)-1]
			marks = append(marks, mark{len(out.Messages) - 1, len(last.Content) - 1})
		}
	}

	switch {
	case opts.PromptCaching && len(system) > 0:
		out.System = system
	case len(system) > 0:
		texts := make([]string, len(system))
		for i, b := range system {
			texts[i] = b.Text
		}
		out.System = strings.Join(texts, "\n\n")
	}
	marks = slices.Compact(marks) // an empty message's mark may repeat the one before
	if !opts.PromptCaching {
		marks = nil
	}
	if len(marks) > maxCacheBreakpoints {
		marks = marks[len(marks)-maxCacheBreakpoints:]
	}
	for _, mk := range marks {
		cc := &CacheControl{Type: "ephemeral"}
		if mk.turn < 0 {
			system[mk.block].CacheControl = cc
		} else {
			out.Messages[mk.turn].Content[mk.block].CacheControl = cc
		}
	}

	if len(req.Tools) > 0 {
		out.Tools = make([]Tool, len(req.Tools))
		for i, t := range req.Tools {
			schema := t.Parameters
			if len(bytes.TrimSpace(schema)) == 0 || string(schema) == "null" {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			out.Tools[i] = Tool{Name: t.Name, Description: t.Description, InputSchema: schema}
		}
		// The tools come first in the prompt: they begin every marked
		// prefix, and a mark of their own keeps them cached when the
		// system prompt changes.
		if len(marks) > 0 && len(marks) < maxCacheBreakpoints {
			out.Tools[len(out.Tools)-1].CacheControl = &CacheControl{Type: "ephemeral"}
		}
		if tc := req.ToolChoice; tc != nil {
			switch tc.Mode {
			case "", "auto":
				out.ToolChoice = &ToolChoice{Type: "auto"}
			case "required":
				out.ToolChoice = &ToolChoice{Type: "any"}
			case "none":
				out.ToolChoice = &ToolChoice{Type: "none"}
			case "tool":
				out.ToolChoice = &ToolChoice{Type: "tool", Name: tc.Name}
			default:
				return nil, fmt.Errorf("tool_choice: unsupported mode %q", tc.Mode)
			}
		}
		if p := req.ParallelToolCalls; p != nil && !*p {
			if out.ToolChoice == nil {
				out.ToolChoice = &ToolChoice{Type: "auto"}
			}
			if out.ToolChoice.Type != "none" {
				out.ToolChoice.DisableParallelToolUse = true
			}
		}
	}
	if t := req.Temperature; t != nil {
		v := min(max(*t, 0), 1) // Anthropic's range is [0, 1], OpenAI's [0, 2]
		out.Temperature = &v
	}
	if out.Temperature == nil {
		// Claude 4.5 and later refuse temperature and top_p together,
		// which OpenAI clients often send: temperature wins.
		out.TopP = req.TopP
	}
	out.StopSequences = req.Stop
	if req.User != "" {
		out.Metadata = &Metadata{UserID: req.User}
	}
	askThinking(out, req.Thinking)
	if n := len(out.Messages); out.Thinking == nil && n > 0 && out.Messages[n-1].Role == "assistant" {
		// Without thinking the API refuses thinking blocks in a final
		// assistant turn (a prefill); earlier turns may keep theirs.
		last := &out.Messages[n-1]
		last.Content = slices.DeleteFunc(last.Content, func(b Block) bool {
			return b.Type == "thinking" || b.Type == "redacted_thinking"
		})
		if len(last.Content) == 0 {
			out.Messages = out.Messages[:n-1]
		}
	}
	return out, nil
}

// thinkingBlocks returns an assistant message's thinking as content
// blocks: only blocks signed by Anthropic go back, unchanged (a signed
// block with no text too), as the API checks the signature and requires
// the blocks of a turn with tool use. Unsigned thinking and other
// providers' signatures mean nothing to it and are dropped.
func thinkingBlocks(tb []chat.ThinkingBlock) []Block {
	var blocks []Block
	for i := range tb {
		b := &tb[i]
		switch {
		case b.Format != chat.ThinkingAnthropic:
		case b.Redacted != "":
			blocks = append(blocks, Block{Type: "redacted_thinking", Data: b.Redacted})
		case b.Signature != "":
			blocks = append(blocks, Block{Type: "thinking", Thinking: &b.Text, Signature: b.Signature})
		}
	}
	return blocks
}

// Thinking forms a model takes.
const (
	noThinking       = iota // the model cannot think: nothing is asked
	budgetThinking          // {type: enabled, budget_tokens}
	adaptiveThinking        // {type: adaptive} and output_config.effort; enabled is refused or deprecated
)

// thinkingForms is how each Claude model asks for thinking: the first row
// whose prefix begins the model's name from "claude-" on wins (so
// "anthropic.claude-opus-4-6-v1" is claude-opus-4-6). maxOutput bounds
// max_tokens (0: unknown, not bounded). display: the model's default
// display may be "omitted", so "summarized" is asked for when thinking is
// shown; older models show thinking by default. A Claude name of no row
// is adaptive from version 4.6 on and takes a budget before; any other
// name (an Anthropic-compatible server's own model) takes a budget.
var thinkingForms = []struct {
	prefix    string
	form      int
	maxOutput int
	display   bool
}{
	{"claude-opus-4-7", adaptiveThinking, 128000, true},
	{"claude-opus-4-6", adaptiveThinking, 128000, true},
	{"claude-sonnet-4-6", adaptiveThinking, 64000, true},
	{"claude-mythos", adaptiveThinking, 128000, true},
	{"claude-opus-4-5", budgetThinking, 64000, false},
	{"claude-sonnet-4-5", budgetThinking, 64000, false},
	{"claude-haiku-4-5", budgetThinking, 64000, false},
	{"claude-opus-4-1", budgetThinking, 32000, false},
	// Claude 4.0, by date or alias; a later claude-opus-4-8 is not it.
	{"claude-opus-4-0", budgetThinking, 32000, false},
	{"claude-opus-4-2025", budgetThinking, 32000, false},
	{"claude-opus-4@", budgetThinking, 32000, false},
	{"claude-sonnet-4-0", budgetThinking, 64000, false},
	{"claude-sonnet-4-2025", budgetThinking, 64000, false},
	{"claude-sonnet-4@", budgetThinking, 64000, false},
	{"claude-3-7-sonnet", budgetThinking, 64000, false},
	{"claude-3", noThinking, 0, false},
	{"claude-2", noThinking, 0, false},
	{"claude-instant", noThinking, 0, false},
}

// thinkingForm looks model up in thinkingForms.
func thinkingForm(model string) (form, maxOutput int, display bool) {
	i := strings.Index(model, "claude-")
	if i < 0 {
		return budgetThinking, 0, false
	}
	name := model[i:]
	for _, r := range thinkingForms {
		if strings.HasPrefix(name, r.prefix) {
			return r.form, r.maxOutput, r.display
		}
	}
	if major, minor, ok := claudeVersion(name); ok && (major > 4 || major == 4 && minor >= 6) {
		return adaptiveThinking, 0, true
	}
	return budgetThinking, 0, false
}

// claudeVersion reads the version of a name such as claude-sonnet-5 or
// claude-fable-5-1-20260101: its first number and the one after it (not
// a date).
func claudeVersion(name string) (major, minor int, ok bool) {
	var nums []int
	for _, f := range strings.Split(name, "-") {
		n, err := strconv.Atoi(f)
		if err != nil || len(f) >= 8 {
			if len(nums) > 0 {
				break
			}
			continue
		}
		nums = append(nums, n)
		if len(nums) == 2 {
			break
		}
	}
	if len(nums) == 0 {
		return 0, 0, false
	}
	if len(nums) == 2 {
		minor = nums[1]
	}
	return nums[0], minor, true
}

// minThinkingBudget is the least budget_tokens the API takes.
const minThinkingBudget = 1024

// adaptiveEfforts maps firstword's efforts onto output_config.effort.
var adaptiveEfforts = map[string]string{"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}

// askThinking asks for the thinking ask wants, in the model's form. The
// answer cap applies to the answer: max_tokens, which counts thinking
// too, becomes the cap plus the thinking budget (for adaptive thinking,
// the budget the effort would buy).
func askThinking(out *Request, ask *chat.ThinkingAsk) {
	if ask == nil || ask.Effort == "none" {
		return
	}
	if tc := out.ToolChoice; tc != nil && (tc.Type == "any" || tc.Type == "tool") {
		// Thinking takes only tool_choice auto or none: a forced tool
		// call, which the client asked for, wins.
		return
	}
	if lastToolTurnUnsigned(out.Messages) {
		// With thinking on, the assistant turn a tool result answers
		// must begin with its thinking; it was not kept (it came from
		// another provider), so this turn is asked without thinking.
		return
	}
	form, maxOutput, display := thinkingForm(out.Model)
	effort := ask.Effort
	if effort == "" {
		effort = chat.BudgetEffort(ask.BudgetTokens)
	}
	budget := ask.BudgetTokens
	if budget <= 0 {
		budget = chat.EffortBudget(effort)
	}
	switch form {
	case noThinking:
		return
	case adaptiveThinking:
		out.Thinking = &ThinkingParam{Type: "adaptive"}
		if e := adaptiveEfforts[effort]; e != "" {
			out.OutputConfig = &OutputConfig{Effort: e}
		}
		if budget <= 0 {
			budget = chat.EffortBudget("high") // the API's default effort
		}
	default:
		if budget <= 0 {
			budget = chat.EffortBudget("medium")
		}
		budget = max(budget, minThinkingBudget)
		out.Thinking = &ThinkingParam{Type: "enabled"}
	}
	if display && !ask.Hide {
		out.Thinking.Display = "summarized"
	}
	answer := out.MaxTokens
	if maxOutput > 0 && answer+budget > maxOutput {
		// The model's output limit: the thinking budget gives way, down
		// to the least the API takes, then the answer cap.
		budget = max(maxOutput-answer, minThinkingBudget)
		answer = min(answer, maxOutput-budget)
	}
	out.MaxTokens = answer + budget
	if out.Thinking.Type == "enabled" {
		out.Thinking.BudgetTokens = budget
	}
	// Thinking refuses a changed temperature (and top_k), and takes
	// top_p only from 0.95 to 1: the client's sampling gives way.
	out.Temperature = nil
	if p := out.TopP; p != nil && *p < 0.95 {
		out.TopP = nil
	}
}

// lastToolTurnUnsigned reports whether the conversation ends with tool
// results answering an assistant turn that does not begin with thinking.
func lastToolTurnUnsigned(msgs []MessageParam) bool {
	n := len(msgs)
	if n < 2 || msgs[n-1].Role != "user" || msgs[n-2].Role != "assistant" {
		return false
	}
	results := slices.ContainsFunc(msgs[n-1].Content, func(b Block) bool { return b.Type == "tool_result" })
	a := msgs[n-2].Content
	return results && len(a) > 0 && a[0].Type != "thinking" && a[0].Type != "redacted_thinking"
}

// contentBlocks encodes a message's text and (when images is set) image
// parts as blocks. Empty text is left out: the API refuses empty text
// blocks.
func contentBlocks(m *chat.Message, images bool) []Block {
	if len(m.Parts) == 0 {
		if m.Content == "" {
			return nil
		}
		return []Block{{Type: "text", Text: m.Content}}
	}
	blocks := make([]Block, 0, len(m.Parts))
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			if p.Text != "" {
				blocks = append(blocks, Block{Type: "text", Text: p.Text})
			}
		case chat.PartImage:
			if !images {
				continue
			}
			switch {
			case p.Data != "":
				blocks = append(blocks, Block{Type: "image", Source: &ImageSource{Type: "base64", MediaType: p.MediaType, Data: p.Data}})
			case p.ImageURL != "":
				blocks = append(blocks, Block{Type: "image", Source: &ImageSource{Type: "url", URL: p.ImageURL}})
			}
		}
	}
	return blocks
}

// toolInput turns tool-call arguments into a tool_use input, which must be
// a JSON object: empty arguments are {}, and arguments that are not an
// object (invalid or truncated JSON, or another JSON value) are wrapped as
// {"_raw": "<arguments>"} so that the model sees what was sent instead of
// the request failing.
func toolInput(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage("{}")
	}
	if trimmed[0] == '{' && json.Valid([]byte(trimmed)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(trimmed)) == nil {
			return buf.Bytes()
		}
	}
	b, _ := upstream.Marshal(map[string]string{"_raw": args})
	return b
}
