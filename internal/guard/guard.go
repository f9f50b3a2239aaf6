// Package guard checks a chat message before it reaches the model. The local
// checks (a length limit, a blocklist, prompt-injection phrases, payment card
// numbers and e-mail addresses) are pure and take microseconds; an optional
// remote guard service is called over HTTP after them.
//
// A Guard is built once from a Config by New and is safe for concurrent use.
package guard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Action is what the guard does with a finding.
type Action string

// The actions. In a Config the empty Action means the field's default; Off
// turns the detector off.
const (
	Block  Action = "block"  // refuse the message
	Redact Action = "redact" // replace the match in Verdict.Text
	Flag   Action = "flag"   // only report it in Verdict.Findings
	Off    Action = "off"    // do not look
)

// Finding kinds, also used as Verdict.Code.
const (
	KindInputTooLong    = "input_too_long"
	KindPromptInjection = "prompt_injection"
	KindBlocklist       = "blocklist"
	KindPIICard         = "pii_card"
	KindPIIEmail        = "pii_email"
	KindRemote          = "remote"
)

// DefaultMaxInputChars is the length limit when Config.MaxInputChars is 0.
const DefaultMaxInputChars = 32000

// DefaultHTTPTimeout bounds a remote guard call when HTTPConfig.Timeout is 0.
const DefaultHTTPTimeout = time.Second

// Config configures a Guard. The zero Config is usable: a 32000-character
// limit, injection phrases blocked, card numbers and e-mail addresses
// redacted, no blocklist and no remote guard.
type Config struct {
	// MaxInputChars is the longest message allowed, in characters (runes);
	// 0 means 32000. A longer message is blocked with code input_too_long
	// and not scanned further.
	MaxInputChars int
	// Blocklist holds words or phrases, matched case-insensitively on whole
	// words: the text and each entry are split into words (runs of letters
	// and digits) and an entry matches where its words appear one after
	// another, whatever whitespace or punctuation separates them. So "bad
	// word" matches "Bad  word" and "bad-word" but not "badword" or "bad
	// words". An entry may contain letters, digits, spaces, hyphens,
	// apostrophes and periods.
	Blocklist []string
	// BlocklistAction applies to blocklist matches (default block; a
	// redacted match becomes "[redacted]").
	BlocklistAction Action
	// Injection turns the built-in prompt-injection phrases on or off; nil
	// means on.
	Injection *bool
	// InjectionAction applies to prompt-injection phrases (default block;
	// a redacted match becomes "[redacted]").
	InjectionAction Action
	// PIIAction applies to payment card numbers (13 to 19 digits, spaces or
	// dashes allowed between them, valid under the Luhn check) and e-mail
	// addresses (default redact: they become "[redacted card]" and
	// "[redacted email]").
	PIIAction Action
	// HTTP is an optional remote guard, called when the local checks pass.
	HTTP *HTTPConfig
}

// HTTPConfig is a remote guard: the guard POSTs {"text": ..., "user": ...}
// as JSON, where text is the message after local redactions, and expects a
// 2xx answer {"allowed": bool, "reason": "..."}.
type HTTPConfig struct {
	// URL is the remote guard's absolute http or https URL.
	URL string
	// Timeout bounds the call (default 1s).
	Timeout time.Duration
	// FailOpen decides what an error, a timeout, a non-2xx status or a
	// malformed answer means: allow the message (true) or block it (false).
	FailOpen bool
	// Headers are added to the request (e.g. Authorization).
	Headers map[string]string
}

// Finding is one thing a check found.
type Finding struct {
	// Kind is one of the Kind constants.
	Kind string
	// Action is the Action taken: block, redact or flag.
	Action string
	// Detail describes the finding for logs without repeating personal
	// data: the blocklist entry, the injection phrase, "card ending 4242",
	// "address at example.com", the remote guard's reason.
	Detail string
}

// Verdict is the outcome of a check.
type Verdict struct {
	// Blocked reports that the message must not reach the model.
	Blocked bool
	// Code is the machine code of the blocking finding (a Kind constant),
	// or empty when not blocked.
	Code string
	// Reason is a sentence safe to show the client, or empty when not
	// blocked.
	Reason string
	// Text is the text to send to the model: the input with redactions
	// applied. It is empty when Blocked.
	Text string
	// Findings lists everything found, including flags and redactions:
	// input length first, then phrases (injection and blocklist) in text
	// order, then card numbers, e-mail addresses and the remote verdict.
	// Identical findings are listed once.
	Findings []Finding
}

// reason is the client-safe sentence for a blocking code.
func reason(code string) string {
	switch code {
	case KindInputTooLong:
		return "The message is too long."
	case KindPromptInjection:
		return "The message looks like an attempt to override the assistant's instructions."
	case KindBlocklist:
		return "The message contains a word or phrase that is not allowed."
	case KindPIICard:
		return "The message appears to contain a payment card number; please remove it."
	case KindPIIEmail:
		return "The message contains an e-mail address; please remove it."
	}
	return "The message was declined by the content policy."
}

// reasonUnavailable is the Reason when a failing remote guard blocks.
const reasonUnavailable = "The message could not be checked right now; please try again."

// Guard checks messages. It is immutable and safe for concurrent use.
type Guard struct {
	maxChars  int
	phrases   phraseSet
	piiAction Action
	remote    *remote
}

// New validates cfg and builds a Guard, compiling the blocklist and the
// injection phrases. It reports every problem at once; an unknown action is
// named in the error. A nil client means a client with the default transport;
// it is used only for the remote guard.
func New(cfg Config, client *http.Client) (*Guard, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("guard: "+format, args...))
	}
	action := func(field string, a, def Action) Action {
		switch a {
		case "":
			return def
		case Block, Redact, Flag, Off:
			return a
		}
		bad("%s: unknown action %q (want block, redact, flag or off)", field, a)
		return Off
	}
	g := &Guard{maxChars: cfg.MaxInputChars}
	if g.maxChars == 0 {
		g.maxChars = DefaultMaxInputChars
	}
	if cfg.MaxInputChars < 0 {
		bad("max_input_chars: must not be negative, got %d", cfg.MaxInputChars)
	}
	blockAct := action("blocklist_action", cfg.BlocklistAction, Block)
	injAct := action("injection_action", cfg.InjectionAction, Block)
	g.piiAction = action("pii_action", cfg.PIIAction, Redact)

	var pats []pattern
	if blockAct != Off {
		for _, e := range cfg.Blocklist {
			p, err := blocklistPattern(e)
			if err != nil {
				bad("blocklist: %v", err)
				continue
			}
			p.kind, p.action = KindBlocklist, blockAct
			pats = append(pats, p)
		}
	}
	if injAct != Off && (cfg.Injection == nil || *cfg.Injection) {
		for _, src := range injectionPhrases() {
			p := mustPattern(src)
			p.kind, p.action = KindPromptInjection, injAct
			pats = append(pats, p)
		}
	}
	g.phrases = newPhraseSet(pats)

	if h := cfg.HTTP; h != nil {
		r, err := newRemote(*h, client)
		if err != nil {
			bad("http: %v", err)
		}
		g.remote = r
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return g, nil
}

// span is a byte range of the input to replace in Verdict.Text.
type span struct {
	start, end int
	repl       string
}

// CheckLocal runs the local checks. It does no I/O and takes microseconds for
// a message of a few kilobytes.
func (g *Guard) CheckLocal(text string) Verdict {
	var v Verdict
	if n := utf8.RuneCountInString(text); n > g.maxChars {
		v.add(Finding{Kind: KindInputTooLong, Action: string(Block), Detail: fmt.Sprintf("%d characters, limit %d", n, g.maxChars)})
		v.finish()
		return v
	}
	var spans []span
	g.phrases.scan(text, func(p *pattern, start, end int, matched string) {
		detail := p.detail
		if detail == "" {
			detail = matched
		}
		v.add(Finding{Kind: p.kind, Action: string(p.action), Detail: detail})
		if p.action == Redact {
			spans = append(spans, span{start, end, "[redacted]"})
		}
	})
	if g.piiAction != Off {
		scanCards(text, func(start, end int) {
			v.add(Finding{Kind: KindPIICard, Action: string(g.piiAction), Detail: "card ending " + lastDigits(text[start:end], 4)})
			if g.piiAction == Redact {
				spans = append(spans, span{start, end, "[redacted card]"})
			}
		})
		scanEmails(text, func(start, at, end int) {
			v.add(Finding{Kind: KindPIIEmail, Action: string(g.piiAction), Detail: "address at " + strings.ToLower(text[at+1:end])})
			if g.piiAction == Redact {
				spans = append(spans, span{start, end, "[redacted email]"})
			}
		})
	}
	v.Text = redact(text, spans)
	v.finish()
	return v
}

// Check runs the local checks and, when they do not block and a remote guard
// is configured, calls it with the redacted text, bounded by
// HTTPConfig.Timeout. A remote failure is resolved by HTTPConfig.FailOpen: a
// flag finding when open, a block when closed. Check returns a non-nil error
// only when ctx ends before the remote guard answers; cancelling ctx aborts
// the call at once and the error wraps context.Cause(ctx).
func (g *Guard) Check(ctx context.Context, text, user string) (Verdict, error) {
	v := g.CheckLocal(text)
	if v.Blocked || g.remote == nil {
		return v, nil
	}
	allowed, reason, err := g.remote.check(ctx, v.Text, user)
	if err != nil {
		if ctx.Err() != nil {
			return Verdict{}, fmt.Errorf("guard: remote: %w", ctxErr(ctx))
		}
		if g.remote.failOpen {
			v.add(Finding{Kind: KindRemote, Action: string(Flag), Detail: "remote guard failed, allowed: " + err.Error()})
			return v, nil
		}
		v.add(Finding{Kind: KindRemote, Action: string(Block), Detail: "remote guard failed: " + err.Error()})
		v.finish()
		v.Reason = reasonUnavailable
		return v, nil
	}
	if !allowed {
		if reason == "" {
			reason = "denied"
		}
		v.add(Finding{Kind: KindRemote, Action: string(Block), Detail: reason})
		v.finish()
	}
	return v, nil
}

// ctxErr is ctx's error, and its cause when that differs.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// add appends f unless an identical finding is already listed.
func (v *Verdict) add(f Finding) {
	if !slices.Contains(v.Findings, f) {
		v.Findings = append(v.Findings, f)
	}
}

// finish sets Blocked, Code and Reason from the findings.
func (v *Verdict) finish() {
	// The precedence of blocking findings for Code.
	for _, kind := range [...]string{KindInputTooLong, KindPromptInjection, KindBlocklist, KindPIICard, KindPIIEmail, KindRemote} {
		for _, f := range v.Findings {
			if f.Kind == kind && f.Action == string(Block) {
				v.Blocked, v.Code, v.Reason, v.Text = true, kind, reason(kind), ""
				return
			}
		}
	}
}

// redact applies spans to text. Overlapping spans are merged; the merged
// range takes the first span's replacement.
func redact(text string, spans []span) string {
	if len(spans) == 0 {
		return text
	}
	slices.SortStableFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(text))
	pos := 0
	for i := 0; i < len(spans); {
		s := spans[i]
		for i++; i < len(spans) && spans[i].start < s.end; i++ {
			s.end = max(s.end, spans[i].end)
		}
		b.WriteString(text[pos:s.start])
		b.WriteString(s.repl)
		pos = s.end
	}
	b.WriteString(text[pos:])
	return b.String()
}

// lastDigits returns the last n ASCII digits of s.
func lastDigits(s string, n int) string {
	var d []byte
	for i := len(s) - 1; i >= 0 && len(d) < n; i-- {
		if isDigit(s[i]) {
			d = append(d, s[i])
		}
	}
	slices.Reverse(d)
	return string(d)
}

// validURL reports whether u is an absolute http or https URL.
func validURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	if (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("want an absolute http or https URL, got %q", u)
	}
	return nil
}
