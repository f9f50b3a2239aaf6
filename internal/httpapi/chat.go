package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/tracing"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// chatRequest is the body of POST /v1/chat.
type chatRequest struct {
	Model          string `json:"model"`
	Message        string `json:"message"`
	ConversationID string `json:"conversation_id"`
	// Regenerate answers the conversation's last user message again, in
	// place of its last exchange (as /v1/ui/chat's regenerate-message);
	// message is then left out.
	Regenerate bool `json:"regenerate,omitempty"`
	// Edit sends message in place of the conversation's last user
	// message: the last exchange is deleted and message answered instead.
	Edit bool `json:"edit,omitempty"`
}

// ChatProtocol is the version of the /v1/chat event protocol
// (docs/events.md), sent as X-Firstword-Protocol.
const ChatProtocol = "1"

// chat serves POST /v1/chat: one turn of a stored conversation as a
// stream of typed events (meta, thinking and delta..., done | error). meta is sent at
// once, so the commit point is early by design: every later failure is an
// error event, and the partial answer is kept. It returns the errors
// answered before meta.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) error {
	return s.converse(w, r, false)
}

// converse runs one /v1/chat turn; ui: the request is the AI SDK's
// (uichat.go) and the answer goes out as its UI message stream, the same
// events translated.
func (s *Server) converse(w http.ResponseWriter, r *http.Request, ui bool) error {
	start := time.Now()
	rec := budget.New(start)
	id := store.NewID("req_")
	trace := tracing.FromRequest(r)
	w.Header().Set("X-Request-Id", id)
	w.Header().Set("X-Trace-Id", trace.String())
	if !ui {
		w.Header().Set("X-Firstword-Protocol", ChatProtocol)
	}
	// The waits on the store before the answer starts (the key check, the
	// conversation's read, the turn's first write) share one store
	// timeout; the answer's own writes later do not.
	prep := r.Context()
	if s.opt.StoreTimeout > 0 {
		prep = store.WithBudget(prep, start.Add(s.opt.StoreTimeout))
	}
	p, err := s.authenticate(w, r.WithContext(prep), rec)
	if err != nil {
		return err
	}
	end := rec.Begin("parse")
	var body chatRequest
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var uiReq *uiChatRequest
	if ui {
		if uiReq, err = parseUIChat(raw); err != nil {
			return err
		}
		body = chatRequest{Model: uiReq.Model, Message: uiReq.lastUserText(), ConversationID: uiConversationID(p, uiReq.ID)}
	} else {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			return invalid("", "request body: "+err.Error())
		}
		if body.Regenerate && body.ConversationID == "" {
			return invalid("conversation_id", "regenerate needs the conversation_id of the answer to write again")
		}
		if body.Regenerate && body.Message != "" {
			return invalid("message", "regenerate answers the stored message again: leave message out")
		}
		if body.Edit && body.Regenerate {
			return invalid("edit", "edit and regenerate do not go together: edit sends a new message, regenerate the stored one")
		}
		if body.Edit && body.ConversationID == "" {
			return invalid("conversation_id", "edit needs the conversation_id whose last message it replaces")
		}
		if body.Edit {
			// Checked before the last exchange is dropped for it.
			if err := conversation.CheckMessage(body.Message); err != nil {
				return s.prepareError(err)
			}
		}
	}
	if body.Model == "" {
		body.Model = s.defaultModel()
	}
	end("")
	c, err := s.resolve(metering.Request{ID: id, Surface: "chat", Tenant: p.TenantID, User: p.UserID, KeyID: p.KeyID, Alias: body.Model, Stream: true,
		Timings: rec, TraceID: trace.String(), TraceParent: r.Header.Get("Traceparent")}, clientDeadline(r.Header))
	if err != nil {
		return err // before admission: a 404 spends no rate limit
	}
	var claim *idempotentSend
	if key, ok := r.Header["Idempotency-Key"]; ok && !ui {
		if err := ParseIdempotencyKey(key[0]); err != nil {
			return err
		}
		c, replayed, err := s.claimSend(w, r, p, key[0], body)
		if err != nil || replayed {
			return err
		}
		claim = c
	}
	ticket, err := s.admission(w, r, rec, limits.Request{ID: id, Tenant: p.TenantID, Key: p.KeyID,
		Tokens: chat.EstimateTokens(body.Message) + defaultReserve})
	if err != nil {
		claim.release(r.Context())
		return err
	}
	defer ticket.Close()
	in := conversation.Input{
		RequestID: id, TenantID: p.TenantID, UserID: p.UserID, SharedConversations: s.shared(p.TenantID), ConversationID: body.ConversationID,
		Model: body.Model, Message: body.Message, Call: c,
	}
	if ui {
		// The chat's conversation is made by its first turn; a
		// regeneration replaces the last exchange with this turn.
		in.CreateMissing, in.SharedConversations = true, false
		switch {
		case uiReq.Trigger == uiRegenerate:
			text, err := s.dropLastExchange(prep, p, body.ConversationID)
			if err != nil {
				return err
			}
			in.Message = text
		case uiReq.MessageID != "":
			if err := s.dropEditedExchange(prep, p, body.ConversationID, uiReq); err != nil {
				return err
			}
		}
	} else if body.Regenerate || body.Edit {
		text, err := s.dropLastExchange(prep, p, body.ConversationID)
		if err != nil {
			claim.release(r.Context())
			return err
		}
		if body.Regenerate {
			in.Message = text
		}
	}
	in.Hints = requestHints(r, p.TenantID)
	// Set once the answer's journal is begun, before the turn runs.
	var jw journal.Writer
	in.Held = func() bool { return jw == nil || jw.Held() }
	// While a shared journal keeps the answer, its row is checkpointed
	// rarely: a take-over continues from the journal.
	in.Durable = func() bool { return jw != nil && journal.Durable(jw) }
	// The user's message is written while the turn runs: the context and
	// the model's call start now, and meta (the first event) waits for the
	// write, which a failure turns into a real status while nothing was
	// sent.
	turn, err := s.opt.Chat.Begin(prep, in)
	if err != nil {
		claim.release(r.Context())
		return s.prepareError(err)
	}
	meta := turn.Meta()
	if s.opt.Streams != nil {
		defer s.opt.Streams.Open("chat")()
	}
	es := newEventStream(w, commentHeartbeat, s.opt.Heartbeat, s.opt.WriteTimeout)
	defer es.Close()
	ans := s.newAnswer(r, meta.MessageID, es)
	if ui {
		es.Header(setUIHeaders)
		ans.ui = &uiEncoder{}
	} else {
		es.prelude = []byte("retry: 1000\n\n")
	}
	defer ans.close()
	jw = ans.jw
	// meta goes out as soon as the write is done, from its own goroutine
	// (the turn's may be waiting for the model), or with the turn's first
	// event if that comes first; once sent, only the turn's goroutine
	// writes. The handler does not return before it ran.
	var once sync.Once
	stored := false
	sendMeta := func() {
		if err := turn.Stored(); err != nil {
			claim.release(r.Context())
			perr := s.prepareError(err)
			// Nothing was sent: a real status. (A heartbeat may have
			// committed the response: the turn's error event says it.)
			if es.Uncommitted(func(w http.ResponseWriter) {
				if ui {
					w.Header().Del(uiStreamHeader)
				}
				dialectOpenAI.writeError(w, perr)
			}) {
				ans.cancel(perr)
				return
			}
		} else {
			// The key names the turn once the turn exists (its user
			// message is stored): a retry follows it from here on.
			claim.bind(r.Context(), meta.ConversationID, meta.MessageID)
		}
		stored = true
		es.Header(func(h http.Header) { h.Set("Server-Timing", rec.ServerTiming(time.Now())) })
		metaJSON, _ := json.Marshal(meta)
		// If the client already left, the turn's first delta finds out and
		// the turn ends cancelled (after the grace window, if resumable).
		ans.event("meta", metaJSON)
	}
	metaDone := make(chan struct{})
	defer func() { <-metaDone }()
	go func() {
		defer close(metaDone)
		turn.Stored()
		once.Do(sendMeta)
	}()
	ctx, release := c.Context(ans.ctx)
	defer release(nil)
	var data []byte
	turn.Run(ctx, func(ev conversation.Event) bool {
		switch {
		case ev.Restart:
			data = append(data[:0], `{"restart":true}`...)
		case ev.Redacted:
			data = append(data[:0], `{"redacted":true}`...)
		case ev.Kind == "delta" || ev.Kind == "thinking":
			data = append(data[:0], `{"text":`...)
			data = wire.AppendString(data, ev.Text)
			data = append(data, '}')
		case ev.Kind == "done":
			data, _ = json.Marshal(ev.Done)
		case ev.Kind == "error":
			data, _ = json.Marshal(ev.Error)
		}
		once.Do(sendMeta)
		if !stored {
			return false
		}
		return ans.event(ev.Kind, data)
	})
	return nil
}

func (s *Server) defaultModel() string {
	aliases := s.opt.Models.Aliases()
	for _, a := range aliases {
		if a == "chat" {
			return a
		}
	}
	if len(aliases) > 0 {
		return aliases[0]
	}
	return ""
}

// prepareError classifies the pipeline's request errors.
func (s *Server) prepareError(err error) error {
	switch {
	case errors.Is(err, conversation.ErrEmptyMessage):
		return invalid("message", "message is required")
	case errors.Is(err, conversation.ErrMessageTooBig):
		return &chat.Error{Category: chat.CategoryTooLarge, Param: "message", Message: "message is too long or not valid UTF-8"}
	case errors.Is(err, conversation.ErrNotFound):
		return conversationNotFound("conversation_id")
	case errors.Is(err, context.Canceled):
		// The client left, or only half-closed and still reads.
		return chat.ErrClientClosed
	}
	s.log.Error("preparing a chat turn", "err", err)
	return errConversationStore
}

// authenticate resolves the request's principal; its errors are the 401
// (with its WWW-Authenticate header set) and the 503 of a failed check.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, rec *budget.Recorder) (auth.Principal, error) {
	if s.opt.Auth == nil {
		return auth.Principal{TenantID: auth.LocalTenant, UserID: auth.LocalUser, Local: true}, nil
	}
	end := rec.Begin("auth")
	p, err := s.opt.Auth.Authenticate(r.Context(), r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	end("")
	if err != nil {
		if errors.Is(err, auth.ErrUnauthorized) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="firstword"`)
			return p, errNoKey
		}
		s.log.Error("authenticating", "err", err)
		return p, errKeyCheck
	}
	return p, nil
}
