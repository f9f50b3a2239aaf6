package chat

// Tally follows a stream chunk by chunk, for what it cost and where it
// stands: the provider's usage if it came, else what it reported before
// the stream ended (its input, say) with an estimate of the rest, else an
// estimate of it all; and which choices showed something and which
// ended. The router keeps one per attempt (what an attempt cost, how to
// cut it at the deadline); the meter one per request, of what was
// delivered (metering.Tally).
type Tally struct {
	// Chunks counts the chunks added: any means the upstream took the
	// request.
	Chunks int
	// Text is the bytes of visible text and refusals.
	Text int
	// Visible: a chunk showed something (see Chunk.Visible).
	Visible bool
	// Thinking is the bytes of thinking text.
	Thinking int
	// Reported is the provider's final usage; SoFar its last usage
	// before that (see Chunk.UsageSoFar).
	Reported, SoFar *Usage
	// Finish is the last finish reason.
	Finish FinishReason

	out      TokenCount // the visible output after SoFar (all of it without one)
	seen     choiceSet  // choices that showed something
	finished choiceSet  // choices that ended
}

// choiceSet is a set of choice indexes (below MaxChoices).
type choiceSet [MaxChoices / 64]uint64

func (s *choiceSet) add(i int)      { s[i/64] |= 1 << (i % 64) }
func (s *choiceSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// Add counts a chunk.
func (t *Tally) Add(c *Chunk) {
	t.Chunks++
	// Decoders refuse other indexes; a choice out of range still counts,
	// in none of the sets.
	inRange := c.Choice >= 0 && c.Choice < MaxChoices
	if c.Visible() {
		t.Visible = true
		if inRange {
			t.seen.add(c.Choice)
		}
		t.Text += len(c.Text) + len(c.Refusal)
		t.out.Add(c.Text)
		t.out.Add(c.Refusal)
		for _, tc := range c.ToolCalls {
			t.out.Add(tc.Name)
			t.out.Add(tc.Arguments)
		}
	}
	if c.Thought != nil && c.Thought.Restart && !t.Visible {
		// What came so far was an attempt's that failed before its answer
		// (its usage so far, its thinking): the router billed it as that
		// attempt's, and the next attempt's counts start afresh.
		t.SoFar, t.out, t.Thinking = nil, TokenCount{}, 0
	}
	if c.Thinking != "" {
		// Thinking is billed as output, as providers bill it.
		t.Thinking += len(c.Thinking)
		t.out.Add(c.Thinking)
	}
	if c.UsageSoFar != nil {
		// Its counts include this chunk's text.
		t.SoFar, t.out = c.UsageSoFar, TokenCount{}
	}
	if c.Usage != nil {
		t.Reported = c.Usage
	}
	if c.FinishReason != "" {
		t.Finish = c.FinishReason
		if inRange {
			t.finished.add(c.Choice)
		}
	}
}

// Usage returns the provider's usage when it reported one, else what it
// reported so far plus an estimate of the tokens after, or an estimate of
// it all (see EstimateUsage), marked Estimated. req is the request as
// sent, for the estimate of its input.
func (t *Tally) Usage(req *Request) Usage {
	if t.Reported != nil {
		return *t.Reported
	}
	return EstimateUsage(req, t.SoFar, &t.out)
}

// Open returns the choices that showed something and did not end, in
// order.
func (t *Tally) Open() []int {
	var out []int
	for ch := range MaxChoices {
		if t.seen.has(ch) && !t.finished.has(ch) {
			out = append(out, ch)
		}
	}
	return out
}
