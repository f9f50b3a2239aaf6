package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
)

// Mid-stream failover: an answer that breaks after its first token is
// continued by another attempt, spliced into the same stream (see
// docs/continuation.md).

// Defaults of an alias's continuation policy.
const (
	DefaultMaxContinuations = 2
	DefaultStallTimeout     = 15 * time.Second
	// DefaultContinuationPrompt is the instruction a continuation sends
	// to an upstream that takes no prefill, followed by the end of the
	// delivered text. Its wording was not measured against real models.
	DefaultContinuationPrompt = "Your previous answer was cut off. Continue it from exactly where it stopped: " +
		"do not repeat anything already written, do not start over, and add no preamble or comment. " +
		"It ended with the text between the markers:"
)

// OnStreamFailure values: what a broken answer does.
const (
	StreamFailureContinue = "continue"
	StreamFailureEnd      = "end"
)

// ErrStalled is the cause of an attempt that sent nothing for its alias's
// stall timeout after its first token.
var ErrStalled = errors.New("the answer stalled")

// Continuation is how a deployment is asked to continue a broken answer.
type Continuation string

const (
	// ContinueInstruct sends the delivered text as an assistant message,
	// then a user message asking for the rest (the alias's
	// continuation_prompt, quoting the text's end).
	ContinueInstruct Continuation = "instruct"
	// ContinuePrefill ends the request with the delivered text as an
	// assistant message, which the model continues (Ollama, Anthropic
	// models that accept prefill).
	ContinuePrefill Continuation = "prefill"
	// ContinueFinalMessage is ContinuePrefill for vLLM's OpenAI-compatible
	// server: the request also says continue_final_message.
	ContinueFinalMessage Continuation = "continue_final_message"
)

// ContinuationFor is the one table of continuation methods: by the
// provider type of a deployment (config's providers.<name>.type), its
// upstream model, and what the deployment's config set ("": the table
// decides; prefill or instruct).
func ContinuationFor(providerType, model, set string) Continuation {
	switch {
	case set == string(ContinueInstruct):
		return ContinueInstruct
	case set == string(ContinuePrefill) && providerType == "openai":
		// Only vLLM takes a trailing assistant message as a prefix on this
		// wire format, and only when asked.
		return ContinueFinalMessage
	case set == string(ContinuePrefill):
		return ContinuePrefill
	case providerType == "ollama":
		return ContinuePrefill
	case providerType == "anthropic" && anthropicPrefill(model):
		return ContinuePrefill
	}
	return ContinueInstruct
}

// anthropicPrefill reports whether a Claude model still accepts a
// prefilled assistant turn: models before Opus and Sonnet 4.6 do. A name
// it cannot read is taken as newer.
func anthropicPrefill(model string) bool {
	rest, ok := strings.CutPrefix(model, "claude-")
	if !ok {
		return false
	}
	// claude-3-5-sonnet-20241022, claude-sonnet-4-5, claude-opus-4-1-20250805:
	// the version is the first numbers, a date (8 digits) is not one.
	var v []int
	for f := range strings.SplitSeq(rest, "-") {
		n, err := strconv.Atoi(f)
		if err != nil || len(f) > 2 {
			if len(v) > 0 {
				break
			}
			continue
		}
		v = append(v, n)
	}
	switch {
	case len(v) == 0:
		return false
	case v[0] < 4:
		return true
	case v[0] == 4:
		return len(v) == 1 || v[1] < 6
	}
	return false
}

// continuer is a session's state for continuing a broken answer: what was
// passed to the caller, and the continuations made.
type continuer struct {
	// on: the alias continues broken answers and the request asks for one
	// choice.
	on bool
	// text is choice 0's text as passed to the caller, in inline while
	// it fits (most answers' first chunks: no allocation).
	text   []byte
	inline [256]byte
	// tools: a tool call was passed on; such an answer is never continued.
	tools bool
	made  int
	// last is the deployment that broke; err why.
	last *deployment
	err  error
	// req is the continuation request of the attempt now serving (nil
	// before the first continuation).
	req *chat.Request
	// resuming: the attempt being opened continues the answer.
	resuming bool
	seam     seam
}

// note records what a chunk passed to the caller showed.
func (c *continuer) note(ch *chat.Chunk) {
	if ch.Choice == 0 && ch.Text != "" {
		if c.text == nil {
			c.text = c.inline[:0]
		}
		c.text = append(c.text, ch.Text...)
	}
	if len(ch.ToolCalls) > 0 {
		c.tools = true
	}
}

// asked is the request the answer's attempt was sent: a continuation's,
// or the request as routed.
func (s *session) asked() *chat.Request {
	if s.cont.req != nil {
		return s.cont.req
	}
	return s.req
}

// mayContinue reports whether the answer the attempt t was serving, which
// broke with err after its first token, may be continued.
func (s *session) mayContinue(t *tally, err error) bool {
	c := &s.cont
	if !c.on || c.tools || c.made >= s.alias.MaxContinuations || t.Finish != "" {
		return false
	}
	ce := chat.AsError(err)
	switch {
	// A failure the request asked for (a sim directive) meets every
	// attempt; continuing a filtered answer would get round the filter;
	// one too long for its context only grows.
	case ce.ClientInduced, ce.Category == chat.CategoryContentFilter, ce.Category == chat.CategoryContextLength:
		return false
	}
	return true
}

// The stall watch costs no timer operation per chunk: the loop notes
// when it went back to reading the upstream (reading, nanoseconds on
// the monotonic clock since epoch; 0 while the caller takes a chunk: a
// slow reader is not a stalled upstream), and the timer, when it fires,
// sets itself again for what is left of the stall timeout, or cancels
// the attempt.
var epoch = time.Now()

func now() int64 { return int64(time.Since(epoch)) }

// progress notes a chunk about to be passed on (what the continuer
// keeps): the caller takes it, the upstream is not being read.
//
//go:noinline
func (a *try) progress(c *chat.Chunk) {
	a.s.cont.note(c)
	a.reading.Store(0)
}

// rearm notes that the upstream is read again.
func (a *try) rearm() { a.reading.Store(now()) }

// watch starts an attempt's stall watch, its first answer (head) passed
// on: the first-token timer, which inTime stopped, set again as the
// stall timer.
//
//go:noinline
func (a *try) watch() {
	a.s.cont.note(&a.head)
	a.watched.Store(true)
	a.rearm()
	a.timer.Reset(a.s.alias.StallTimeout)
}

// expire is the attempt's timer firing: a first-token timeout, or once
// the attempt is watched the stall watch's check.
func (a *try) expire() {
	if !a.watched.Load() {
		a.cancel(chat.ErrFirstTokenTimeout)
		return
	}
	if a.closed.Load() {
		return
	}
	stall := a.s.alias.StallTimeout
	switch since := a.reading.Load(); {
	case since == 0:
		a.timer.Reset(stall) // the caller is taking a chunk
	case time.Duration(now()-since) < stall:
		a.timer.Reset(stall - time.Duration(now()-since))
	default:
		a.cancel(ErrStalled)
		return
	}
	if a.closed.Load() {
		a.timer.Stop() // close ran between the check above and the Reset
	}
}

// broke handles the failure of an attempt after its first token.
//
//go:noinline
func (a *try) broke(err error) verdict {
	s := a.s
	if s.ctx.Err() == nil && errors.Is(context.Cause(a.ctx), ErrStalled) {
		err = &chat.Error{Category: chat.CategoryTimeout, Provider: a.d.ID, Retryable: true, Err: ErrStalled,
			Message: fmt.Sprintf("the answer stalled: nothing for %s", s.alias.StallTimeout)}
	}
	return s.afterFirst(a.d, a.idx, &a.t, err)
}

// resume continues the answer after its attempt broke (cont.last, with
// cont.err): on the next deployment in the walk's order, as long as the
// alias's continuations and the deadline last. It ends the stream.
func (s *session) resume() {
	c := &s.cont
	for c.made < s.alias.MaxContinuations {
		if s.ctx.Err() != nil {
			break
		}
		c.made++
		if s.continueOn(s.after(c.last)) {
			return
		}
	}
	switch {
	case s.gone():
		s.yield(chat.Chunk{}, context.Cause(s.ctx))
	case s.ctx.Err() != nil:
		// The deadline passed between attempts: the answer is cut as any
		// answer the deadline ends; its usage was billed by the attempts.
		s.yield(chat.Chunk{FinishReason: chat.FinishTimeout, Usage: &chat.Usage{Estimated: true}}, nil)
	default:
		s.yield(chat.Chunk{}, c.err)
	}
}

// takeOver continues an answer whose producer died (Hints.Continues):
// each attempt asks for the rest of it, in the alias's order, as the
// continuations of a broken answer do; the first continuation is the
// take-over, the alias's max_continuations follow it.
func (s *session) takeOver() {
	order, _, _ := s.r.order(s.alias, time.Now(), s.rep.Deadline)
	if len(order) == 0 {
		s.fail()
		return
	}
	s.order, s.marks = order, map[*deployment]mark{}
	c := &s.cont
	c.on = true
	c.text = append(c.inline[:0], s.req.Hints.Continues...)
	c.err = &chat.Error{Category: chat.CategoryUpstreamUnavailable, Retryable: true,
		Message: "the answer could not be continued: no deployment answered"}
	// after(last) is the order's first.
	c.last = order[len(order)-1]
	if !s.continueOn(s.after(c.last)) {
		s.resume()
	}
}

// continueOn runs one continuation attempt on d and reports whether the
// stream ended (else resume goes on with the next).
func (s *session) continueOn(d *deployment) bool {
	c := &s.cont
	switch s.resumeOn(d) {
	case verdictDone:
		return true
	case verdictNoFallback:
		// The request's deadline (resume ends the stream), or a
		// continuation request refused outright: no other will do better.
		if s.ctx.Err() == nil {
			s.yield(chat.Chunk{}, c.err)
			return true
		}
	case verdictNext:
		// It failed before its first token: the next is asked after it.
		c.last = d
	}
	// verdictContinue: it broke in turn (cont.last, cont.err are it).
	return false
}

// after returns the deployment to continue on after d broke: the next in
// the walk's order not found broken, d itself if there is none.
func (s *session) after(d *deployment) *deployment {
	i := 0
	for j, o := range s.order {
		if o == d {
			i = j
		}
	}
	for k := 1; k < len(s.order); k++ {
		o := s.order[(i+k)%len(s.order)]
		if s.marks[o]&broken == 0 {
			return o
		}
	}
	return d
}

// resumeOn runs one continuation attempt on d. verdictNext: it failed
// before its first token; verdictContinue: it broke after it and may be
// continued in turn.
func (s *session) resumeOn(d *deployment) verdict {
	s.cont.resuming = true
	a := s.open(d, false, false)
	s.cont.resuming = false
	defer a.close()
	a.first()
	if a.inTime() && a.thinking {
		a.skipThinking()
	}
	if !a.inTime() {
		// verdictDone: the caller left, and beforeFirst ended the stream.
		return s.beforeFirst(a.d, a.idx, a.ctx, a.err, &a.t)
	}
	return a.splice()
}

// skipThinking reads past a continuation's thinking, which is dropped:
// the caller's answer has started. Each thought re-arms the first-token
// timer, as for any attempt (see think).
func (a *try) skipThinking() {
	for a.thinking {
		a.timer.Reset(a.ftt)
		c, err := a.up.Next()
		if err == io.EOF {
			a.timer.Stop()
			a.thinking, a.empty = false, true
			return
		}
		if err != nil {
			a.err = err
			return
		}
		a.t.add(c)
		if c.Visible() || c.FinishReason != "" || c.Usage != nil {
			a.head, a.thinking = *c, false
			return
		}
		if !c.Thinks() {
			a.pending = append(a.pending, *c)
		}
	}
}

// splice passes a continuation on, its thinking dropped and the seam
// de-duplicated (see seam), to the end of its stream.
func (a *try) splice() verdict {
	s := a.s
	s.won(a.d, a.idx)
	// The first-token timer, which inTime stopped, is the stall timer now.
	a.watched.Store(true)
	a.rearm()
	a.timer.Reset(a.s.alias.StallTimeout)
	for i := range a.pending {
		if !a.pass(&a.pending[i]) {
			return s.stopped(a.d, a.idx)
		}
	}
	a.pending = nil
	if a.empty {
		return a.resumed()
	}
	c := &a.head
	for {
		if !a.pass(c) {
			return s.stopped(a.d, a.idx)
		}
		next, err := a.up.Next()
		if err == io.EOF {
			return a.resumed()
		}
		if err != nil {
			if !a.flush() {
				return s.stopped(a.d, a.idx)
			}
			return a.broke(err)
		}
		a.t.add(next)
		c = next
	}
}

// pass passes one chunk of a continuation on, its text through the
// seam; false: the caller left.
func (a *try) pass(c *chat.Chunk) bool {
	c.Thinking, c.Thought = "", nil
	m := &a.s.cont.seam
	if !m.done && c.Choice == 0 {
		ends := c.FinishReason != "" || c.Usage != nil || c.Refusal != "" || len(c.ToolCalls) > 0
		c.Text = m.feed(c.Text, ends)
	}
	if !c.Visible() && c.FinishReason == "" && c.Usage == nil && c.UsageSoFar == nil {
		return true // nothing left to pass: held by the seam, or thinking
	}
	return a.send(c)
}

// send passes a continuation's chunk on; false: the caller left.
func (a *try) send(c *chat.Chunk) bool {
	a.progress(c)
	if !a.s.yield(*c, nil) {
		return false
	}
	a.rearm()
	return true
}

// flush passes on what the seam still holds; false: the caller left.
func (a *try) flush() bool {
	m := &a.s.cont.seam
	if m.done {
		return true
	}
	return a.passHeld()
}

// passHeld decides the seam with what it holds and passes that on.
func (a *try) passHeld() bool {
	m := &a.s.cont.seam
	text := m.feed("", true)
	if text == "" {
		return true
	}
	return a.send(&chat.Chunk{Text: text})
}

// resumed ends a continuation whose stream ended: what the seam held is
// passed on; a continuation that reported no usage gets its estimate, so
// the answer's usage is the continuation's alone (the broken attempts
// were billed as attempts, see Attempt.Usage).
func (a *try) resumed() verdict {
	if !a.passHeld() {
		return a.s.stopped(a.d, a.idx)
	}
	v := a.ended()
	if a.t.Reported == nil {
		a.s.yield(chat.Chunk{Usage: a.t.usage(a.s.asked())}, nil)
	}
	return v
}

// ended ends the usage of a continued answer whose last continuation
// broke too: the answer's usage is that continuation's, the attempts
// before it were billed as attempts; false: the caller left.
//
//go:noinline
func (s *session) ended(t *tally) bool {
	return s.yield(chat.Chunk{Usage: t.usage(s.asked())}, nil)
}

// continueAfter sets up the continuation of the answer that attempt idx
// on d was serving: it is billed as an attempt that did not give the
// answer, and resume takes over.
func (s *session) continueAfter(d *deployment, idx int, t *tally, err error) verdict {
	s.spend(idx, t)
	s.cont.last, s.cont.err = d, err
	return verdictContinue
}

// continuation shapes req, a copy of the request for d, into a request
// for the rest of the answer delivered so far.
//
//go:noinline
func (s *session) continuation(req *chat.Request, d *deployment) *chat.Request {
	c := &s.cont
	method := d.Continuation
	if method == "" {
		method = ContinueInstruct
	}
	// A prefill with thinking on is refused (Anthropic) or ill-defined: a
	// request that asks for thinking is instructed.
	if th := req.Thinking; th != nil && th.Effort != "none" && method != ContinueInstruct {
		method = ContinueInstruct
	}
	whole, partial := given(string(c.text), method == ContinuePrefill)
	tail := tailOf(whole, seamMax)
	c.seam = seam{tail: tail, partial: partial}
	if whole == "" {
		// Nothing readable was delivered (a first answer that was only a
		// fragment of a character): the request is asked again as it was.
		c.req = req
		return req
	}
	msgs := req.Messages
	if n := len(msgs); n > 0 && msgs[n-1].Role == chat.RoleAssistant && len(msgs[n-1].Parts) == 0 && len(msgs[n-1].ToolCalls) == 0 {
		// The client prefilled the answer itself: the delivered text
		// follows its prefill, in one message (msgs is the request's own
		// copy, its messages shared: the last is replaced, not edited).
		last := msgs[n-1]
		last.Content += whole
		msgs[n-1] = last
	} else {
		msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: whole})
	}
	switch method {
	case ContinueFinalMessage:
		req.Extra = maps.Clone(req.Extra)
		if req.Extra == nil {
			req.Extra = map[string]json.RawMessage{}
		}
		req.Extra["continue_final_message"] = json.RawMessage("true")
		req.Extra["add_generation_prompt"] = json.RawMessage("false")
	case ContinueInstruct:
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: s.alias.ContinuationPrompt + "\n<<<\n" + tail + "\n>>>"})
	}
	req.Messages = msgs
	if req.MaxTokens > 0 {
		// What was delivered counts against the answer's cap.
		req.MaxTokens = max(1, req.MaxTokens-chat.EstimateTokens(whole))
	}
	c.req = req
	return req
}

// given splits the delivered text into what a continuation request
// carries and what it leaves out, which the caller has (see seam.partial):
// an incomplete last character, and for a prefill the whitespace before
// it. Anthropic refuses a prefill that ends with whitespace ("final
// assistant content cannot end with trailing whitespace").
func given(delivered string, prefill bool) (whole, partial string) {
	whole, partial = wholeRunes(delivered)
	if prefill {
		trimmed := strings.TrimRightFunc(whole, unicode.IsSpace)
		space := whole[len(trimmed):]
		if len(space) > seamMax {
			// The seam holds the continuation until it has seen partial:
			// it drops at most seamMax bytes of whitespace.
			n := seamMax
			for !utf8.RuneStart(space[n]) {
				n--
			}
			space, partial = space[:n], ""
		}
		whole, partial = trimmed, space+partial
	}
	return whole, partial
}

// wholeRunes splits s before an incomplete last character (the bytes a
// failure may have cut one short of), which it returns apart.
func wholeRunes(s string) (whole, partial string) {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i], s[i:]
			}
			break
		}
	}
	return s, ""
}

// tailOf returns s's last bytes, at most n, starting on a character.
func tailOf(s string, n int) string {
	i := max(0, len(s)-n)
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// The seam rule: a continuation may restate the end of the delivered
// text (restart its last word or sentence); the longest start of the
// continuation that equals an end of the delivered text, within seamMax
// bytes, is dropped. An overlap shorter than seamMin bytes counts only
// when it starts a word (after a space, or a letter after a non-letter:
// the restart of the last word), or completes a character the caller
// was given part of: other short ones are as likely the model's new text
// ("bo" + "ok").
const (
	seamMax = 200
	seamMin = 4
)

// seam de-duplicates the start of a continuation against the end of the
// delivered text, holding the continuation's first bytes (at most
// seamMax, and the partial character's) until the overlap is decided.
type seam struct {
	// tail is the delivered text's end, whole characters: what the
	// continuation request ended with.
	tail string
	// partial is what the caller was given last and the continuation
	// request left out: an incomplete character (a failure cut its
	// upstream's text inside it), which the continuation's first
	// character completes, after a prefill's trailing whitespace.
	partial string
	buf     string
	done    bool
}

// feed takes a continuation's text and returns what may be passed on:
// nothing while the overlap is undecided, then the text after it. ends:
// nothing more comes before the overlap must be decided.
func (m *seam) feed(text string, ends bool) string {
	if m.done {
		return text
	}
	m.buf += text
	// The overlap is at most seamMax bytes, and the partial character's
	// bytes may follow it.
	drop, wait := m.overlap(ends || len(m.buf) >= seamMax+len(m.partial))
	if wait {
		return ""
	}
	m.done = true
	out := m.buf[drop:]
	m.buf = ""
	return out
}

// overlap returns how many leading bytes of buf repeat the delivered
// text, or wait when more of the continuation could change that.
func (m *seam) overlap(final bool) (drop int, wait bool) {
	tail, buf := m.tail, m.buf
	best := 0
	for k := min(len(tail), len(buf)); k > 0; k-- {
		i := len(tail) - k
		if !utf8.RuneStart(tail[i]) || tail[i:] != buf[:k] {
			continue
		}
		// The overlap ends on one of the continuation's character
		// boundaries, which a delivered text ending in invalid UTF-8 does
		// not promise ("\xf0" against "\xf0\x9f\x99\x82"): the byte
		// after it tells.
		if k < len(buf) && !utf8.RuneStart(buf[k]) {
			continue
		}
		if k == len(buf) && !final {
			return 0, true
		}
		if k >= seamMin || wordStart(tail, i) || (m.partial != "" && strings.HasPrefix(buf[k:], m.partial)) {
			best = k
			break
		}
	}
	if !final {
		// A longer overlap is still possible: buf is the start of a longer
		// end of the delivered text.
		for k := len(buf) + 1; k <= len(tail); k++ {
			i := len(tail) - k
			if utf8.RuneStart(tail[i]) && strings.HasPrefix(tail[i:], buf) {
				return 0, true
			}
		}
		// The partial character's bytes may still come: after best, or
		// after a longer overlap that they would make count.
		for k := min(len(tail), len(buf)); m.partial != "" && k >= best; k-- {
			if rest := buf[k:]; len(rest) < len(m.partial) && strings.HasPrefix(m.partial, rest) &&
				(k == best || utf8.RuneStart(tail[len(tail)-k]) && tail[len(tail)-k:] == buf[:k]) {
				return 0, true
			}
		}
		if buf == "" {
			return 0, true
		}
	}
	if strings.HasPrefix(buf[best:], m.partial) {
		best += len(m.partial)
	}
	return best, false
}

// wordStart reports whether s[i:] starts a word: it follows a space, or
// is a letter or digit that follows none.
func wordStart(s string, i int) bool {
	if i == 0 {
		return true
	}
	p, _ := utf8.DecodeLastRuneInString(s[:i])
	if unicode.IsSpace(p) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return isWord(r) && !isWord(p)
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
