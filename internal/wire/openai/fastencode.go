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
func encodeSimpleRequest(req *chat.Request, maxTokensField string) (b []byte, ok bool) {
	if len(req.Tools) > 0 || req.ToolChoice != nil || len(req.ResponseFormat) > 0 || len(req.Extra) > 0 ||
		len(req.Stop) > 0 || req.ParallelToolCalls != nil ||
		(maxTokensField != "max_tokens" && maxTokensField != "max_completion_tokens") ||
		!finite(req.Temperature) || !finite(req.TopP) {
		return nil, false
	}
	size := 128 + len(req.Model) + len(req.User)
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Name != "" || m.ToolCallID != "" || len(m.ToolCalls) > 0 || len(m.Parts) > 0 {
			return nil, false
		}
		size += 32 + len(m.Role) + len(m.Content)
	}
	b = make([]byte, 0, size)
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
	if req.N > 1 {
		b = append(b, `,"n":`...)
		b = strconv.AppendInt(b, int64(req.N), 10)
	}
	if req.Seed != nil {
		b = append(b, `,"seed":`...)
		b = strconv.AppendInt(b, *req.Seed, 10)
	}
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
func finite(f *float64) bool {
	return f == nil || !math.IsNaN(*f) && !math.IsInf(*f, 0)
}
