package chat

import "unicode/utf8"

// EstimateTokens approximates the number of tokens in s without a
// tokenizer: about four bytes of English per token, and at least one token
// per non-ASCII rune cluster so that scripts without spaces are not
// undercounted. It is used only when a provider reported no usage, and the
// result is always marked Estimated.
func EstimateTokens(s string) int {
	var c TokenCount
	c.Add(s)
	return c.Tokens()
}

// TokenCount estimates the tokens of text that arrives in pieces (a
// stream's deltas) as EstimateTokens would of the whole text: rounding
// once, not once per piece, which would count a token for every delta of
// a few characters.
type TokenCount struct {
	ascii, other int
}

// Add counts s.
func (c *TokenCount) Add(s string) {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			c.ascii++
			i++
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		c.other++
		i += n
	}
}

// Tokens is the estimate: about four ASCII characters a token, one token
// for any other character, at least one for any text at all.
func (c *TokenCount) Tokens() int {
	n := (c.ascii+3)/4 + c.other
	if n == 0 && c.ascii > 0 {
		n = 1
	}
	return n
}

// EstimateInputTokens approximates the prompt tokens of req, counting a few
// tokens of framing per message as the providers do.
func EstimateInputTokens(req *Request) int {
	n := 3
	for i := range req.Messages {
		m := &req.Messages[i]
		n += 4 + EstimateTokens(m.Content)
		for _, tc := range m.ToolCalls {
			n += EstimateTokens(tc.Name) + EstimateTokens(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += EstimateTokens(t.Name) + EstimateTokens(t.Description) + EstimateTokens(string(t.Parameters))
	}
	return n
}

// EstimateUsage is the usage of a stream that ended without the
// provider's final count. With usage reported so far (Chunk.UsageSoFar)
// it is those counts, the output plus an estimate of the text that came
// after them (after), Estimated only if there was any; with none, an
// estimate of req's input and of the output text.
func EstimateUsage(req *Request, soFar *Usage, after *TokenCount) Usage {
	if soFar == nil {
		return Usage{InputTokens: EstimateInputTokens(req), OutputTokens: after.Tokens(), Estimated: true}
	}
	u := *soFar
	if n := after.Tokens(); n > 0 {
		u.OutputTokens += n
		u.Estimated = true
	}
	return u
}
