package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/limits"
)

// Admission decides whether a request may start (internal/limits).
type Admission interface {
	// Admit returns a nil Ticket when nothing limits the request, a
	// *limits.Refusal when a limit refuses it.
	Admit(ctx context.Context, q limits.Request) (*limits.Ticket, error)
}

// defaultReserve is the answer's tokens admission reserves when a
// request sets no max_tokens; the final usage settles it.
const defaultReserve = 256

// admission runs a parsed request through the limits. For a limited
// tenant or key it is the budget stage "admission", noted admitted or
// refused and why (a refusal's Server-Timing says so too), and OpenAI's
// rate limit headers are set on every answer, the refusal's included.
// A request nothing limits records no stage.
func (s *Server) admission(w http.ResponseWriter, r *http.Request, rec *budget.Recorder, q limits.Request) (*limits.Ticket, error) {
	if s.opt.Admission == nil {
		return nil, nil
	}
	start := time.Now()
	t, err := s.opt.Admission.Admit(r.Context(), q)
	var ref *limits.Refusal
	switch {
	case errors.As(err, &ref):
		end := time.Now()
		note := "refused: " + ref.Reason
		rec.Add("admission", start, end, note)
		rateHeaders(w.Header(), ref.Requests, ref.Tokens)
		w.Header().Set("Server-Timing", "admission;dur="+msString(end.Sub(start))+`;desc="`+note+`"`)
		return nil, refusalError(ref)
	case err != nil:
		return nil, err
	case t == nil:
		return nil, nil
	}
	rec.Add("admission", start, time.Now(), "admitted")
	rateHeaders(w.Header(), t.Requests, t.Tokens)
	return t, nil
}

// reserve is admission's estimate of a request's tokens: its prompt's
// plus the answer's cap.
func reserve(req *chat.Request) int {
	n := chat.EstimateInputTokens(req)
	if req.MaxTokens > 0 {
		return n + req.MaxTokens*max(req.Choices(), 1)
	}
	return n + defaultReserve
}

// refusalError is a refusal as the error the surfaces answer: 429 with
// OpenAI's code (rate_limit_exceeded, or insufficient_quota for a spent
// budget) and Retry-After when waiting helps.
func refusalError(ref *limits.Refusal) *chat.Error {
	e := &chat.Error{Category: chat.CategoryRateLimited, Code: "rate_limit_exceeded", Message: ref.Message, RetryAfter: ref.RetryAfter}
	if ref.Reason == "budget" {
		e.Code = codeInsufficientQuota
	}
	return e
}

// rateHeaders sets OpenAI's x-ratelimit-* headers for the tightest
// requests and tokens windows (nil: that rate is not limited).
func rateHeaders(h http.Header, req, tok *limits.Window) {
	set := func(kind string, w *limits.Window) {
		if w == nil {
			return
		}
		h.Set("X-Ratelimit-Limit-"+kind, strconv.Itoa(w.Limit))
		h.Set("X-Ratelimit-Remaining-"+kind, strconv.Itoa(w.Remaining))
		h.Set("X-Ratelimit-Reset-"+kind, resetString(w.Reset))
	}
	set("Requests", req)
	set("Tokens", tok)
}

// resetString formats a reset as OpenAI does: "20ms", "1s", "6m0s".
// Whole seconds (rounded up) from a second on.
func resetString(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10) + "ms"
	}
	return ((d + time.Second - 1) / time.Second * time.Second).String()
}
