package sim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Directive overrides the sim's behaviour for one request. It is read from
// the request's "sim" hint (the X-Firstword-Sim header) or from a
// [sim ...] tag in the last user message, e.g.
//
//	[sim fault=error_mid after=20 tokens=50 ttft=2s tps=40 echo]
//
// gap=5ms sets the time between tokens exactly; tps=N is gap=1s/N.
// think=2s makes any tier think for exactly that long before answering
// (think=0: not at all), whatever the request's thinking effort;
// think_tps=N sets the rate of the thinking deltas.
type Directive struct {
	Fault    Fault
	Tokens   int            // answer length
	TTFT     *time.Duration // time to first token, exactly (no jitter)
	Gap      *time.Duration // time between tokens, exactly (no jitter)
	Think    *time.Duration // thinking time, exactly (no jitter)
	ThinkTPS float64        // thinking deltas a second (0: the tier's)
	Echo     bool           // answer with the user's message (tag removed)
	Tool     string         // answer with a call of this tool
}

var tagRE = regexp.MustCompile(`\[sim(?:\s+[^\]]*)?\]`)

// ParseDirective parses "key=value" words and the "echo" flag.
func ParseDirective(s string) (Directive, error) {
	var d Directive
	for _, w := range strings.Fields(s) {
		k, v, _ := strings.Cut(w, "=")
		var err error
		switch k {
		case "fault":
			d.Fault.Mode = v
		case "after":
			d.Fault.After, err = strconv.Atoi(v)
		case "p", "probability":
			d.Fault.Probability, err = strconv.ParseFloat(v, 64)
		case "retry_after":
			d.Fault.RetryAfter, err = time.ParseDuration(v)
		case "factor":
			d.Fault.Factor, err = strconv.ParseFloat(v, 64)
		case "tokens":
			d.Tokens, err = strconv.Atoi(v)
		case "ttft":
			var t time.Duration
			t, err = time.ParseDuration(v)
			d.TTFT = &t
		case "gap":
			var t time.Duration
			t, err = time.ParseDuration(v)
			d.Gap = &t
		case "tps":
			var tps float64
			tps, err = strconv.ParseFloat(v, 64)
			if err == nil && tps > 0 {
				g := time.Duration(float64(time.Second) / tps)
				d.Gap = &g
			}
		case "think":
			var t time.Duration
			t, err = time.ParseDuration(v)
			d.Think = &t
		case "think_tps":
			d.ThinkTPS, err = strconv.ParseFloat(v, 64)
			if err == nil && !(d.ThinkTPS > 0 && d.ThinkTPS <= 1e6) {
				err = fmt.Errorf("%q is not a rate between 0 and 1e6", v)
			}
		case "echo":
			d.Echo = true
		case "tool":
			d.Tool = v
		default:
			return d, fmt.Errorf("sim directive: unknown key %q", k)
		}
		if err != nil {
			return d, fmt.Errorf("sim directive %s: %v", k, err)
		}
	}
	if d.Tokens < 0 || (d.Gap != nil && *d.Gap < 0) || (d.TTFT != nil && *d.TTFT < 0) || (d.Think != nil && *d.Think < 0) {
		return d, fmt.Errorf("sim directive: negative value")
	}
	return d, d.Fault.Validate()
}

// extractTag finds a [sim ...] tag in text and returns its contents and the
// text without it.
func extractTag(text string) (directive, rest string, ok bool) {
	loc := tagRE.FindStringIndex(text)
	if loc == nil {
		return "", text, false
	}
	tag := text[loc[0]+len("[sim") : loc[1]-1]
	return strings.TrimSpace(tag), strings.TrimSpace(text[:loc[0]] + text[loc[1]:]), true
}
