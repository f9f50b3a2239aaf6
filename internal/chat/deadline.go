package chat

import (
	"context"
	"time"
)

// WithDeadline returns parent ending at d with cause ErrDeadline: a
// request's deadline, which every attempt, retry and fallback shares and
// which context.Cause tells apart from a client that left. Only a call
// (package call) sets it, and Detach carries it over; everything under
// it reads ctx.Deadline.
func WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadlineCause(parent, d, ErrDeadline)
}

// Detach returns a context with ctx's values and its deadline (with the
// deadline's cause) that ctx's cancellation does not end, and its cancel:
// for work one request starts that others share, which must go on if that
// request leaves but not past its deadline. (context.WithoutCancel drops
// the deadline too.)
func Detach(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	detached, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	d, ok := ctx.Deadline()
	if !ok {
		return detached, cancel
	}
	detached, cancelDeadline := WithDeadline(detached, d)
	return detached, func(cause error) { cancel(cause); cancelDeadline() }
}
