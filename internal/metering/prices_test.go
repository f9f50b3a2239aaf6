package metering

import (
	"math"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

func TestCost(t *testing.T) {
	p := Prices{"a/m": {Input: 3, Output: 15}, "b": {Input: 1, Output: 2, CachedInput: 0.5, CacheWriteInput: 1.5}}
	for _, tt := range []struct {
		name       string
		deployment string
		u          chat.Usage
		want       float64 // USD
	}{
		{"fresh input and output", "a/m", chat.Usage{InputTokens: 1000, OutputTokens: 100}, (1000*3 + 100*15) / 1e6},
		{"cache read at a tenth", "a/m", chat.Usage{InputTokens: 1000, CachedInputTokens: 800}, (200*3 + 800*0.3) / 1e6},
		{"cache write at 1.25 times", "a/m", chat.Usage{InputTokens: 1000, CacheWriteTokens: 800}, (200*3 + 800*3.75) / 1e6},
		{"set prices, by model name", "x/b", chat.Usage{InputTokens: 10, CachedInputTokens: 4, CacheWriteTokens: 4, OutputTokens: 1}, (2*1 + 4*0.5 + 4*1.5 + 1*2) / 1e6},
		{"unknown deployment", "z/z", chat.Usage{InputTokens: 1000}, 0},
	} {
		if got := p.Cost(tt.deployment, tt.u); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: Cost = %g, want %g", tt.name, got, tt.want)
		}
	}
}
