package openai

import (
	"math"
	"strconv"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonenc"
)

// encodeSimpleRequest is EncodeRequest for the common request (messages
// of a role and text, sampling numbers, a user), written without
// reflection. It produces exactly EncodeRequest's bytes, keys in the
// sorted order encoding/json gives a map (FuzzEncodeSimpleRequest
// checks); ok is false for any other request.
//
// Every request sent upstream goes through here before its first token,
// and encoding/json's map encoding (reflection, then sorting the keys)
// is most of what EncodeRequest costs; the common request is written
// directly instead.
func encodeSimpleRequest(req *chat.Request, maxTokensField string) (b []byte, ok bool) {
	// Anything beyond text messages and the plain scalar fields goes the
	// general way: tools, formats and Extra carry JSON of the client's
	// own, and a non-finite number is an error only json.Marshal words.
	if len(req.Tools) > 0 || req.ToolChoice != nil || len(req.ResponseFormat) > 0 || len(req.Extra) > 0 ||
		len(req.Stop) > 0 || req.ParallelToolCalls != nil ||
		(maxTokensField != "max_tokens" && maxTokensField != "max_completion_tokens") ||
		!finite(req.Temperature) || !finite(req.TopP) {
		return nil, false
	}
	// One allocation: the keys and punctuation fit in the fixed parts,
	// and strings grow only by their escapes, which are rare in prompts.
	effort := reasoningEffort(req.Thinking)
	size := 160 + len(req.Model) + len(req.User) + len(effort)
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Name != "" || m.ToolCallID != "" || len(m.ToolCalls) > 0 || len(m.Parts) > 0 {
			return nil, false
		}
		size += 32 + len(m.Role) + len(m.Content)
	}
	b = make([]byte, 0, size)
	// From here on, keys in sorted order, as json.Marshal writes a map:
	// max_completion_tokens or max_tokens, messages, model, n,
	// reasoning_effort, seed, stream, stream_options, temperature, top_p,
	// user.
	b = append(b, '{')
	if req.MaxTokens > 0 {
		b = append(b, '"')
		b = append(b, maxTokensField...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
		b = append(b, ',')
	}
	b = append(b, `"messages":[`...)
	for i := range req.Messages {
		m := &req.Messages[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = jsonenc.AppendString(b, string(m.Role))
		b = append(b, `,"content":`...)
		b = jsonenc.AppendString(b, m.Content)
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = jsonenc.AppendString(b, req.Model)
	// n only when more than one answer is asked for, as in
	// encodeRequest: 1 is every server's default.
	if req.N > 1 {
		b = append(b, `,"n":`...)
		b = strconv.AppendInt(b, int64(req.N), 10)
	}
	if effort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = jsonenc.AppendString(b, effort)
	}
	if req.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *req.Seed, 10)
	}
	// Always streamed, always with usage, whatever the client asked:
	// firstword times the first token and meters every answer.
	b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	if req.Temperature != nil {
		b = append(b, `,"temperature":`...)
		b = jsonenc.AppendFloat(b, *req.Temperature)
	}
	if req.TopP != nil {
		b = append(b, `,"top_p":`...)
		b = jsonenc.AppendFloat(b, *req.TopP)
	}
	if req.User != "" {
		b = append(b, `,"user":`...)
		b = jsonenc.AppendString(b, req.User)
	}
	return append(b, '}'), true
}

// finite reports whether f is absent or a number encoding/json encodes.
// json.Marshal fails on NaN and the infinities, and that error must stay
// EncodeRequest's: such a request takes the general path.
func finite(f *float64) bool {
	return f == nil || !math.IsNaN(*f) && !math.IsInf(*f, 0)
}
