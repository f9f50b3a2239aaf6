package chat

import "unicode/utf8"

// EstimateTokens approximates the number of tokens in s without a
// tokenizer: about four bytes of English per token, and at least one token
// per non-ASCII rune cluster so that scripts without spaces are not
// undercounted. It is used only when a provider reported no usage, and the
// result is always marked Estimated.
func EstimateTokens(s string) int {
	if s == "" {
		return 0
	}
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		other++
		i += n
	}
	n := (ascii+3)/4 + other
	if n == 0 {
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
