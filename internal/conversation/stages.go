package conversation

import (
	"time"

	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/router"
)

// RecordAttempts adds the router's work to a request's stages: routing
// (until the first attempt started), each attempt as a group containing
// its time to first token and, for the one that served, the generation.
// routeStart is when the request was handed to the router; end closes
// attempts still open.
func RecordAttempts(rec *budget.Recorder, rep *router.Report, routeStart, end time.Time) {
	if rec == nil {
		return
	}
	if len(rep.Attempts) == 0 {
		rec.Add("route", routeStart, end, "")
		return
	}
	rec.Add("route", routeStart, rep.Attempts[0].Start, "")
	for _, a := range rep.Attempts {
		aend := a.End
		if aend.IsZero() {
			aend = end
		}
		rec.AddGroup("upstream "+a.Deployment, a.Start, aend, string(a.Outcome))
		if a.FirstToken.IsZero() {
			rec.Add("wait "+a.Deployment, a.Start, aend, string(a.Outcome))
			continue
		}
		rec.Add("ttft", a.Start, a.FirstToken, a.Deployment)
		rec.Add("generation", a.FirstToken, aend, a.Deployment)
	}
}
