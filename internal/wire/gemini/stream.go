package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/sse"
)

// Response is a GenerateContentResponse, one per stream event.
type Response struct {
	Candidates     []Candidate     `json:"candidates"`
	PromptFeedback *PromptFeedback `json:"promptFeedback"`
	UsageMetadata  *UsageMetadata  `json:"usageMetadata"`
	ModelVersion   string          `json:"modelVersion"`
	// Error is set when the server reports a failure inside the stream.
	Error *ErrorBody `json:"error"`
}

// Candidate is one of the response's alternatives.
type Candidate struct {
	Content      *Content `json:"content"`
	FinishReason string   `json:"finishReason"`
	// Index is omitted for candidate 0 (proto3 JSON omits zero values).
	Index *int `json:"index"`
}

// PromptFeedback says whether the prompt was blocked.
type PromptFeedback struct {
	BlockReason string `json:"blockReason"`
}

// UsageMetadata counts tokens. The counts are totals so far: each event
// repeats them, updated.
type UsageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

// Usage converts the counts. Prompt tokens include cached ones (as
// chat.Usage wants) and the prompt tokens of built-in tool results, which
// Gemini bills as input; output tokens include the thinking tokens, which
// Gemini counts apart from the candidates' tokens.
func (u *UsageMetadata) Usage() *chat.Usage {
	return &chat.Usage{
		InputTokens:       u.PromptTokenCount + u.ToolUsePromptTokenCount,
		OutputTokens:      u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CachedInputTokens: u.CachedContentTokenCount,
		ReasoningTokens:   u.ThoughtsTokenCount,
	}
}

// NormalizeFinishReason maps a candidate's finishReason onto firstword's.
// Unknown values (MALFORMED_FUNCTION_CALL, LANGUAGE, OTHER...) pass through
// in lower case.
func NormalizeFinishReason(s string) chat.FinishReason {
	switch s {
	case "STOP":
		return chat.FinishStop
	case "MAX_TOKENS":
		return chat.FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return chat.FinishContentFilter
	}
	return chat.FinishReason(strings.ToLower(s))
}

// ReadStream decodes a streamGenerateContent?alt=sse response from r.
//
// Each event is a GenerateContentResponse. Candidate i becomes Chunk.Choice
// i; its text parts become Text (thought parts are skipped: they are not
// the answer) and each functionCall part a complete ToolCallDelta, indexed
// by its order among the candidate's calls, with the call's id or, when
// Gemini gives none (it usually does not), a generated "call_<n>" that is
// unique within the stream. Other parts (inline data, executable code and
// its results) are not part of the chat vocabulary and are skipped.
//
// Gemini streams have no terminal event: a stream is complete when it ends
// after every candidate it named has had a finishReason. Finish reasons are
// held back until then and yielded, the last with the usage (the last
// usageMetadata: the counts are running totals), so a stream that breaks
// after its finish reason is still reported as broken. A stream that ends
// early, or that carries malformed JSON, invalid UTF-8 or an oversized
// event, yields a protocol error; an error object in the stream and a
// blocked prompt yield a classified *chat.Error.
func ReadStream(r io.Reader, maxEventSize int) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		rd := sse.NewReader(r, maxEventSize)
		var (
			resp      Response
			usage     *chat.Usage
			model     string
			modelSent bool
			events    int
			calls     int // function calls in the stream, for IDs
			perChoice = map[int]*choiceState{}
			held      []chat.Chunk
			out       []chat.Chunk
		)
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if err == io.ErrUnexpectedEOF {
					err = fmt.Errorf("%w: stream ended inside an event after %d events", chat.ErrTruncated, events)
				}
				yield(chat.Chunk{}, protocolError(err))
				return
			}
			data := ev.Data
			if len(bytes.TrimSpace(data)) == 0 {
				continue
			}
			if !utf8.Valid(data) {
				yield(chat.Chunk{}, protocolError(errors.New("upstream sent invalid UTF-8")))
				return
			}
			resp = Response{}
			if err := json.Unmarshal(data, &resp); err != nil {
				yield(chat.Chunk{}, protocolError(fmt.Errorf("upstream sent a malformed event: %v", err)))
				return
			}
			events++
			if resp.Error != nil {
				yield(chat.Chunk{}, errorFromBody(0, resp.Error))
				return
			}
			if fb := resp.PromptFeedback; fb != nil && fb.BlockReason != "" && len(resp.Candidates) == 0 {
				yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryContentFilter, Message: "the prompt was blocked: " + fb.BlockReason})
				return
			}
			if resp.UsageMetadata != nil {
				usage = resp.UsageMetadata.Usage()
			}
			if model == "" {
				model = resp.ModelVersion
			}
			out = out[:0]
			for i := range resp.Candidates {
				c := &resp.Candidates[i]
				idx := i
				if c.Index != nil {
					idx = *c.Index
				}
				if idx < 0 || idx >= chat.MaxChoices {
					yield(chat.Chunk{}, protocolError(fmt.Errorf("upstream sent candidate index %d", idx)))
					return
				}
				st := perChoice[idx]
				if st == nil {
					st = &choiceState{}
					perChoice[idx] = st
				}
				ch := chat.Chunk{Choice: idx}
				if c.Content != nil {
					var text strings.Builder
					for _, p := range c.Content.Parts {
						if p.FunctionCall != nil {
							if st.calls >= chat.MaxToolCalls {
								yield(chat.Chunk{}, protocolError(fmt.Errorf("upstream sent more than %d function calls", chat.MaxToolCalls)))
								return
							}
							ch.ToolCalls = append(ch.ToolCalls, toolCallDelta(p.FunctionCall, st.calls, calls))
							st.calls++
							calls++
							continue
						}
						if !p.Thought {
							text.WriteString(p.Text)
						}
					}
					ch.Text = text.String()
				}
				if c.FinishReason != "" {
					st.finished = true
					fr := NormalizeFinishReason(c.FinishReason)
					if fr == chat.FinishStop && st.calls > 0 {
						fr = chat.FinishToolCalls
					}
					held = append(held, chat.Chunk{Choice: idx, FinishReason: fr})
				}
				if ch.Visible() {
					out = append(out, ch)
				}
			}
			if !modelSent && model != "" {
				if len(out) == 0 {
					out = append(out, chat.Chunk{})
				}
				out[0].Model = model
				modelSent = true
			}
			more := rd.EventBuffered()
			for i := range out {
				out[i].More = more || i < len(out)-1
				if !yield(out[i], nil) {
					return
				}
			}
		}
		// The body ended cleanly: the stream is complete if every
		// candidate it named finished.
		if events == 0 {
			yield(chat.Chunk{}, protocolError(fmt.Errorf("%w: empty stream", chat.ErrTruncated)))
			return
		}
		if len(perChoice) == 0 {
			yield(chat.Chunk{}, protocolError(fmt.Errorf("%w: no candidates in %d events", chat.ErrTruncated, events)))
			return
		}
		for idx := range chat.MaxChoices {
			if st := perChoice[idx]; st != nil && !st.finished {
				yield(chat.Chunk{}, protocolError(fmt.Errorf("%w: candidate %d has no finishReason", chat.ErrTruncated, idx)))
				return
			}
		}
		held[len(held)-1].Usage = usage
		for i := range held {
			if !yield(held[i], nil) {
				return
			}
		}
	}
}

type choiceState struct {
	calls    int
	finished bool
}

// toolCallDelta turns a function call into a complete delta. Its arguments
// are compacted, so that they read the same whatever spacing Gemini used.
func toolCallDelta(fc *FunctionCall, index, ordinal int) chat.ToolCallDelta {
	id := fc.ID
	if id == "" {
		id = "call_" + strconv.Itoa(ordinal)
	}
	args := "{}"
	if len(fc.Args) > 0 && string(fc.Args) != "null" {
		var b bytes.Buffer
		if json.Compact(&b, fc.Args) == nil {
			args = b.String()
		}
	}
	return chat.ToolCallDelta{Index: index, ID: id, Name: fc.Name, Arguments: args}
}

func protocolError(err error) error {
	return &chat.Error{Category: chat.CategoryProtocol, Message: err.Error(), Retryable: true, Err: err}
}
