package yardstick

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Dist summarises one measure in milliseconds: quantiles and, for each,
// a 95% confidence interval.
//
// The interval is a percentile bootstrap: the samples are resampled with
// replacement bootstrapRuns times (a fifth of that past 10,000 samples) (seeded, so a run's report is
// reproducible), the quantile is taken of each resample, and the interval
// is the 2.5th to 97.5th percentile of those. Resampling pools the rounds,
// so the interval covers the spread between rounds as well as within them.
type Dist struct {
	N    int        `json:"n"`
	P50  float64    `json:"p50"`
	P95  float64    `json:"p95"`
	P99  float64    `json:"p99"`
	CI50 [2]float64 `json:"ci50"`
	CI95 [2]float64 `json:"ci95"`
	CI99 [2]float64 `json:"ci99"`
	Mean float64    `json:"mean"`
	Min  float64    `json:"min"`
	Max  float64    `json:"max"`
}

const bootstrapRuns = 500

// quantile returns the q-quantile of sorted xs (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// summarise computes a Dist of xs (milliseconds).
func summarise(xs []float64) Dist {
	d := Dist{N: len(xs)}
	if len(xs) == 0 {
		return d
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	d.P50, d.P95, d.P99 = quantile(s, .50), quantile(s, .95), quantile(s, .99)
	d.Min, d.Max = s[0], s[len(s)-1]
	for _, x := range s {
		d.Mean += x
	}
	d.Mean /= float64(len(s))
	rng := rand.New(rand.NewPCG(uint64(len(s)), 22))
	qs := [3]float64{.50, .95, .99}
	var boot [3][]float64
	re := make([]float64, len(s))
	runs := bootstrapRuns
	if len(s) > 10000 {
		runs = bootstrapRuns / 5 // a long --duration run: keep the report quick
	}
	for range runs {
		for i := range re {
			re[i] = s[rng.IntN(len(s))]
		}
		slices.Sort(re)
		for k, q := range qs {
			boot[k] = append(boot[k], quantile(re, q))
		}
	}
	cis := [3]*[2]float64{&d.CI50, &d.CI95, &d.CI99}
	for k := range qs {
		slices.Sort(boot[k])
		*cis[k] = [2]float64{quantile(boot[k], .025), quantile(boot[k], .975)}
	}
	return d
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// bunched counts the bunched gaps: gaps under bunchedUnder whose run of
// short gaps began after a gap of at least after. Chunks that the model
// paced apart but that arrive together were held somewhere and released
// at once (a buffer, a batching writer, a proxy that does not flush).
func bunched(gaps []time.Duration, after time.Duration) int {
	n, held := 0, false
	for _, g := range gaps {
		switch {
		case g >= bunchedUnder:
			held = g >= after
		case held:
			n++
		}
	}
	return n
}

// bunchedUnder is how close a chunk must follow the previous one to count
// as bunched with it.
const bunchedUnder = time.Millisecond
