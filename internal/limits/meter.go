package limits

import (
	"context"

	"github.com/firstword/firstword/internal/metering"
)

// Meter returns a Meter that gives every record to l (settling its
// request's ticket and counting its spend) and then to inner.
func (l *Limiter) Meter(inner metering.Meter) metering.Meter {
	return meter{l: l, inner: inner}
}

type meter struct {
	l     *Limiter
	inner metering.Meter
}

func (m meter) Record(ctx context.Context, r *metering.Record) {
	tokens := int64(r.Usage.InputTokens + r.Usage.OutputTokens)
	usd := r.Cost
	if len(r.Spent) > 0 {
		au, ac := r.AttemptsTotal()
		tokens += int64(au.InputTokens + au.OutputTokens)
		usd += ac
	}
	m.l.Metered(r.RequestID, r.Tenant, r.KeyID, r.Time, usd, tokens)
	if m.inner != nil {
		m.inner.Record(ctx, r)
	}
}
