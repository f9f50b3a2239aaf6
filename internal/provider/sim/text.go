package sim

import (
	"math/rand/v2"
	"strings"
)

// sentences is the bank answers are drawn from: plain, varied, on-topic for
// a chat gateway demo, so that a streamed answer reads like one.
var sentences = []string{
	"The first word is the number to defend, because once text is on screen the reader is busy and the rest of the wait hides behind their reading.",
	"A latency budget splits the time a user will wait across the stages of a request.",
	"Measure each stage on its own, then judge it at the 95th percentile rather than the average.",
	"An average of two seconds can hide one request in twenty that takes fifteen.",
	"Streaming sends the answer piece by piece as the model writes it.",
	"Server-sent events need nothing more than one ordinary HTTP response that stays open.",
	"Every proxy between the model and the browser has to pass each event on at once, or the stream arrives as one long wait.",
	"When the reader leaves, the request to the provider should be cancelled, so nobody pays for words that no one reads.",
	"An error in the middle of a stream must be reported as an event, since the status line has long been sent.",
	"The partial answer the user saw should be saved, so that the next turn's history matches the screen.",
	"Steps that do not depend on each other can start together, and then the wait is the slowest of them, not their sum.",
	"A shorter answer is the largest single saving in total time.",
	"A smaller model is often good enough, and it starts sooner and writes faster.",
	"Caching the unchanging start of a prompt lets the provider skip work it has already done.",
	"A first-token timeout of a few seconds catches a stuck call long before an overall timeout would.",
	"A retry started late in a request gets only the time that is left, never a fresh budget.",
	"Hedging sends a second copy of a slow request elsewhere and keeps whichever starts first.",
	"A circuit breaker stops sending traffic to a deployment that keeps failing, and probes it now and then to see if it has recovered.",
	"Token counts come from the final chunk of the stream, which is where providers report usage.",
	"People read a few words a second, and a model writes faster than that.",
	"That is why an answer that starts in half a second feels faster than one that appears all at once after two.",
	"Most of the time goes to the model writing, so the stages before it matter mainly because they delay the first word.",
	"The order lookup, the document search and the history load can all run at the same time.",
	"A fast input check runs in about a millisecond and can run alongside the context building.",
	"Here is the short version: stream the answer, ask for less, and use the smallest model that does the job well.",
	"It helps to write the budget down before tuning anything.",
	"Teams often tune connection pools first, when the answer was simply twice as long as it needed to be.",
	"Set the timeout from the measured 99th percentile, not from a web service's habits.",
	"Too short a limit cuts off good answers, and none at all lets a stuck call hang for minutes.",
	"A heartbeat comment every few seconds keeps idle-timeout proxies from closing a quiet stream.",
}

var listIntros = []string{
	"In practice, the levers rank roughly like this:",
	"A few things to check first:",
	"The usual order of work is:",
}

var listItems = []string{
	"stream the answer", "cap the answer's length", "route simple questions to a smaller model",
	"cache repeated requests", "run independent steps in parallel", "remove model calls that could be one",
	"measure at p95, not the mean", "cancel upstream when the client leaves",
}

var codeBlocks = []string{
	"```go\nctx, cancel := context.WithTimeoutCause(ctx, 5*time.Second, errFirstToken)\ndefer cancel()\n```",
	"```sh\ncurl -N http://127.0.0.1:8080/v1/chat -d '{\"message\":\"hi\"}'\n```",
}

// answer returns a readable answer of roughly n tokens, drawn from rng.
func answer(rng *rand.Rand, n int) string {
	var b strings.Builder
	tokens := 0
	para := 0
	for tokens < n {
		switch r := rng.IntN(10); {
		case r == 0 && tokens > 20:
			b.WriteString("\n\n")
			b.WriteString(listIntros[rng.IntN(len(listIntros))])
			b.WriteString("\n\n")
			for i, k := 0, 2+rng.IntN(3); i < k; i++ {
				b.WriteString("- ")
				b.WriteString(listItems[rng.IntN(len(listItems))])
				b.WriteString("\n")
			}
			b.WriteString("\n")
			tokens += 20
			para = 0
		case r == 1 && tokens > 40:
			b.WriteString("\n\n")
			b.WriteString(codeBlocks[rng.IntN(len(codeBlocks))])
			b.WriteString("\n\n")
			tokens += 30
			para = 0
		default:
			s := sentences[rng.IntN(len(sentences))]
			if para > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(s)
			tokens += len(tokenize(s))
			para++
			if para >= 3+rng.IntN(2) {
				b.WriteString("\n\n")
				para = 0
			}
		}
	}
	return strings.TrimSpace(b.String())
}

// tokenize splits text into token-sized pieces the way BPE tokenizers do
// for English: a word with its leading space, a run of punctuation, or a
// run of newlines.
func tokenize(s string) []string {
	var out []string
	i := 0
	for i < len(s) {
		j := i
		for j < len(s) && s[j] == ' ' {
			j++
		}
		switch {
		case j < len(s) && s[j] == '\n':
			for j < len(s) && s[j] == '\n' {
				j++
			}
		case j < len(s) && isWord(s[j]):
			for j < len(s) && isWord(s[j]) {
				j++
			}
		case j < len(s):
			j++
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80 || c == '\''
}

// thoughts is the bank thinking is drawn from: a model working out how to
// answer, in the first person, as thinking summaries read.
var thoughts = []string{
	"Let me work out what is really being asked here.",
	"The question is mostly about where the time goes before the first word appears.",
	"I should check whether streaming alone answers it, or whether the answer also needs to be shorter.",
	"First, the stages: the input check, the context, the model's time to first token, then the writing.",
	"The model's writing dominates the total, but the first word is what the reader feels.",
	"Maybe a smaller model would do; I should weigh that against the quality needed.",
	"Hmm, the percentile matters more than the mean, so I will frame the numbers at p95.",
	"A cached prompt prefix would shorten the start; worth a sentence.",
	"I need to keep the answer short, since every extra token is time the reader waits for the end.",
	"Wait, the timeout question is separate: a first-token timeout catches a stuck call early.",
	"Let me order the levers from the largest saving to the smallest.",
	"Parallel steps cost only the slowest of them, so that goes near the top.",
	"I think a short list followed by one example reads best.",
	"Let me double-check that nothing here contradicts the budget I set out first.",
	"Okay, I have enough to answer plainly.",
}

// thinking returns exactly n tokens of readable thinking, drawn from rng.
func thinking(rng *rand.Rand, n int) []string {
	if n <= 0 {
		return nil
	}
	var b strings.Builder
	tokens := 0
	for i := 0; tokens < n; i++ {
		s := thoughts[rng.IntN(len(thoughts))]
		switch {
		case i == 0:
		case rng.IntN(4) == 0:
			b.WriteString("\n\n")
		default:
			b.WriteByte(' ')
		}
		b.WriteString(s)
		tokens += len(tokenize(s))
	}
	toks := tokenize(b.String())
	return toks[:min(n, len(toks))]
}
