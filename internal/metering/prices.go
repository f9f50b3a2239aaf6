package metering

import (
	"strings"

	"github.com/firstword/firstword/internal/chat"
)

// Price is USD per million tokens. CachedInput applies to input tokens
// read from a prompt cache (default: a tenth of Input), CacheWriteInput to
// input tokens written to one (default: 1.25 × Input, Anthropic's price
// for its five-minute cache; providers that cache on their own report no
// writes).
type Price struct {
	Input, Output, CachedInput, CacheWriteInput float64
}

// Prices maps a deployment ("provider/model") or an upstream model name to
// its price.
type Prices map[string]Price

// SimPrices are the built-in sim tiers' prices, so costs are visible out
// of the box. They are illustrative, in the proportions of real tiers.
var SimPrices = Prices{
	"small":    {Input: 0.15, Output: 0.60},
	"medium":   {Input: 1.00, Output: 4.00},
	"large":    {Input: 5.00, Output: 15.00},
	"reasoner": {Input: 2.00, Output: 8.00},
}

// Cost prices usage for a deployment: the deployment's own entry, else its
// model's; 0 when unknown.
func (p Prices) Cost(deployment string, u chat.Usage) float64 {
	price, ok := p.Lookup(deployment)
	if !ok {
		return 0
	}
	cachedPrice := price.CachedInput
	writePrice := price.CacheWriteInput
	if writePrice == 0 {
		writePrice = price.Input * 1.25
	}
	fresh := max(u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens, 0)
	return (float64(fresh)*price.Input + float64(u.CachedInputTokens)*cachedPrice +
		float64(u.CacheWriteTokens)*writePrice + float64(u.OutputTokens)*price.Output) / 1e6
}

// Lookup returns a deployment's price (by "provider/model", else by the
// model's name), per million tokens, with the cached-input price filled
// in (a tenth of the input price when none is set).
func (p Prices) Lookup(deployment string) (Price, bool) {
	price, ok := p[deployment]
	if !ok {
		_, model, _ := strings.Cut(deployment, "/")
		if price, ok = p[model]; !ok {
			return Price{}, false
		}
	}
	if price.CachedInput == 0 {
		price.CachedInput = price.Input / 10
	}
	return price, true
}
