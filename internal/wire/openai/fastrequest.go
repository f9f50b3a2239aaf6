package openai

import (
	"strconv"

	"github.com/firstword/firstword/internal/chat"
)

// parseSimpleRequest decodes the common shape of a request in one pass,
// without reflection: model, stream, stream_options, max_tokens,
// max_completion_tokens, temperature, top_p, n, seed, user, and messages
// that have only a role and string content. It is on the path of every
// first token, which it reaches some tens of microseconds sooner than
// encoding/json on a cold cache.
//
// ok is false for anything else (another field, a null, a repeated key,
// an escaped key, content parts, a tool message, a value ParseRequest
// would refuse), which ParseRequest then decodes in full. When ok, the
// result is exactly ParseRequest's (FuzzParseSimpleRequest checks).
func parseSimpleRequest(body []byte) (*ParsedRequest, bool) {
	s := scanner{b: body}
	req := &chat.Request{}
	out := &ParsedRequest{Request: req}
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
	)
	err := s.object(func(key []byte) error {
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
		default:
			return errSlowPath
		}
		if seen&f != 0 || s.null() {
			return errSlowPath
		}
		seen |= f
		var err error
		switch f {
		case fModel:
			req.Model, err = s.str()
		case fStream:
			out.Stream, err = s.boolean()
		case fStreamOptions:
			streamOptions = true
			err = s.object(func(key []byte) error {
				if string(key) != "include_usage" || s.null() {
					return errSlowPath
				}
				var err error
				out.IncludeUsage, err = s.boolean()
				return err
			})
		case fMessages:
			err = s.array(func() error {
				m, err := s.simpleMessage()
				req.Messages = append(req.Messages, m)
				return err
			})
		case fMaxTokens:
			err = s.integer(&maxTokens)
		case fMaxCompletion:
			err = s.integer(&maxCompletion)
		case fTemperature:
			req.Temperature, err = s.float()
		case fTopP:
			req.TopP, err = s.float()
		case fN:
			err = s.integer(&req.N)
		case fSeed:
			var n int
			if err = s.integer(&n); err == nil {
				seed := int64(n)
				req.Seed = &seed
			}
		case fUser:
			req.User, err = s.str()
		}
		return err
	})
	if err != nil || s.peek() != 0 || s.i != len(s.b) {
		return nil, false
	}
	// What ParseRequest would refuse, it refuses itself, with its words.
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
	if seen&fMaxCompletion != 0 {
		req.MaxTokens = maxCompletion
	} else if seen&fMaxTokens != 0 {
		req.MaxTokens = maxTokens
	}
	return out, true
}

// simpleMessage decodes a message with only a role and string content.
func (s *scanner) simpleMessage() (chat.Message, error) {
	var m chat.Message
	var role string
	var haveRole, haveContent bool
	err := s.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "role":
			if haveRole {
				return errSlowPath
			}
			haveRole = true
			role, err = s.str()
		case "content":
			if haveContent {
				return errSlowPath
			}
			haveContent = true
			m.Content, err = s.str()
		default:
			return errSlowPath
		}
		return err
	})
	if err != nil || !haveContent {
		return m, errSlowPath
	}
	switch role {
	case "system", "developer":
		m.Role = chat.RoleSystem
	case "user":
		m.Role = chat.RoleUser
	case "assistant":
		m.Role = chat.RoleAssistant
	default:
		return m, errSlowPath
	}
	return m, nil
}

// boolean decodes true or false.
func (s *scanner) boolean() (bool, error) {
	switch {
	case s.peek() == 't' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true, nil
	case s.peek() == 'f' && len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false, nil
	}
	return false, errSlowPath
}

// float decodes a number as encoding/json does into a float64.
func (s *scanner) float() (*float64, error) {
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return nil, errSlowPath
	}
	start := s.i
	if err := s.number(); err != nil {
		return nil, err
	}
	f, err := strconv.ParseFloat(string(s.b[start:s.i]), 64)
	if err != nil {
		return nil, errSlowPath
	}
	return &f, nil
}
