// Package limits owns admission: whether a request of a tenant's key may
// start now. It enforces requests and tokens per minute (GCRA), open
// streams at once and spend budgets per UTC day and month, each optional,
// for the tenant and for the key. Counts live in process, or in a Shared
// backend (Redis) that every replica uses, checked in one round trip; when
// the backend fails or is slow, each replica falls back to its own counts
// for a cooldown instead of refusing or stalling traffic. Limits come from
// the config and from overrides in the store, and spend from the store's
// usage rows; both are reloaded in the background, never per request.
package limits

import "encoding/json"

// Rates are the rate limits of a tenant or a key; 0 is no limit.
type Rates struct {
	RequestsPerMinute int `json:"requests_per_minute"`
	TokensPerMinute   int `json:"tokens_per_minute"`
	ConcurrentStreams int `json:"concurrent_streams"`
}

// Budget caps spend per UTC day and month; 0 is no cap.
type Budget struct {
	USDPerDay      float64 `json:"usd_per_day"`
	USDPerMonth    float64 `json:"usd_per_month"`
	TokensPerDay   int64   `json:"tokens_per_day"`
	TokensPerMonth int64   `json:"tokens_per_month"`
	// SoftThreshold is the fraction of a cap past which the spend is
	// reported as near it (0: the default, 0.8).
	SoftThreshold float64 `json:"soft_threshold"`
}

// Policy is what one tenant or key may do.
type Policy struct {
	Limits Rates  `json:"limits"`
	Budget Budget `json:"budget"`
}

func (p Policy) empty() bool {
	return p.Limits == Rates{} && p.budgeted() == false
}

func (b Budget) capped() bool {
	return b.USDPerDay > 0 || b.USDPerMonth > 0 || b.TokensPerDay > 0 || b.TokensPerMonth > 0
}

func (p Policy) budgeted() bool { return p.Budget.capped() }

// DefaultSoftThreshold is a budget's soft threshold unless set.
const DefaultSoftThreshold = 0.8

func (b Budget) soft() float64 {
	if b.SoftThreshold > 0 {
		return b.SoftThreshold
	}
	return DefaultSoftThreshold
}

// Override is what the admin API sets for a tenant or a key: each field
// set replaces the config's; absent fields keep it.
type Override struct {
	RequestsPerMinute *int     `json:"requests_per_minute,omitempty"`
	TokensPerMinute   *int     `json:"tokens_per_minute,omitempty"`
	ConcurrentStreams *int     `json:"concurrent_streams,omitempty"`
	USDPerDay         *float64 `json:"usd_per_day,omitempty"`
	USDPerMonth       *float64 `json:"usd_per_month,omitempty"`
	TokensPerDay      *int64   `json:"tokens_per_day,omitempty"`
	TokensPerMonth    *int64   `json:"tokens_per_month,omitempty"`
	SoftThreshold     *float64 `json:"soft_threshold,omitempty"`
}

// Apply returns p with o's fields in place of its own.
func (o Override) Apply(p Policy) Policy {
	apply(&p.Limits.RequestsPerMinute, o.RequestsPerMinute)
	apply(&p.Limits.TokensPerMinute, o.TokensPerMinute)
	apply(&p.Limits.ConcurrentStreams, o.ConcurrentStreams)
	apply(&p.Budget.USDPerDay, o.USDPerDay)
	apply(&p.Budget.USDPerMonth, o.USDPerMonth)
	apply(&p.Budget.TokensPerDay, o.TokensPerDay)
	apply(&p.Budget.TokensPerMonth, o.TokensPerMonth)
	apply(&p.Budget.SoftThreshold, o.SoftThreshold)
	return p
}

// Merge returns o with n's set fields in place of its own.
func (o Override) Merge(n Override) Override {
	replace(&o.RequestsPerMinute, n.RequestsPerMinute)
	replace(&o.TokensPerMinute, n.TokensPerMinute)
	replace(&o.ConcurrentStreams, n.ConcurrentStreams)
	replace(&o.USDPerDay, n.USDPerDay)
	replace(&o.USDPerMonth, n.USDPerMonth)
	replace(&o.TokensPerDay, n.TokensPerDay)
	replace(&o.TokensPerMonth, n.TokensPerMonth)
	replace(&o.SoftThreshold, n.SoftThreshold)
	return o
}

// apply sets a Policy's field to an Override's, if set.
func apply[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// replace sets an Override's field to another's, if set.
func replace[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// Check reports the first invalid field of o, or "".
func (o Override) Check() (field, why string) {
	for _, f := range []struct {
		name string
		v    *int
	}{{"requests_per_minute", o.RequestsPerMinute}, {"tokens_per_minute", o.TokensPerMinute}, {"concurrent_streams", o.ConcurrentStreams}} {
		switch {
		case f.v != nil && *f.v < 0:
			return f.name, "must not be negative (0 is no limit)"
		case f.v != nil && *f.v > MaxLimit:
			return f.name, "must be at most 1000000000"
		}
	}
	for name, v := range map[string]*float64{"usd_per_day": o.USDPerDay, "usd_per_month": o.USDPerMonth} {
		if v != nil && *v < 0 {
			return name, "must not be negative (0 is no cap)"
		}
	}
	for name, v := range map[string]*int64{"tokens_per_day": o.TokensPerDay, "tokens_per_month": o.TokensPerMonth} {
		if v != nil && *v < 0 {
			return name, "must not be negative (0 is no cap)"
		}
	}
	if v := o.SoftThreshold; v != nil && (*v < 0 || *v > 1) {
		return "soft_threshold", "want a fraction between 0 and 1"
	}
	return "", ""
}

// MaxLimit bounds a rate or concurrency limit: at most one unit per
// nanosecond of a 1s period, so a rate's interval is never zero.
const MaxLimit = 1_000_000_000

// ParseOverride decodes an override as stored (JSON).
func ParseOverride(b []byte) (Override, error) {
	var o Override
	err := json.Unmarshal(b, &o)
	return o, err
}
