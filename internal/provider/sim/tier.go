// Package sim is a simulated model provider with the lesson's tiers, for
// running, demonstrating and testing firstword without keys or network.
//
// A tier has a median time to first token and a token rate; each request
// draws its timings with log-normal jitter and an optional heavy tail, from
// a generator seeded so that runs are repeatable. Answers are readable
// English of varied length that honour max_tokens. Fault modes (errors
// before the first token, hangs, mid-stream errors and stalls, slowness)
// are chosen in the config or per request, so every path of the gateway
// can be driven on purpose.
package sim

import (
	"strings"

	"github.com/firstword/firstword/internal/simspec"
)

// The sim's tiers and faults are internal/simspec's, so that the config
// can check them without importing this package.
type (
	Tier  = simspec.Tier
	Fault = simspec.Fault
)

// Fault modes.
const (
	FaultNone        = simspec.FaultNone
	Fault429         = simspec.Fault429
	Fault500         = simspec.Fault500
	Fault503         = simspec.Fault503
	FaultHang        = simspec.FaultHang
	FaultErrorMid    = simspec.FaultErrorMid
	FaultStallMid    = simspec.FaultStallMid
	FaultSlow        = simspec.FaultSlow
	FaultTruncateMid = simspec.FaultTruncateMid

	FaultErrorThinking = simspec.FaultErrorThinking
)

// LookupTier returns the tier for a model name: a tier name, optionally
// prefixed "sim-" ("sim-medium").
func LookupTier(model string) (Tier, bool) {
	t, ok := simspec.Tiers[strings.TrimPrefix(model, "sim-")]
	return t, ok
}
