package openai

import (
	"slices"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonscan"
)

// parseSimpleRequest decodes the common shape of a request in one pass,
// without reflection: model, stream, stream_options, max_tokens,
// max_completion_tokens, temperature, top_p, n, seed, user,
// reasoning_effort (what reasoning models' clients send), and messages
// that have only a role and string content. It is on the path of every
// first token, which it reaches some tens of microseconds sooner than
// encoding/json on a cold cache.
//
// ok is false for anything else (another field, a null, a repeated key,
// an escaped key, content parts, a tool message, a value ParseRequest
// would refuse), which ParseRequest then decodes in full. When ok, the
// result is exactly ParseRequest's (FuzzParseSimpleRequest checks).
func parseSimpleRequest(body []byte) (*ParsedRequest, bool) {
	s := jsonscan.New(body)
	req := &chat.Request{}
	out := &ParsedRequest{Request: req}
	// seen has a bit per field read, so that a repeated key declines:
	// ParseRequest keeps the last one, and matching that here is not
	// worth it for a request no SDK sends.
	var (
		seen                     uint16
		maxTokens, maxCompletion int
		streamOptions            bool
	)
	const (
		fModel = 1 << iota
		fStream
		fStreamOptions
		fMessages
		fMaxTokens
		fMaxCompletion
		fTemperature
		fTopP
		fN
		fSeed
		fUser
		fEffort
	)
	err := s.Object(func(key []byte) error {
		var f uint16
		switch string(key) {
		case "model":
			f = fModel
		case "stream":
			f = fStream
		case "stream_options":
			f = fStreamOptions
		case "messages":
			f = fMessages
		case "max_tokens":
			f = fMaxTokens
		case "max_completion_tokens":
			f = fMaxCompletion
		case "temperature":
			f = fTemperature
		case "top_p":
			f = fTopP
		case "n":
			f = fN
		case "seed":
			f = fSeed
		case "user":
			f = fUser
		case "reasoning_effort":
			f = fEffort
		default:
			return jsonscan.ErrUnhandled
		}
		// null declines too: ParseRequest reads it as absent, which each
		// field here would have to special-case, for requests SDKs
		// rarely send.
		if seen&f != 0 || s.Null() {
			return jsonscan.ErrUnhandled
		}
		seen |= f
		var err error
		switch f {
		case fModel:
			req.Model, err = s.Str()
		case fStream:
			err = s.Bool(&out.Stream)
		case fStreamOptions:
			// Only include_usage: include_obfuscation, the other member
			// ParseRequest allows, and any it refuses go the full way.
			streamOptions = true
			err = s.Object(func(key []byte) error {
				if string(key) != "include_usage" || s.Null() {
					return jsonscan.ErrUnhandled
				}
				return s.Bool(&out.IncludeUsage)
			})
		case fMessages:
			err = s.Array(func() error {
				m, err := simpleMessage(&s)
				req.Messages = append(req.Messages, m)
				return err
			})
		case fMaxTokens:
			err = s.Int(&maxTokens)
		case fMaxCompletion:
			err = s.Int(&maxCompletion)
		case fTemperature:
			req.Temperature = new(float64)
			err = s.Float(req.Temperature)
		case fTopP:
			req.TopP = new(float64)
			err = s.Float(req.TopP)
		case fN:
			err = s.Int(&req.N)
		case fSeed:
			// Int reads up to 15 digits, well inside int64: a longer seed
			// declines, and encoding/json decides whether it fits.
			var n int
			if err = s.Int(&n); err == nil {
				seed := int64(n)
				req.Seed = &seed
			}
		case fUser:
			req.User, err = s.Str()
		case fEffort:
			// An effort parseThinking refuses, or "" (no ask), declines.
			var effort string
			if effort, err = s.Str(); err == nil {
				if effort == "" || !slices.Contains(chat.Efforts, effort) {
					return jsonscan.ErrUnhandled
				}
				req.Thinking = &chat.ThinkingAsk{Effort: effort}
			}
		}
		return err
	})
	if err != nil || !s.End() {
		return nil, false
	}
	// What ParseRequest would refuse is left to it, so that the client
	// gets its error, with its words and its Param.
	switch {
	case req.Model == "" || len(req.Messages) == 0:
		return nil, false
	case streamOptions && !out.Stream:
		return nil, false
	case seen&fMaxTokens != 0 && maxTokens < 1, seen&fMaxCompletion != 0 && maxCompletion < 1:
		return nil, false
	case req.Temperature != nil && (*req.Temperature < 0 || *req.Temperature > 2):
		return nil, false
	case seen&fN != 0 && (req.N < 1 || req.N > 128):
		return nil, false
	}
	out.StreamOptions = streamOptions
	// max_completion_tokens, OpenAI's newer name, wins over max_tokens
	// when a client sends both, as in ParseRequest.
	if seen&fMaxCompletion != 0 {
		req.MaxTokens = maxCompletion
	} else if seen&fMaxTokens != 0 {
		req.MaxTokens = maxTokens
	}
	return out, true
}

// simpleMessage decodes a message with only a role and string content.
// Anything else a message may carry (name, tool_calls, content parts, a
// tool role and its tool_call_id) declines, and with it the request:
// those are checked by Message.toChat, which this does not repeat.
func simpleMessage(s *jsonscan.Scanner) (chat.Message, error) {
	var m chat.Message
	var role string
	var haveRole, haveContent bool
	err := s.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "role":
			if haveRole {
				return jsonscan.ErrUnhandled
			}
			haveRole = true
			role, err = s.Str()
		case "content":
			if haveContent {
				return jsonscan.ErrUnhandled
			}
			haveContent = true
			m.Content, err = s.Str()
		default:
			return jsonscan.ErrUnhandled
		}
		return err
	})
	// A message without content is an error for most roles and not for
	// an assistant's tool-call turn: toChat decides.
	if err != nil || !haveContent {
		return m, jsonscan.ErrUnhandled
	}
	// A tool message declines: its tool_call_id is toChat's to check.
	r, ok := chatRole(role)
	if !ok || r == chat.RoleTool {
		return m, jsonscan.ErrUnhandled
	}
	m.Role = r
	return m, nil
}
