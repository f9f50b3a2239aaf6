package sim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/firstword/firstword/internal/chat"
)

// signaturePrefix marks the sim's signatures, so that one is told apart
// from a real provider's at a glance.
const signaturePrefix = "simsig1"

// Signature is the signature the sim gives a thinking block with text:
// deterministic, opaque-looking, and checked when the block comes back
// (see checkThinking), as Anthropic checks its own.
func Signature(text string) string {
	sum := sha256.Sum256([]byte("firstword sim thinking\x00" + text))
	return signaturePrefix + base64.StdEncoding.EncodeToString(sum[:])
}

// checkThinking refuses a request whose assistant turns carry an
// Anthropic-format thinking block that the sim did not sign as it stands:
// a changed text or signature, or none, is refused as Anthropic refuses
// them. Redacted blocks, and other formats' blocks, pass.
func checkThinking(req *chat.Request) error {
	for i := range req.Messages {
		m := &req.Messages[i]
		for j := range m.Thinking {
			b := &m.Thinking[j]
			if b.Format != chat.ThinkingAnthropic || b.Redacted != "" || b.Signature == Signature(b.Text) {
				continue
			}
			what := "an invalid signature"
			if b.Signature == "" {
				what = "no signature"
			}
			return fmt.Errorf("message %d: thinking block %d has %s: thinking blocks must be passed back unchanged", i, j, what)
		}
	}
	return nil
}

// The dialects the sim serves, as far as thinking goes.
const (
	dialectChat = iota
	dialectMessages
	dialectResponses
	dialectGemini
	dialectOllama
)

// thinkingFields are the members of a request body that ask for thinking,
// in each dialect the sim serves. They are read here, not by the
// client-facing parsers, because they say what the sim, as a model,
// does: a Messages request without thinking enabled gets none, as from
// Claude, while a Responses or Gemini one thinks unseen, as OpenAI's and
// Google's thinking models do.
type thinkingFields struct {
	// Chat Completions
	ReasoningEffort string `json:"reasoning_effort"`
	// Messages: thinking {type: enabled|adaptive|disabled, budget_tokens},
	// and the adaptive effort in output_config.
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
		Display      string `json:"display"`
	} `json:"thinking"`
	// display "omitted": the blocks come with their signatures only.
	OutputConfig *struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
	// Responses
	Reasoning *struct {
		Effort  string  `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
	Include []string `json:"include"`
	// Gemini
	GenerationConfig *struct {
		ThinkingConfig *struct {
			IncludeThoughts bool   `json:"includeThoughts"`
			ThinkingBudget  *int   `json:"thinkingBudget"`
			ThinkingLevel   string `json:"thinkingLevel"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
	// Ollama: true, false, or a level (low, medium, high).
	Think json.RawMessage `json:"think"`
}

// shown is what an answer shows of the model's thinking: its text, its
// signature (the Thought that ends the block), both, or neither.
type shown struct{ text, signed bool }

// askThinking sets req.Thinking from what body asks of thinking in the
// dialect, and says what the answer shows of it:
//
//   - Chat Completions: reasoning_effort sets the effort; thinking is
//     always shown (as reasoning_content, where DeepSeek and vLLM put it).
//   - Messages: only thinking {type: enabled or adaptive} thinks (with
//     its budget_tokens, or output_config.effort), and shows it (only
//     the signatures with display "omitted").
//   - Responses: reasoning.effort sets the effort (the model thinks
//     without it too); reasoning.summary shows the text, include
//     reasoning.encrypted_content the signature.
//   - Gemini: thinkingConfig's thinkingBudget (0: none) or thinkingLevel
//     set it (the model thinks without them too); includeThoughts shows
//     the text; the signature is always sent, as Gemini sends it.
//   - Ollama: think: false turns thinking off; otherwise its text is
//     shown in message.thinking, and a level sets the effort.
//
// A body that does not decode asks nothing (its parser has refused it).
func askThinking(body []byte, dialect int, req *chat.Request) (show shown) {
	var f thinkingFields
	json.Unmarshal(body, &f)
	var ask chat.ThinkingAsk
	switch dialect {
	case dialectChat:
		ask.Effort, show = f.ReasoningEffort, shown{true, true}
	case dialectMessages:
		if f.Thinking == nil || (f.Thinking.Type != "enabled" && f.Thinking.Type != "adaptive") {
			ask.Effort = "none"
			break
		}
		ask.BudgetTokens, show = f.Thinking.BudgetTokens, shown{f.Thinking.Display != "omitted", true}
		if f.OutputConfig != nil {
			ask.Effort = f.OutputConfig.Effort
		}
	case dialectResponses:
		if r := f.Reasoning; r != nil {
			ask.Effort, show.text = r.Effort, r.Summary != nil && *r.Summary != ""
		}
		show.signed = slices.Contains(f.Include, "reasoning.encrypted_content")
	case dialectGemini:
		show.signed = true
		if f.GenerationConfig != nil && f.GenerationConfig.ThinkingConfig != nil {
			tc := f.GenerationConfig.ThinkingConfig
			ask.Effort, show.text = tc.ThinkingLevel, tc.IncludeThoughts
			if b := tc.ThinkingBudget; b != nil && *b == 0 {
				ask.Effort = "none"
			} else if b != nil && *b > 0 {
				ask.BudgetTokens = *b
			}
		}
	case dialectOllama:
		show.text = true
		var on bool
		if json.Unmarshal(f.Think, &on) == nil && !on {
			ask.Effort = "none"
		} else {
			json.Unmarshal(f.Think, &ask.Effort)
		}
	}
	if ask.Effort == "none" {
		show = shown{}
	}
	req.Thinking = &ask
	return show
}
