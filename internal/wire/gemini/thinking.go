package gemini

import (
	"slices"
	"strconv"
	"strings"

	"github.com/firstword/firstword/internal/chat"
)

// ThinkingConfig is generationConfig.thinkingConfig: a token budget
// (Gemini 2.5; 0 turns thinking off, -1 lets the model decide) or a
// level (Gemini 3 on), never both, and whether thought summaries are
// streamed.
type ThinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// levels is firstword's efforts from least to most, which thinkingLevel
// names alike.
var levels = []string{"minimal", "low", "medium", "high"}

// thinkingModel is how a Gemini model takes thinking: by level (levels
// it supports, in order) or by budget (its range; off: 0 turns thinking
// off). maxOutput bounds maxOutputTokens.
type thinkingModel struct {
	prefix    string
	levels    []string
	minBudget int
	maxBudget int
	off       bool
	maxOutput int
}

// thinkingModels is how each Gemini model asks for thinking: the first row
// whose prefix begins the model's name (after any "models/") wins. A
// "gemini-<n>" name of no row takes levels low, medium and high from
// version 3 on; any other name is sent no thinkingConfig.
var thinkingModels = []thinkingModel{
	{prefix: "gemini-3-flash", levels: levels, maxOutput: 65536},
	{prefix: "gemini-3-pro", levels: []string{"low", "high"}, maxOutput: 65536},
	{prefix: "gemini-2.5-pro", minBudget: 128, maxBudget: 32768, maxOutput: 65536},
	{prefix: "gemini-2.5-flash-lite", minBudget: 512, maxBudget: 24576, off: true, maxOutput: 65536},
	{prefix: "gemini-2.5-flash", minBudget: 1, maxBudget: 24576, off: true, maxOutput: 65536},
	{prefix: "gemini-2.0"},
	{prefix: "gemini-1"},
	{prefix: "gemma"},
}

// lookupThinking returns the row for model; a zero row (neither levels
// nor a budget) takes no thinkingConfig. A model no row knows (a tuned
// model's name, a newer one, a local server's) gets the row unknown.
func lookupThinking(model string) thinkingModel {
	name := model[strings.LastIndexByte(model, '/')+1:]
	for _, r := range thinkingModels {
		if strings.HasPrefix(name, r.prefix) {
			return r
		}
	}
	if v, ok := strings.CutPrefix(name, "gemini-"); ok {
		major, _, _ := strings.Cut(v, "-")
		major, _, _ = strings.Cut(major, ".")
		if n, err := strconv.Atoi(major); err == nil && n >= 3 {
			return thinkingModel{levels: levels[1:]}
		}
	}
	return unknown
}

// unknown is the row of a model no row knows: it is only asked to
// include its thoughts (a budget or level it may not take could be
// refused), and never when the client asked for none.
var unknown = thinkingModel{prefix: "?"}

// thinkingConfig maps a thinking ask onto the model's thinkingConfig and
// the maxOutputTokens to send: Gemini counts thinking into
// maxOutputTokens, so a cap on the answer becomes the cap plus the
// budget. Effort none turns thinking off where the model allows, and asks
// for the least otherwise.
func thinkingConfig(model string, ask *chat.ThinkingAsk, maxTokens int) (*ThinkingConfig, int) {
	if ask == nil {
		return nil, maxTokens
	}
	m := lookupThinking(model)
	if m.prefix == unknown.prefix {
		if ask.Hide || ask.Effort == "none" {
			return nil, maxTokens
		}
		return &ThinkingConfig{IncludeThoughts: true}, maxTokens
	}
	if m.levels == nil && m.maxBudget == 0 {
		return nil, maxTokens
	}
	effort := ask.Effort
	if effort == "" {
		effort = chat.BudgetEffort(ask.BudgetTokens)
	}
	off := effort == "none"
	tc := &ThinkingConfig{IncludeThoughts: !ask.Hide && !off}
	budget := ask.BudgetTokens
	if budget <= 0 {
		budget = chat.EffortBudget(effort)
	}
	if m.levels != nil {
		tc.ThinkingLevel = nearestLevel(m.levels, effort)
	} else {
		b := -1 // no effort nor budget: the model decides
		switch {
		case off && m.off:
			b = 0
		case off:
			b = m.minBudget
		case budget > 0:
			b = min(max(budget, m.minBudget), m.maxBudget)
		}
		tc.ThinkingBudget = &b
		budget = max(b, 0)
	}
	if off {
		budget = 0
	}
	if maxTokens > 0 {
		maxTokens += budget
		if m.maxOutput > 0 {
			maxTokens = min(maxTokens, m.maxOutput)
		}
	}
	return tc, maxTokens
}

// nearestLevel is the least supported level at or above effort, or the
// highest supported when effort is above them all ("" for no effort: the
// model's default).
func nearestLevel(supported []string, effort string) string {
	if effort == "" {
		return ""
	}
	if effort == "xhigh" {
		return supported[len(supported)-1]
	}
	want := max(slices.Index(levels, effort), 0) // none: the least
	for _, l := range supported {
		if slices.Index(levels, l) >= want {
			return l
		}
	}
	return supported[len(supported)-1]
}

// signatures returns an assistant message's Gemini thought signatures, in
// order. Other formats' blocks and unsigned thinking mean nothing to
// Gemini and are not sent (nor is thought text: Gemini does not take its
// summaries back).
func signatures(tb []chat.ThinkingBlock) []string {
	var sigs []string
	for _, b := range tb {
		if b.Format == chat.ThinkingGemini && b.Signature != "" {
			sigs = append(sigs, b.Signature)
		}
	}
	return sigs
}
