package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/jsonenc"
	"github.com/firstword/firstword/internal/wire/gemini"
)

// serveGemini is the Gemini API's POST /v1beta/models/{model}:streamGenerateContent
// (server-sent events with ?alt=sse) and :generateContent. Thinking is
// shown as parts with "thought": true when thinkingConfig.includeThoughts
// is set; the signature rides on the first answer part, as
// thoughtSignature.
func (p *Provider) serveGemini(w http.ResponseWriter, r *http.Request) {
	call := r.PathValue("call")
	i := strings.LastIndexByte(call, ':')
	if i < 0 {
		i = len(call)
	}
	model, action := call[:i], strings.TrimPrefix(call[i:], ":")
	if action != "streamGenerateContent" && action != "generateContent" {
		writeGeminiError(w, &chat.Error{Category: chat.CategoryNotFound, Message: fmt.Sprintf("unknown method %q: want streamGenerateContent or generateContent", action)})
		return
	}
	p.serve(w, r, "text/event-stream", writeGeminiError, func(body []byte) (*parsed, error) {
		req, err := geminiRequest(model, body)
		if err != nil {
			return nil, err
		}
		return &parsed{req, action == "streamGenerateContent", askThinking(body, dialectGemini, req), &geminiStream{model: req.Model}}, nil
	})
}

// geminiRequest decodes what the sim reads of a GenerateContentRequest:
// the turns' text, function calls and responses, the system instruction,
// tools, the function-calling mode, candidateCount and maxOutputTokens.
func geminiRequest(model string, body []byte) (*chat.Request, error) {
	var in gemini.Request
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("request body: %v", err)
	}
	req := &chat.Request{Model: model}
	if si := in.SystemInstruction; si != nil {
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleSystem, Content: partsText(si.Parts)})
	}
	for _, c := range in.Contents {
		m := chat.Message{Role: chat.RoleUser, Content: partsText(c.Parts)}
		if c.Role == "model" {
			m.Role = chat.RoleAssistant
		}
		for _, part := range c.Parts {
			switch {
			case part.FunctionCall != nil:
				m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: part.FunctionCall.ID, Name: part.FunctionCall.Name, Arguments: string(part.FunctionCall.Args)})
			case part.FunctionResponse != nil:
				req.Messages = append(req.Messages, chat.Message{Role: chat.RoleTool, ToolCallID: part.FunctionResponse.Name, Content: string(part.FunctionResponse.Response)})
			}
		}
		if m.Content != "" || len(m.ToolCalls) > 0 {
			req.Messages = append(req.Messages, m)
		}
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("contents: required")
	}
	for _, t := range in.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, chat.Tool{Name: f.Name, Description: f.Description, Parameters: f.ParametersJSONSchema})
		}
	}
	if tc := in.ToolConfig; tc != nil && tc.FunctionCallingConfig.Mode == "ANY" && len(req.Tools) > 0 {
		req.ToolChoice = &chat.ToolChoice{Mode: "required"}
		if names := tc.FunctionCallingConfig.AllowedFunctionNames; len(names) > 0 {
			req.ToolChoice = &chat.ToolChoice{Mode: "tool", Name: names[0]}
		}
	}
	if gc := in.GenerationConfig; gc != nil {
		if gc.CandidateCount < 0 || gc.CandidateCount > 8 {
			return nil, fmt.Errorf("generationConfig.candidateCount: %d is not between 1 and 8", gc.CandidateCount)
		}
		req.MaxTokens, req.N = gc.MaxOutputTokens, gc.CandidateCount
	}
	return req, nil
}

// partsText joins a turn's text parts, thoughts left out.
func partsText(parts []gemini.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// writeGeminiError answers a failure with a google.rpc.Status.
func writeGeminiError(w http.ResponseWriter, e *chat.Error) {
	st := status(w, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	w.Write(appendGeminiError(nil, st, e.Message))
}

func appendGeminiError(b []byte, code int, message string) []byte {
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = jsonenc.AppendString(b, message)
	b = append(b, `,"status":"`...)
	b = append(b, geminiStatus(code)...)
	return append(b, `"}}`...)
}

// geminiStatus is the google.rpc code name the API gives an HTTP status.
func geminiStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "INTERNAL"
}

// geminiPart is one part of a candidate's content.
type geminiPart struct {
	text    string
	thought bool
	sig     string
	call    *chat.ToolCall
}

// geminiCandidate is one candidate of a response.
type geminiCandidate struct {
	index  int
	parts  []geminiPart
	finish chat.FinishReason
}

// geminiStream writes streamGenerateContent's events: one per chunk, a
// thought part for thinking, a text part for the answer (the first with
// the thinking's signature); function calls, which Gemini sends whole,
// are gathered and sent with the finish reason. The event with the last
// finish reason carries the usage, which ends a Gemini stream.
type geminiStream struct {
	model string
	sig   string    // the signature for the next answer part
	calls toolCalls // choice 0's calls so far
	parts [2]geminiPart
	cand  [1]geminiCandidate
}

func (e *geminiStream) chunk(b []byte, c *chat.Chunk) []byte {
	parts := e.parts[:0]
	if c.Thinking != "" {
		parts = append(parts, geminiPart{text: c.Thinking, thought: true})
	}
	if c.Thought != nil && c.Thought.Signature != "" {
		e.sig = c.Thought.Signature
	}
	if c.Text != "" {
		parts = append(parts, geminiPart{text: c.Text, sig: e.sig})
		e.sig = ""
	}
	if c.Choice == 0 {
		e.calls.add(c.ToolCalls)
	}
	if c.FinishReason == "" && len(parts) == 0 {
		return b
	}
	cand := geminiCandidate{index: c.Choice, parts: parts, finish: c.FinishReason}
	if c.FinishReason != "" && c.Choice == 0 {
		for i := range e.calls {
			cand.parts = append(cand.parts, geminiPart{call: &e.calls[i], sig: e.sig})
			e.sig = ""
		}
	}
	e.cand[0] = cand
	b = append(b, "data: "...)
	b = appendGeminiObject(b, e.model, e.cand[:], c.Usage)
	return append(b, "\n\n"...)
}

func (e *geminiStream) whole(w http.ResponseWriter, resp *chat.Response) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(appendGeminiResponse(nil, e.model, resp))
}

// end appends nothing: a Gemini stream ends with its last event.
func (e *geminiStream) end(b []byte, _ chat.FinishReason, _ *chat.Usage) []byte { return b }

func (e *geminiStream) fail(b []byte, ce *chat.Error) []byte {
	st := ce.Status
	if st == 0 {
		st = ce.HTTPStatus()
	}
	b = append(b, "data: "...)
	b = appendGeminiError(b, st, ce.Message)
	return append(b, "\n\n"...)
}

// appendGeminiResponse appends generateContent's answer: every choice as
// a candidate, its thinking (when kept) as one thought part.
func appendGeminiResponse(b []byte, model string, r *chat.Response) []byte {
	cands := make([]geminiCandidate, len(r.Choices))
	for i := range r.Choices {
		ch := &r.Choices[i]
		c := geminiCandidate{index: i, finish: ch.FinishReason}
		var sig string
		for _, t := range ch.Thinking {
			if t.Text != "" {
				c.parts = append(c.parts, geminiPart{text: t.Text, thought: true})
			}
			sig = t.Signature
		}
		if ch.Text != "" {
			c.parts = append(c.parts, geminiPart{text: ch.Text, sig: sig})
			sig = ""
		}
		for k := range ch.ToolCalls {
			c.parts = append(c.parts, geminiPart{call: &ch.ToolCalls[k], sig: sig})
			sig = ""
		}
		cands[i] = c
	}
	return appendGeminiObject(b, model, cands, r.Usage)
}

// appendGeminiObject appends a GenerateContentResponse.
func appendGeminiObject(b []byte, model string, cands []geminiCandidate, u *chat.Usage) []byte {
	b = append(b, `{"candidates":[`...)
	for i := range cands {
		c := &cands[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if len(c.parts) > 0 {
			b = append(b, `"content":{"parts":[`...)
			for k := range c.parts {
				if k > 0 {
					b = append(b, ',')
				}
				b = appendGeminiPart(b, &c.parts[k])
			}
			b = append(b, `],"role":"model"},`...)
		}
		if c.finish != "" {
			b = append(b, `"finishReason":"`...)
			b = append(b, geminiFinish(c.finish)...)
			b = append(b, `",`...)
		}
		b = append(b, `"index":`...)
		b = strconv.AppendInt(b, int64(c.index), 10)
		b = append(b, '}')
	}
	b = append(b, ']')
	if u != nil {
		b = append(b, `,"usageMetadata":{"promptTokenCount":`...)
		b = strconv.AppendInt(b, int64(u.InputTokens), 10)
		b = append(b, `,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, int64(u.OutputTokens-u.ReasoningTokens), 10)
		if u.CachedInputTokens > 0 {
			b = append(b, `,"cachedContentTokenCount":`...)
			b = strconv.AppendInt(b, int64(u.CachedInputTokens), 10)
		}
		if u.ReasoningTokens > 0 {
			b = append(b, `,"thoughtsTokenCount":`...)
			b = strconv.AppendInt(b, int64(u.ReasoningTokens), 10)
		}
		b = append(b, `,"totalTokenCount":`...)
		b = strconv.AppendInt(b, int64(u.InputTokens+u.OutputTokens), 10)
		b = append(b, '}')
	}
	b = append(b, `,"modelVersion":`...)
	b = jsonenc.AppendString(b, model)
	return append(b, '}')
}

func appendGeminiPart(b []byte, p *geminiPart) []byte {
	b = append(b, '{')
	if p.call != nil {
		b = append(b, `"functionCall":{"name":`...)
		b = jsonenc.AppendString(b, p.call.Name)
		b = append(b, `,"args":`...)
		b = appendArgs(b, p.call.Arguments)
		b = append(b, '}')
	} else {
		b = append(b, `"text":`...)
		b = jsonenc.AppendString(b, p.text)
		if p.thought {
			b = append(b, `,"thought":true`...)
		}
	}
	if p.sig != "" {
		b = append(b, `,"thoughtSignature":`...)
		b = jsonenc.AppendString(b, p.sig)
	}
	return append(b, '}')
}

// geminiFinish is the finishReason for a finish reason.
func geminiFinish(r chat.FinishReason) string {
	switch r {
	case chat.FinishLength:
		return "MAX_TOKENS"
	case chat.FinishContentFilter:
		return "SAFETY"
	}
	return "STOP"
}
