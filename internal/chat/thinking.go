package chat

import "strings"

// Thinking formats: where a signed thinking block came from. A signature
// is valid only for the provider family that made it, so a block goes back
// upstream only to the same format.
const (
	ThinkingAnthropic = "anthropic" // Messages thinking / redacted_thinking blocks
	ThinkingGemini    = "gemini"    // a part's thoughtSignature
	ThinkingResponses = "responses" // a Responses reasoning item's encrypted_content
)

// Thought marks what a thinking stream carries besides its text: the end of
// a block (its signature), a redacted block, or a restart. It is rare (once
// per block), so a Chunk holds a pointer to it and a plain thinking delta
// costs one string.
type Thought struct {
	// Signature ends the current thinking block: Anthropic's signature, a
	// Gemini thoughtSignature, a Responses reasoning item's
	// encrypted_content. Opaque; passed back upstream unchanged.
	Signature string
	// Redacted is a whole redacted thinking block's opaque data.
	Redacted string
	// Format says which provider family made Signature or Redacted
	// (ThinkingAnthropic, ...).
	Format string
	// ID is the upstream's id of the block, when it has one (a Responses
	// reasoning item's id).
	ID string
	// Restart says that the thinking shown so far belonged to an attempt
	// that failed before its first answer token: a client drops it, and
	// the thinking that follows is the new attempt's from its start.
	Restart bool
}

// ThinkingBlock is one block of a model's thinking, as stored with an
// assistant message and sent back upstream in the next turn.
type ThinkingBlock struct {
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"`
	Format    string `json:"format,omitempty"`
	ID        string `json:"id,omitempty"`
}

// Signed reports whether the block carries something only its provider
// can check (a signature or redacted data): such a block must go back
// unchanged, and only to its own format.
func (b *ThinkingBlock) Signed() bool { return b.Signature != "" || b.Redacted != "" }

// ThinkingAsk is what a request asks of the model's thinking, in the
// terms every dialect maps to: an effort, a token budget, or both.
type ThinkingAsk struct {
	// Effort is "minimal", "low", "medium" or "high" ("" when only a
	// budget was given). "none" asks for no thinking.
	Effort string
	// BudgetTokens is the most tokens the model may think (0: the
	// provider's default or what Effort implies).
	BudgetTokens int
	// Hide: the client did not ask to see the thinking (an Anthropic
	// client without thinking enabled, say); it is still measured and
	// billed.
	Hide bool
}

// Efforts in the order of how much thinking they buy. xhigh is OpenAI's
// highest (gpt-5.1-codex-max and later); upstreams without it get their
// highest.
var Efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// EffortBudget is the thinking budget firstword sends for an effort to an
// upstream that takes a budget rather than an effort (Anthropic's older
// models, Gemini 2.5). 0 for an unknown effort.
func EffortBudget(effort string) int {
	switch effort {
	case "minimal":
		return 1024
	case "low":
		return 2048
	case "medium":
		return 8192
	case "high":
		return 24576
	case "xhigh":
		return 32768
	}
	return 0
}

// BudgetEffort is the effort nearest a budget, for an upstream that takes
// an effort when the client gave a budget.
func BudgetEffort(budget int) string {
	switch {
	case budget <= 0:
		return ""
	case budget <= 1024:
		return "minimal"
	case budget <= 4096:
		return "low"
	case budget <= 16384:
		return "medium"
	}
	return "high"
}

// Thinks reports whether the chunk carries thinking: text, a signature, a
// redacted block or a restart. Thinking is progress (the model is not
// stuck) but not an answer: it never makes a chunk Visible.
func (c *Chunk) Thinks() bool { return c.Thinking != "" || c.Thought != nil }

// ThinkingCollector assembles thinking blocks from chunks: text appends to
// the open block, a signature closes it, a redacted block stands alone,
// and a restart drops everything collected.
type ThinkingCollector struct {
	blocks []ThinkingBlock
	text   strings.Builder
	open   bool
}

// Add folds one chunk's thinking in.
func (t *ThinkingCollector) Add(c *Chunk) {
	if c.Thought != nil && c.Thought.Restart {
		*t = ThinkingCollector{}
	}
	if c.Thinking != "" {
		t.text.WriteString(c.Thinking)
		t.open = true
	}
	th := c.Thought
	if th == nil {
		return
	}
	if th.Signature != "" {
		t.close(th)
	}
	if th.Redacted != "" {
		t.close(nil)
		t.blocks = append(t.blocks, ThinkingBlock{Redacted: th.Redacted, Format: th.Format, ID: th.ID})
	}
}

func (t *ThinkingCollector) close(th *Thought) {
	if !t.open && th == nil {
		return
	}
	b := ThinkingBlock{Text: t.text.String()}
	if th != nil {
		b.Signature, b.Format, b.ID = th.Signature, th.Format, th.ID
	}
	t.blocks = append(t.blocks, b)
	t.text.Reset()
	t.open = false
}

// Blocks returns the blocks collected, the open one last (unsigned).
func (t *ThinkingCollector) Blocks() []ThinkingBlock {
	out := append([]ThinkingBlock(nil), t.blocks...)
	if t.open {
		out = append(out, ThinkingBlock{Text: t.text.String()})
	}
	return out
}

// Text is all the thinking text collected, blocks joined as they came.
func (t *ThinkingCollector) Text() string {
	var b strings.Builder
	for _, bl := range t.blocks {
		b.WriteString(bl.Text)
	}
	b.WriteString(t.text.String())
	return b.String()
}

// Empty reports whether nothing was collected.
func (t *ThinkingCollector) Empty() bool { return len(t.blocks) == 0 && !t.open }
