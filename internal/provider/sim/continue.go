package sim

import (
	"strings"

	"github.com/firstword/firstword/internal/chat"
)

// continuationOf reads a request to continue a broken answer, in either
// form the router sends (docs/continuation.md): the answer so far as a
// trailing assistant message (prefill), or that message followed by an
// instruction quoting its end between "<<<" and ">>>" lines. It returns
// the messages first asked and the text delivered; msgs itself and ""
// for any other request.
func continuationOf(msgs []chat.Message) (asked []chat.Message, delivered string) {
	n := len(msgs)
	switch {
	case n >= 2 && msgs[n-1].Role == chat.RoleAssistant && msgs[n-1].Content != "":
		return msgs[:n-1], msgs[n-1].Content
	case n >= 3 && msgs[n-1].Role == chat.RoleUser && msgs[n-2].Role == chat.RoleAssistant && msgs[n-2].Content != "" &&
		strings.Contains(msgs[n-1].Content, "\n<<<\n") && strings.HasSuffix(msgs[n-1].Content, "\n>>>"):
		return msgs[:n-2], msgs[n-2].Content
	}
	return msgs, ""
}

// rest is what follows delivered in the answer toks: its tokens after
// it, the one it cut short cut to its end. All of toks if delivered is
// not its start.
func rest(toks []string, delivered string) []string {
	for i, t := range toks {
		if len(t) < len(delivered) {
			if !strings.HasPrefix(delivered, t) {
				return toks
			}
			delivered = delivered[len(t):]
			continue
		}
		if !strings.HasPrefix(t, delivered) {
			return toks
		}
		if t = t[len(delivered):]; t == "" {
			return toks[i+1:]
		}
		return append([]string{t}, toks[i+1:]...)
	}
	return nil
}
