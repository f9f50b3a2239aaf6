package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/sse"
	"github.com/firstword/firstword/internal/wire/upstream"
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
// Unknown values (LANGUAGE, OTHER...) pass through in lower case; the
// stream reader turns MALFORMED_FUNCTION_CALL and UNEXPECTED_TOOL_CALL,
// which leave no answer, into errors.
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

// NewStreamReader returns a pull reader of a streamGenerateContent?alt=sse
// response from r (chat.Pull makes it a chat.Stream).
//
// Each event is a GenerateContentResponse. Candidate i becomes Chunk.Choice
// i; its text parts become Text, its thought parts Thinking (never the
// answer), a part's thoughtSignature a Thought (Format chat.ThinkingGemini)
// on the chunk of that part, and each functionCall part a complete
// ToolCallDelta, indexed
// by its order among the candidate's calls, with the call's id or, when
// Gemini gives none (it usually does not), a generated "call_<n>" that is
// unique within the stream. Other parts (inline data, executable code and
// its results) are not part of the chat vocabulary and are skipped.
//
// Gemini streams have no terminal event: a stream is complete at the event
// with usageMetadata in which the last of the candidates it named gets its
// finishReason (Gemini's last event; what follows is not read), or when it
// ends after every candidate finished. Finish reasons are held back until
// then and yielded, the last with the usage (the last usageMetadata: the
// counts are running totals), so a stream that breaks before its end is
// reported as broken even after a finish reason. A stream that ends
// early, or that carries malformed JSON, invalid UTF-8 or an oversized
// event, yields a protocol error; an error object in the stream and a
// blocked prompt yield a classified *chat.Error.
func NewStreamReader(r io.Reader, maxEventSize int) *StreamReader {
	rd := sse.NewReader(r, maxEventSize)
	// Gemini ends a failed stream with its error object written raw,
	// outside any data field: the lines the standard ignores are read.
	rd.ReturnUnknown(true)
	return &StreamReader{rd: rd, perChoice: map[int]*choiceState{}}
}

// StreamReader decodes a streamGenerateContent stream event by event (see
// NewStreamReader).
type StreamReader struct {
	// Candidates is how many candidates were asked for (candidateCount;
	// 0 means one). The stream does not end at an event before that many
	// were named and finished: a later event may name another.
	Candidates int

	rd        *sse.Reader
	resp      Response
	usage     *chat.Usage
	model     string
	modelSent bool
	events    int
	calls     int // function calls in the stream, for IDs
	perChoice map[int]*choiceState
	held      []chat.Chunk // finish reasons, yielded once the body ended
	queue     []chat.Chunk // chunks decoded but not returned yet
	next      int          // the next chunk of queue to return
	ended     bool         // the body ended and the stream is complete
	// final: every candidate finished, in an event with the usage; the
	// stream ends there, as it would with the body (Gemini has no end
	// marker, and its last event is this one)
	final bool
	// cut: the event being decoded is the one the body ended inside,
	// taken only if it is the stream's last (see nextEvent)
	cut    bool
	raw    rawJSON // a JSON value outside any event, line by line
	out    chat.Chunk
	ending upstream.Ending
}

// Next returns the next chunk, io.EOF after the last, or the error that
// ends the stream. The chunk is the reader's own, valid until the next
// call.
func (s *StreamReader) Next() (*chat.Chunk, error) {
	if err := s.ending.Ended(); err != nil {
		return nil, err
	}
	return s.ending.Keep(s.pull())
}

func (s *StreamReader) pull() (*chat.Chunk, error) {
	for {
		if s.next < len(s.queue) {
			s.out = s.queue[s.next]
			s.next++
			return &s.out, nil
		}
		if s.ended {
			return nil, io.EOF
		}
		if s.final {
			// The answer is complete: a response kept open after it is
			// not waited for.
			if err := s.end(); err != nil {
				return nil, err
			}
			continue
		}
		ev, err := s.nextEvent()
		if err == io.EOF {
			if err := s.end(); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			continue
		}
		// Decoded here, not in event: the decode is the deepest moment
		// of a stream, and event's frame is large.
		if !utf8.Valid(ev.Data) {
			return nil, chat.ProtocolError(errors.New("upstream sent invalid UTF-8"))
		}
		if err := decodeResponse(ev.Data, &s.resp); err != nil {
			return nil, chat.ProtocolError(fmt.Errorf("upstream sent a malformed event: %v", err))
		}
		if err := s.event(); err != nil {
			return nil, err
		}
		if s.cut && !s.final {
			return nil, s.cutInside()
		}
	}
}

// event turns the decoded event into queued chunks.
func (s *StreamReader) event() error {
	resp := &s.resp
	s.events++
	if resp.Error != nil {
		return errorFromBody(0, resp.Error)
	}
	if fb := resp.PromptFeedback; fb != nil && fb.BlockReason != "" && len(resp.Candidates) == 0 {
		return &chat.Error{Category: chat.CategoryContentFilter, Message: "the prompt was blocked: " + fb.BlockReason}
	}
	if resp.UsageMetadata != nil {
		s.usage = resp.UsageMetadata.Usage()
	}
	if s.model == "" {
		s.model = resp.ModelVersion
	}
	s.queue, s.next = s.queue[:0], 0
	for i := range resp.Candidates {
		c := &resp.Candidates[i]
		idx := i
		if c.Index != nil {
			idx = *c.Index
		}
		if idx < 0 || idx >= chat.MaxChoices {
			return chat.ProtocolError(fmt.Errorf("upstream sent candidate index %d", idx))
		}
		st := s.perChoice[idx]
		if st == nil {
			st = &choiceState{}
			s.perChoice[idx] = st
		}
		ch := chat.Chunk{Choice: idx}
		if c.Content != nil {
			var text, thinking joiner
			for i := range c.Content.Parts {
				p := &c.Content.Parts[i]
				if ch.Thought != nil && (p.Thought || p.ThoughtSignature != "") {
					// A second signature, or thinking after one, in the
					// same event: the chunk so far goes first, so that
					// each signature closes the thinking before it.
					ch.Text, ch.Thinking = text.String(), thinking.String()
					s.queue = append(s.queue, ch)
					ch = chat.Chunk{Choice: idx}
					text, thinking = joiner{}, joiner{}
				}
				if p.ThoughtSignature != "" {
					ch.Thought = &chat.Thought{Signature: p.ThoughtSignature, Format: chat.ThinkingGemini}
				}
				switch {
				case p.FunctionCall != nil:
					if st.calls >= chat.MaxToolCalls {
						return chat.ProtocolError(fmt.Errorf("upstream sent more than %d function calls", chat.MaxToolCalls))
					}
					ch.ToolCalls = append(ch.ToolCalls, upstream.ToolCall(st.calls, s.calls, p.FunctionCall.ID, p.FunctionCall.Name, p.FunctionCall.Args))
					st.calls++
					s.calls++
				case p.Thought:
					thinking.add(p.Text)
				default:
					text.add(p.Text)
				}
			}
			ch.Text, ch.Thinking = text.String(), thinking.String()
		}
		if c.FinishReason == "MALFORMED_FUNCTION_CALL" || c.FinishReason == "UNEXPECTED_TOOL_CALL" {
			// The model failed to call a tool: there is no answer, and
			// another try may well produce one.
			return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Retryable: true,
				Message: "the model produced an unusable function call (Gemini finishReason " + c.FinishReason + ")"}
		}
		if c.FinishReason != "" {
			st.finished = true
			fr := NormalizeFinishReason(c.FinishReason)
			if fr == chat.FinishStop && st.calls > 0 {
				fr = chat.FinishToolCalls
			}
			// Gemini may name it again in a later event.
			s.held = upstream.Hold(s.held, idx, fr)
		}
		if ch.Visible() || ch.Thinks() {
			s.queue = append(s.queue, ch)
		}
	}
	if !s.modelSent && s.model != "" {
		if len(s.queue) == 0 {
			s.queue = append(s.queue, chat.Chunk{})
		}
		s.queue[0].Model = s.model
		s.modelSent = true
	}
	s.final = resp.UsageMetadata != nil && len(s.perChoice) >= max(s.Candidates, 1) && s.allFinished()
	more := s.rd.EventBuffered() || s.final
	for i := range s.queue {
		s.queue[i].More = more || i < len(s.queue)-1
	}
	return nil
}

// end checks, once the body ended cleanly, that the stream is complete
// (every candidate it named finished) and queues the held finish reasons,
// the last with the usage.
func (s *StreamReader) end() error {
	if s.events == 0 {
		return chat.ProtocolError(fmt.Errorf("%w: empty stream", chat.ErrTruncated))
	}
	if len(s.perChoice) == 0 {
		return chat.ProtocolError(fmt.Errorf("%w: no candidates in %d events", chat.ErrTruncated, s.events))
	}
	for idx := range chat.MaxChoices {
		if st := s.perChoice[idx]; st != nil && !st.finished {
			return chat.ProtocolError(fmt.Errorf("%w: candidate %d has no finishReason", chat.ErrTruncated, idx))
		}
	}
	s.held[len(s.held)-1].Usage = s.usage
	s.queue, s.next, s.ended = s.held, 0, true
	return nil
}

// allFinished reports whether the stream named candidates and every one
// has finished.
func (s *StreamReader) allFinished() bool {
	for _, st := range s.perChoice {
		if !st.finished {
			return false
		}
	}
	return len(s.perChoice) > 0
}

// joiner joins the texts of an event's parts: one part's text is used as
// decoded, without a copy (an event almost always has one).
type joiner struct {
	first string
	rest  strings.Builder
}

func (j *joiner) add(s string) {
	switch {
	case s == "":
	case j.first == "":
		j.first = s
	default:
		if j.rest.Len() == 0 {
			j.rest.WriteString(j.first)
		}
		j.rest.WriteString(s)
	}
}

func (j *joiner) String() string {
	if j.rest.Len() > 0 {
		return j.rest.String()
	}
	return j.first
}

type choiceState struct {
	calls    int
	finished bool
}

// decodeResponse decodes one event into r exactly as json.Unmarshal would
// (FuzzDecodeResponse checks this), a level at a time: the candidates,
// each candidate's content and each content's parts are kept raw and
// decoded on their own. encoding/json's recursion through a whole event
// (about 0.9 KiB a nested object) would take a stream's goroutine past an
// 8 KiB stack, under the frames of the handler and the router above it.
//
// An event with a repeated member at those levels (which Gemini never
// sends), or one the levels refuse, is decoded by json.Unmarshal whole:
// its result and error are then encoding/json's by construction.
func decodeResponse(data []byte, r *Response) error {
	if decodeLevels(data, r) == nil {
		return nil
	}
	*r = Response{}
	return json.Unmarshal(data, r)
}

// errRepeated sends an event with a repeated member to json.Unmarshal.
var errRepeated = errors.New("repeated member")

func decodeLevels(data []byte, r *Response) error {
	var top struct {
		Candidates     rawValues       `json:"candidates"`
		PromptFeedback *PromptFeedback `json:"promptFeedback"`
		UsageMetadata  *UsageMetadata  `json:"usageMetadata"`
		ModelVersion   string          `json:"modelVersion"`
		Error          *ErrorBody      `json:"error"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return err
	}
	if len(top.Candidates) > 1 {
		return errRepeated
	}
	*r = Response{PromptFeedback: top.PromptFeedback, UsageMetadata: top.UsageMetadata, ModelVersion: top.ModelVersion, Error: top.Error}
	var lcs []lazyCandidate
	for _, raw := range top.Candidates {
		if err := json.Unmarshal(raw, &lcs); err != nil {
			return err
		}
	}
	if lcs != nil {
		r.Candidates = make([]Candidate, len(lcs))
	}
	for i := range lcs {
		if err := lcs[i].decode(&r.Candidates[i]); err != nil {
			return err
		}
	}
	return nil
}

type lazyCandidate struct {
	Content      rawValues `json:"content"`
	FinishReason string    `json:"finishReason"`
	Index        *int      `json:"index"`
}

type lazyContent struct {
	Role  string    `json:"role"`
	Parts rawValues `json:"parts"`
}

func (lc *lazyCandidate) decode(c *Candidate) error {
	if len(lc.Content) > 1 {
		return errRepeated
	}
	c.FinishReason, c.Index = lc.FinishReason, lc.Index
	var content *lazyContent
	for _, raw := range lc.Content {
		if string(raw) == "null" {
			content = nil
			continue
		}
		if content == nil {
			content = new(lazyContent)
		}
		if err := json.Unmarshal(raw, content); err != nil {
			return err
		}
	}
	if content == nil {
		return nil
	}
	if len(content.Parts) > 1 {
		return errRepeated
	}
	c.Content = &Content{Role: content.Role}
	for _, raw := range content.Parts {
		if err := json.Unmarshal(raw, &c.Content.Parts); err != nil {
			return err
		}
	}
	return nil
}

// rawValues keeps every occurrence of a member, raw: slices of the event
// being decoded, which encoding/json does not modify and decodeResponse
// does not keep past its return.
type rawValues []json.RawMessage

func (r *rawValues) UnmarshalJSON(b []byte) error {
	*r = append(*r, b)
	return nil
}
