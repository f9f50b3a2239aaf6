// Package simspec is the vocabulary of the simulated provider: its
// built-in tiers and its fault modes, with the rules a fault follows.
// internal/provider/sim runs them; internal/config checks a sim provider's
// settings against them without importing the provider. Standard library
// only.
package simspec

import (
	"fmt"
	"strings"
	"time"
)

// Tier describes a simulated model.
type Tier struct {
	// TTFT is the median time to first token.
	TTFT time.Duration
	// TokensPerSecond is the median generation rate.
	TokensPerSecond float64
	// Jitter is the log-normal sigma applied to TTFT and to each gap
	// between tokens; 0.2 is realistic.
	Jitter float64
	// TailProbability is the chance that a request's TTFT is multiplied
	// by TailFactor (a heavy tail, for hedging experiments).
	TailProbability float64
	TailFactor      float64
	// AnswerTokens is the typical answer length when max_tokens is unset;
	// each answer is drawn between half and one and a half times it.
	AnswerTokens int
	// CachedPrefixSpeedup is how much faster the part of the prompt read
	// from the simulated prompt cache is processed: a request whose
	// prompt is all cached has its TTFT divided by it. Only prefixes that
	// end at a cache breakpoint are cached (the sim's prefixCache); 0 or 1
	// disables the speedup, not the cached-token counts.
	CachedPrefixSpeedup float64
	// PrefillTokensPerSecond, when set, makes the TTFT grow with the
	// prompt: TTFT plus the uncached input tokens at this rate plus the
	// cached ones CachedPrefixSpeedup times faster (and the speedup no
	// longer scales TTFT itself). 0: the TTFT does not depend on the
	// prompt's length.
	PrefillTokensPerSecond float64
	// ThinkingTime is how long the model thinks before it answers: from
	// its first thinking delta (at TTFT) to its first answer token. 0: the
	// tier answers without thinking.
	ThinkingTime time.Duration
	// ThinkingTokensPerSecond is the rate of its thinking deltas
	// (DefaultThinkingRate when 0).
	ThinkingTokensPerSecond float64
}

// DefaultThinkingRate is the thinking rate of a tier that sets none, and
// of any tier a directive makes think.
const DefaultThinkingRate = 100

// ThinkingRate is the tier's thinking rate, DefaultThinkingRate when unset.
func (t *Tier) ThinkingRate() float64 {
	if t.ThinkingTokensPerSecond > 0 {
		return t.ThinkingTokensPerSecond
	}
	return DefaultThinkingRate
}

// Tiers are the built-in tiers. medium follows the lesson: TTFT about
// 600 ms and 80 tokens a second, so a 300-token answer takes about 4.4 s;
// small writes the same answer in about 2.3 s. reasoner starts as soon as
// medium but thinks for 1.5 s (about 150 thinking tokens) before its first
// answer token.
var Tiers = map[string]Tier{
	"small":  {TTFT: 300 * time.Millisecond, TokensPerSecond: 150, Jitter: 0.2, AnswerTokens: 200, CachedPrefixSpeedup: 2},
	"medium": {TTFT: 600 * time.Millisecond, TokensPerSecond: 80, Jitter: 0.2, AnswerTokens: 200, CachedPrefixSpeedup: 2},
	"large":  {TTFT: 1200 * time.Millisecond, TokensPerSecond: 40, Jitter: 0.2, AnswerTokens: 200, CachedPrefixSpeedup: 2},
	"reasoner": {TTFT: 600 * time.Millisecond, TokensPerSecond: 80, Jitter: 0.2, AnswerTokens: 200, CachedPrefixSpeedup: 2,
		ThinkingTime: 1500 * time.Millisecond, ThinkingTokensPerSecond: 100},
}

// Fault is a failure the sim injects.
type Fault struct {
	// Mode is one of the Fault* constants; empty means none.
	Mode string `yaml:"mode" json:"mode"`
	// After is the number of tokens sent before a mid-stream fault
	// (thinking tokens for error_thinking).
	After int `yaml:"after" json:"after"`
	// Probability is the chance the fault applies to a request; 0 means 1.
	Probability float64 `yaml:"probability" json:"probability"`
	// RetryAfter is sent with 429 and 503 failures.
	RetryAfter time.Duration `yaml:"retry_after" json:"retry_after"`
	// Factor slows the tier down for FaultSlow (default 5).
	Factor float64 `yaml:"factor" json:"factor"`
}

// Fault modes.
const (
	FaultNone        = ""
	Fault429         = "429"       // rate limited before the first token
	Fault500         = "500"       // server error before the first token
	Fault503         = "503"       // overloaded before the first token
	FaultHang        = "hang"      // never sends a token
	FaultErrorMid    = "error_mid" // an error event after After tokens
	FaultStallMid    = "stall_mid" // goes silent after After tokens
	FaultSlow        = "slow"      // TTFT and gaps multiplied by Factor
	FaultTruncateMid = "truncate"  // the stream ends after After tokens with no finish
	// FaultErrorThinking is an error event after After thinking tokens,
	// before the first answer token (or, when the model does not think,
	// before any token).
	FaultErrorThinking = "error_thinking"
)

var faultModes = []string{Fault429, Fault500, Fault503, FaultHang, FaultErrorMid, FaultStallMid, FaultSlow, FaultTruncateMid, FaultErrorThinking}

// Validate reports an unknown mode or out-of-range numbers.
func (f *Fault) Validate() error {
	if f.Mode == "" {
		return nil
	}
	known := false
	for _, m := range faultModes {
		known = known || m == f.Mode
	}
	if !known {
		return fmt.Errorf("unknown fault mode %q (want one of %s)", f.Mode, strings.Join(faultModes, ", "))
	}
	if f.Probability < 0 || f.Probability > 1 {
		return fmt.Errorf("fault probability %v is not between 0 and 1", f.Probability)
	}
	if f.After < 0 {
		return fmt.Errorf("fault after %d is negative", f.After)
	}
	return nil
}
