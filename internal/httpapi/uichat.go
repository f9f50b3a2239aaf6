package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/store"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// The Vercel AI SDK's UI message stream (docs/frontends.md): the
// request of its DefaultChatTransport (what useChat sends) on
// POST /v1/ui/chat, answered with the SDK's UI message stream, and its
// reconnect (GET /v1/ui/chat/{id}/stream). It is /v1/chat underneath:
// the same turn, journal and stored conversation, its events translated
// chunk by chunk (uiEncoder); the journal keeps /v1/chat's events, so an
// answer can be followed in either protocol.

// uiStreamHeader marks a response as the AI SDK's UI message stream.
const uiStreamHeader = "X-Vercel-Ai-Ui-Message-Stream"

// The triggers of the AI SDK's requests.
const (
	uiSubmit     = "submit-message"
	uiRegenerate = "regenerate-message"
)

// maxChatIDBytes bounds a client's chat id.
const maxChatIDBytes = 256

// uiReplayWindow is how long after an answer ended a reconnect still
// replays it (a client that dropped just before the end gets the end)
// rather than answering 204.
const uiReplayWindow = 10 * time.Second

func setUIHeaders(h http.Header) { h.Set(uiStreamHeader, "v1") }

// uiChatRequest is the body of the AI SDK's DefaultChatTransport: the
// chat's id, its messages (UIMessages), the trigger and the message id,
// and what the transport's body option adds (model).
type uiChatRequest struct {
	ID        string      `json:"id"`
	Messages  []uiMessage `json:"messages"`
	Trigger   string      `json:"trigger"`
	MessageID string      `json:"messageId"`
	Model     string      `json:"model"`
}

type uiMessage struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"parts"`
}

// parseUIChat decodes and checks an AI SDK request.
func parseUIChat(raw []byte) (*uiChatRequest, error) {
	var q uiChatRequest
	if err := json.Unmarshal(raw, &q); err != nil {
		return nil, invalid("", "request body: "+err.Error())
	}
	switch {
	case q.ID == "":
		return nil, invalid("id", "id (the chat's id) is required")
	case len(q.ID) > maxChatIDBytes || !utf8.ValidString(q.ID):
		return nil, invalid("id", "id must be valid UTF-8 of at most 256 bytes")
	}
	switch q.Trigger {
	case "", uiSubmit:
		q.Trigger = uiSubmit
		if n := len(q.Messages); n == 0 || q.Messages[n-1].Role != "user" {
			return nil, invalid("messages", "the last message must be the user's")
		}
	case uiRegenerate:
	default:
		return nil, invalid("trigger", "trigger must be submit-message or regenerate-message")
	}
	return &q, nil
}

// lastUserText is the text of the last message, the user's: its text
// parts, one paragraph each. The rest of messages is not read: the
// stored conversation is the history.
func (q *uiChatRequest) lastUserText() string {
	if n := len(q.Messages); n > 0 && q.Messages[n-1].Role == "user" {
		var texts []string
		for _, p := range q.Messages[n-1].Parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n\n")
	}
	return ""
}

// uiConversationID is the conversation of the client's chat id chatID:
// an ID derived from the tenant, the user and chatID, so that the same id
// from another user or tenant is another conversation, never theirs.
func uiConversationID(p auth.Principal, chatID string) string {
	h := sha256.New()
	for _, s := range []string{p.TenantID, p.UserID, chatID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	return "conv_ui_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:15]))
}

// uiChat serves POST /v1/ui/chat: one turn of the chat, as /v1/chat, in
// the AI SDK's protocol.
func (s *Server) uiChat(w http.ResponseWriter, r *http.Request) error {
	return s.converse(w, r, true)
}

// dropLastExchange deletes the conversation's last exchange (the user's
// message and its answer), for a regeneration, and returns the user's
// stored message, which the new turn asks again.
func (s *Server) dropLastExchange(ctx context.Context, p auth.Principal, conversationID string) (string, error) {
	if _, err := s.conversation(ctx, p, conversationID); err != nil {
		return "", s.storeError(err)
	}
	msgs, err := s.opt.Store.LastMessages(ctx, p.TenantID, conversationID, 2)
	if err != nil {
		return "", s.storeError(err)
	}
	var ids []string
	text := ""
	for i := len(msgs) - 1; i >= 0 && text == ""; i-- {
		m := msgs[i]
		if m.Role == "assistant" && m.Status == store.StatusStreaming {
			return "", &chat.Error{Category: chat.CategoryConflict, Code: "answer_streaming",
				Message: "the last answer is still being written: stop it first"}
		}
		ids = append(ids, m.ID)
		if m.Role == "user" {
			text = m.Content
		}
	}
	if text == "" {
		return "", &chat.Error{Category: chat.CategoryInvalidRequest, Param: "trigger", Message: "the chat has no user message to answer again"}
	}
	if _, err := s.opt.Store.DeleteMessages(ctx, p.TenantID, ids...); err != nil {
		return "", s.storeError(err)
	}
	return text, nil
}

// dropEditedExchange serves an edit in the AI SDK's way (sendMessage with
// the messageId of a user message: the client replaced that message and
// dropped what followed it): when the edited message is the last user
// message of the stored conversation, its last exchange is deleted and
// the edit answered in its place. Only the last user message can be
// edited: an edit of an earlier one is refused (the stored history would
// no longer be what the client shows). A chat with no turn yet has
// nothing to replace.
func (s *Server) dropEditedExchange(ctx context.Context, p auth.Principal, conversationID string, q *uiChatRequest) error {
	if err := conversation.CheckMessage(q.lastUserText()); err != nil {
		return s.prepareError(err)
	}
	if _, err := s.conversation(ctx, p, conversationID); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return s.storeError(err)
	}
	msgs, err := s.opt.Store.ListMessages(ctx, p.TenantID, conversationID)
	if err != nil {
		return s.storeError(err)
	}
	stored, sent := 0, 0
	for _, m := range msgs {
		if m.Role == "user" {
			stored++
		}
	}
	for _, m := range q.Messages {
		if m.Role == "user" {
			sent++
		}
	}
	switch sent {
	case stored + 1:
		return nil // a new message after all: nothing to replace
	case stored:
	default:
		return invalid("messageId", fmt.Sprintf("only the last user message can be edited: this edit is of user message %d of the %d stored", sent, stored))
	}
	_, err = s.dropLastExchange(ctx, p, conversationID)
	return err
}

// uiResumeStream serves GET /v1/ui/chat/{id}/stream, the AI SDK's
// reconnect: the chat's answer being written, replayed from its start
// (the SDK resets the message on start), then live; 204 when none is.
func (s *Server) uiResumeStream(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, nil)
	if err != nil {
		return err
	}
	c, err := s.conversation(r.Context(), p, uiConversationID(p, r.PathValue("id")))
	if errors.Is(err, store.ErrNotFound) {
		// A chat with no turn yet: nothing to resume.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return s.storeError(err)
	}
	m, err := s.latestAnswer(r.Context(), p.TenantID, c.ID)
	if err != nil {
		return s.storeError(err)
	}
	if m == nil || m.Status != store.StatusStreaming && time.Since(m.UpdatedAt) > uiReplayWindow {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return s.followAnswer(w, r, p, m, position{seq: -1}, &uiEncoder{})
}

// uiMessages serves GET /v1/ui/chat/{id}/messages: the chat's stored
// messages as the AI SDK's UIMessages (useChat's initial messages): each
// with firstword's message id, its thinking as a reasoning part and its
// text as a text part, and as metadata what GET /v1/conversations/{id}
// says of the message (status, usage, cost, timings, error...) with the
// conversation's id. A chat with no turn yet has none.
func (s *Server) uiMessages(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, nil)
	if err != nil {
		return err
	}
	type part struct {
		Type  string `json:"type"`
		Text  string `json:"text"`
		State string `json:"state,omitempty"`
	}
	type uiMsg struct {
		ID       string         `json:"id"`
		Role     string         `json:"role"`
		Parts    []part         `json:"parts"`
		Metadata map[string]any `json:"metadata,omitempty"`
	}
	out := []uiMsg{}
	c, err := s.conversation(r.Context(), p, uiConversationID(p, r.PathValue("id")))
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	if err != nil {
		return s.storeError(err)
	}
	msgs, err := s.opt.Store.ListMessages(r.Context(), p.TenantID, c.ID)
	if err != nil {
		return s.storeError(err)
	}
	for i := range msgs {
		m := &msgs[i]
		u := uiMsg{ID: m.ID, Role: m.Role, Parts: []part{}}
		state := "done"
		if m.Status == store.StatusStreaming {
			state = "streaming"
		}
		if m.Role == "assistant" {
			if th := storedThinking(m.Thinking); th != nil && th.Text != "" {
				u.Parts = append(u.Parts, part{Type: "reasoning", Text: th.Text, State: state})
			}
			j := msgJSON(m)
			j.Content, j.Thinking = "", nil
			b, _ := json.Marshal(j)
			json.Unmarshal(b, &u.Metadata)
			delete(u.Metadata, "content")
			delete(u.Metadata, "seq")
			delete(u.Metadata, "id")
			delete(u.Metadata, "role")
			u.Metadata["conversation_id"], u.Metadata["message_id"] = c.ID, m.ID
		}
		if m.Content != "" || m.Role == "user" {
			tp := part{Type: "text", Text: m.Content}
			if m.Role == "assistant" {
				tp.State = state
			}
			u.Parts = append(u.Parts, tp)
		}
		out = append(out, u)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// uiStop serves POST /v1/ui/chat/{id}/stop: the chat's answer is
// stopped as POST /v1/conversations/{id}/stop does.
func (s *Server) uiStop(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, nil)
	if err != nil {
		return err
	}
	r.SetPathValue("id", uiConversationID(p, r.PathValue("id")))
	return s.stopAnswer(w, r)
}

// uiEncoder translates one answer's /v1/chat events into the AI SDK's UI
// message chunks, each an SSE data line: meta is start (and start-step),
// thinking is a reasoning part, the deltas a text part, done is
// finish-step and finish, error is message-metadata and error; [DONE]
// ends the stream. Message metadata is firstword's own event data: meta's
// on start, done's (timings, usage, cost) on finish, error's before an
// error.
type uiEncoder struct {
	reasoning, text bool // a part is open
	parts           int  // parts opened, for their ids
	ended           bool
}

func appendChunk(b []byte, chunk string) []byte {
	b = append(b, "data: "...)
	b = append(b, chunk...)
	return append(b, "\n\n"...)
}

// appendPart appends a chunk {"type":typ,"id":id} with, when delta is
// not nil, its delta.
func appendPart(b []byte, typ, id string, delta *string) []byte {
	b = append(b, `data: {"type":"`...)
	b = append(b, typ...)
	b = append(b, `","id":"`...)
	b = append(b, id...)
	b = append(b, '"')
	if delta != nil {
		b = append(b, `,"delta":`...)
		b = wire.AppendString(b, *delta)
	}
	return append(b, "}\n\n"...)
}

func (e *uiEncoder) partID(kind string) string {
	return kind + "-" + strconv.Itoa(e.parts-1)
}

// closeParts ends the open part, if any.
func (e *uiEncoder) closeParts(b []byte) []byte {
	if e.reasoning {
		b = appendPart(b, "reasoning-end", e.partID("reasoning"), nil)
		e.reasoning = false
	}
	if e.text {
		b = appendPart(b, "text-end", e.partID("text"), nil)
		e.text = false
	}
	return b
}

// append appends ev's chunks to b (none for what the protocol cannot
// say: a redacted block of thinking, a rewind).
func (e *uiEncoder) append(b []byte, ev journal.Event) []byte {
	if e.ended {
		return b
	}
	var d struct {
		Text         string `json:"text"`
		Restart      bool   `json:"restart"`
		FinishReason string `json:"finish_reason"`
		MessageID    string `json:"message_id"`
		Message      string `json:"message"`
		Code         string `json:"code"`
	}
	json.Unmarshal(ev.Data, &d)
	switch ev.Kind {
	case journal.KindMeta:
		b = append(b, `data: {"type":"start","messageId":`...)
		b = wire.AppendString(b, d.MessageID)
		b = append(b, `,"messageMetadata":`...)
		b = append(b, ev.Data...)
		b = append(b, "}\n\n"...)
		b = appendChunk(b, `{"type":"start-step"}`)
	case journal.KindThinking:
		switch {
		case d.Restart:
			// The thinking shown so far was an attempt's that failed:
			// the SDK cannot drop it, the next thinking is a new part.
			b = e.closeParts(b)
		case d.Text != "":
			if !e.reasoning {
				b = e.closeParts(b)
				e.parts++
				e.reasoning = true
				b = appendPart(b, "reasoning-start", e.partID("reasoning"), nil)
			}
			b = appendPart(b, "reasoning-delta", e.partID("reasoning"), &d.Text)
		}
	case journal.KindDelta:
		if d.Text == "" {
			break
		}
		if !e.text {
			b = e.closeParts(b)
			e.parts++
			e.text = true
			b = appendPart(b, "text-start", e.partID("text"), nil)
		}
		b = appendPart(b, "text-delta", e.partID("text"), &d.Text)
	case journal.KindDone:
		e.ended = true
		b = e.closeParts(b)
		b = appendChunk(b, `{"type":"finish-step"}`)
		b = append(b, `data: {"type":"finish","finishReason":"`...)
		b = append(b, uiFinishReason(d.FinishReason)...)
		b = append(b, `","messageMetadata":`...)
		b = append(b, ev.Data...)
		b = append(b, "}\n\n"...)
		b = appendChunk(b, "[DONE]")
	case journal.KindError:
		e.ended = true
		b = e.closeParts(b)
		b = append(b, `data: {"type":"message-metadata","messageMetadata":`...)
		b = append(b, ev.Data...)
		b = append(b, "}\n\n"...)
		text := d.Message
		if text == "" {
			text = d.Code
		}
		b = append(b, `data: {"type":"error","errorText":`...)
		b = wire.AppendString(b, text)
		b = append(b, "}\n\n"...)
		b = appendChunk(b, "[DONE]")
	}
	return b
}

// uiFinishReason is the AI SDK's finish reason for firstword's.
func uiFinishReason(r string) string {
	switch r {
	case "stop", "length":
		return r
	case "content_filter":
		return "content-filter"
	case "tool_calls":
		return "tool-calls"
	}
	return "other"
}
