package sim

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/firstword/firstword/internal/chat"
)

// signaturePrefix marks the sim's signatures, so that one is told apart
// from a real provider's at a glance.
const signaturePrefix = "simsig1"

// Signature is the signature the sim gives a thinking block with text:
// deterministic, opaque-looking, and checked when the block comes back
// (see checkThinking), as Anthropic checks its own.
func Signature(text string) string {
	sum := sha256.Sum256([]byte("firstword sim thinking\x00" + text))
	return signaturePrefix + base64.StdEncoding.EncodeToString(sum[:])
}

// checkThinking refuses a request whose assistant turns carry an
// Anthropic-format thinking block that the sim did not sign as it stands:
// a changed text or signature, or none, is refused as Anthropic refuses
// them. Redacted blocks, and other formats' blocks, pass.
func checkThinking(req *chat.Request) error {
	for i := range req.Messages {
		m := &req.Messages[i]
		for j := range m.Thinking {
			b := &m.Thinking[j]
			if b.Format != chat.ThinkingAnthropic || b.Redacted != "" || b.Signature == Signature(b.Text) {
				continue
			}
			what := "an invalid signature"
			if b.Signature == "" {
				what = "no signature"
			}
			return fmt.Errorf("message %d: thinking block %d has %s: thinking blocks must be passed back unchanged", i, j, what)
		}
	}
	return nil
}
