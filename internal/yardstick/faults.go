package yardstick

import (
	"context"
	"net/http"
	"slices"
	"time"
)

// CancelResult is how a target passed on its client leaving: of Probes
// requests that reached the upstream, Cancelled closed the upstream
// request within the wait, after the times summarised (milliseconds
// from the client's close to the upstream seeing its close).
// NotReached counts probes that never reached the upstream (the target is
// not pointed at it, or failed first).
type CancelResult struct {
	Probes     int     `json:"probes"`
	Cancelled  int     `json:"cancelled"`
	NotReached int     `json:"not_reached"`
	P50        float64 `json:"p50_ms"`
	P95        float64 `json:"p95_ms"`
	Max        float64 `json:"max_ms"`
}

// DropResult counts what the client saw when the upstream cut the
// stream after dropAfter chunks: "error_event" (a terminal error event:
// honest), "cut" (the stream ended without its end marker), "fake_success"
// (a clean end: the client cannot tell the answer is partial), "not via
// the upstream" (the probe never reached it), or another error kind.
type DropResult struct {
	Probes   int            `json:"probes"`
	Outcomes map[string]int `json:"outcomes"`
}

// Faults is one target's fault measurements.
type Faults struct {
	Target       string       `json:"target"`
	CancelMid    CancelResult `json:"cancel_mid_stream"`
	CancelBefore CancelResult `json:"cancel_before_first_token"`
	Drop         DropResult   `json:"upstream_drop"`
}

// measureFaults runs n probes of each fault scenario against t, one at a
// time, through u.
func measureFaults(ctx context.Context, t *Target, u *Upstream, c *http.Client, n int, wait time.Duration, maxTokens int) Faults {
	f := Faults{Target: t.Name, Drop: DropResult{Outcomes: map[string]int{}}}
	var mid, before []float64
	for range n {
		if ctx.Err() != nil {
			break
		}
		cancelProbe(ctx, t, u, c, scenarioSlow, wait, maxTokens, &f.CancelMid, &mid)
		cancelProbe(ctx, t, u, c, scenarioSilent, wait, maxTokens, &f.CancelBefore, &before)
		if out := dropProbe(ctx, t, u, c, maxTokens); ctx.Err() == nil {
			f.Drop.Probes++
			f.Drop.Outcomes[out]++
		}
		if f.CancelMid.Probes == 0 && f.CancelBefore.Probes == 0 {
			break // not pointed at the upstream: more probes would say the same, slowly
		}
	}
	finishCancel(&f.CancelMid, mid)
	finishCancel(&f.CancelBefore, before)
	return f
}

func finishCancel(r *CancelResult, xs []float64) {
	if len(xs) == 0 {
		return
	}
	slices.Sort(xs)
	r.P50, r.P95, r.Max = quantile(xs, .5), quantile(xs, .95), xs[len(xs)-1]
}

// cancelProbe sends a request the upstream answers by scen, leaves once
// the stream is under way (slow: at the first visible text; silent: once
// the upstream has the request) and times the upstream seeing the close.
func cancelProbe(ctx context.Context, t *Target, u *Upstream, c *http.Client, scen scenario, wait time.Duration, maxTokens int, r *CancelResult, took *[]float64) {
	prompt, p := u.newProbe(scen)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan *exchange, 1)
	go func() {
		x, err := t.open(rctx, c, prompt, maxTokens)
		if err != nil {
			ready <- nil
			return
		}
		if scen == scenarioSlow {
			for {
				ch, err := x.dec.Next()
				if err != nil {
					x.resp.Body.Close()
					ready <- nil
					return
				}
				if visible(ch.Text) {
					break
				}
			}
		}
		ready <- x
	}()
	var x *exchange
	if scen == scenarioSlow {
		select {
		case x = <-ready:
		case <-time.After(wait + 5*time.Second):
		case <-ctx.Done():
			return // cut by the time cap: not a probe
		}
		arrived := false
		select {
		case <-p.arrived:
			arrived = true
		default:
		}
		if x == nil || !arrived {
			r.NotReached++
			return
		}
	} else {
		select {
		case <-p.arrived:
		case <-time.After(wait + 5*time.Second):
			r.NotReached++
			return
		case <-ctx.Done():
			return
		}
		// Let the target settle into waiting for the first token.
		time.Sleep(20 * time.Millisecond)
	}
	r.Probes++
	left := time.Now()
	cancel()
	if x != nil {
		x.resp.Body.Close()
	}
	select {
	case <-p.gone:
		r.Cancelled++
		*took = append(*took, ms(p.goneAt.Sub(left)))
	case <-time.After(wait):
	case <-ctx.Done():
		r.Probes-- // cut by the time cap: not a probe
	}
}

// notViaUpstream is a drop probe that never reached the upstream.
const notViaUpstream = "not via the upstream"

// dropProbe reads a stream the upstream cuts and names its ending.
func dropProbe(ctx context.Context, t *Target, u *Upstream, c *http.Client, maxTokens int) string {
	prompt, p := u.newProbe(scenarioDrop)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s := t.measure(rctx, c, prompt, maxTokens)
	select {
	case <-p.arrived:
	default:
		// The upstream never saw the request: whatever the target said,
		// it was not about the drop.
		return notViaUpstream
	}
	switch {
	case s.Err == "":
		return "fake_success"
	case len(s.Err) > 6 && s.Err[:6] == "event_":
		return "error_event"
	case s.Err == "protocol":
		return "cut"
	}
	return s.Err
}
