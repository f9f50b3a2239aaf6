package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/budget"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/store"
)

type conversationJSON struct {
	ID        string        `json:"id"`
	Title     string        `json:"title"`
	Model     string        `json:"model"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
	Messages  []messageJSON `json:"messages,omitempty"`
}

type messageJSON struct {
	ID           string          `json:"id"`
	Seq          int             `json:"seq"`
	Role         string          `json:"role"`
	Content      string          `json:"content"`
	Status       store.Status    `json:"status"`
	FinishReason string          `json:"finish_reason,omitempty"`
	Model        string          `json:"model,omitempty"`
	Deployment   string          `json:"deployment,omitempty"`
	Usage        *usageJSON      `json:"usage,omitempty"`
	Cost         float64         `json:"cost,omitempty"`
	Timings      json.RawMessage `json:"timings,omitempty"`
	Meta         json.RawMessage `json:"meta,omitempty"`
	Thinking     *thinkingJSON   `json:"thinking,omitempty"`
	Error        *errorJSON      `json:"error,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
}

type usageJSON struct {
	InputTokens  int  `json:"input_tokens"`
	OutputTokens int  `json:"output_tokens"`
	CachedTokens int  `json:"cached_tokens"`
	Estimated    bool `json:"estimated"`
}

// thinkingJSON is an answer's thinking as the client was shown it: the
// text (its blocks' joined, as the thinking events came) and how many
// redacted blocks there were. Signatures and redacted data are for the
// model alone: they stay in the store.
type thinkingJSON struct {
	Text     string `json:"text"`
	Redacted int    `json:"redacted,omitempty"`
}

// storedThinking is a message's stored thinking as shown; nil for none.
func storedThinking(b []byte) *thinkingJSON {
	blocks := conversation.StoredThinking(b)
	if len(blocks) == 0 {
		return nil
	}
	var text strings.Builder
	out := &thinkingJSON{}
	for _, bl := range blocks {
		text.WriteString(bl.Text)
		if bl.Redacted != "" {
			out.Redacted++
		}
	}
	out.Text = text.String()
	return out
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func convJSON(c *store.Conversation) conversationJSON {
	return conversationJSON{ID: c.ID, Title: c.Title, Model: c.Model, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

func msgJSON(m *store.Message) messageJSON {
	out := messageJSON{ID: m.ID, Seq: m.Seq, Role: m.Role, Content: m.Content, Status: m.Status, FinishReason: m.FinishReason,
		Model: m.Model, Deployment: m.Deployment, Cost: m.Cost, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	if m.Role == "assistant" {
		out.Usage = &usageJSON{InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, CachedTokens: m.CachedTokens, Estimated: m.Estimated}
	}
	if json.Valid(m.Timings) {
		out.Timings = m.Timings
	}
	if json.Valid(m.Meta) {
		out.Meta = m.Meta
	}
	out.Thinking = storedThinking(m.Thinking)
	if m.ErrorCode != "" {
		out.Error = &errorJSON{Code: m.ErrorCode, Message: m.ErrorMessage}
	}
	return out
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, budget.New(time.Now()))
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	user := p.UserID
	if s.shared(p.TenantID) {
		user = ""
	}
	cs, err := s.opt.Store.ListConversations(r.Context(), p.TenantID, user, limit)
	if err != nil {
		return s.storeError(err)
	}
	data := make([]conversationJSON, 0, len(cs))
	for i := range cs {
		data = append(data, convJSON(&cs[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	return nil
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) error {
	p, c, err := s.ownConversation(w, r)
	if err != nil {
		return err
	}
	msgs, err := s.opt.Store.ListMessages(r.Context(), p.TenantID, c.ID)
	if err != nil {
		return s.storeError(err)
	}
	out := convJSON(c)
	out.Messages = make([]messageJSON, 0, len(msgs))
	for i := range msgs {
		out.Messages = append(out.Messages, msgJSON(&msgs[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request) error {
	p, c, err := s.ownConversation(w, r)
	if err != nil {
		return err
	}
	if err := s.opt.Store.DeleteConversation(r.Context(), p.TenantID, c.ID); err != nil {
		return s.storeError(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxTitle bounds a conversation's title, in characters.
const maxTitle = 200

// renameConversation serves PATCH /v1/conversations/{id} with
// {"title": "..."}: the title, trimmed, 1 to maxTitle characters without
// control characters. The conversation keeps its place in the list.
func (s *Server) renameConversation(w http.ResponseWriter, r *http.Request) error {
	p, c, err := s.ownConversation(w, r)
	if err != nil {
		return err
	}
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var body struct {
		Title *string `json:"title"`
	}
	if err := decodeStrict(raw, &body); err != nil {
		return invalid("", "request body: "+err.Error())
	}
	if body.Title == nil {
		return invalid("title", "title is required: the body is {\"title\": \"...\"}")
	}
	t := strings.TrimSpace(*body.Title)
	switch {
	case t == "":
		return invalid("title", "title must not be empty")
	case !utf8.ValidString(t):
		return invalid("title", "title must be UTF-8")
	case utf8.RuneCountInString(t) > maxTitle:
		return invalid("title", fmt.Sprintf("title must be at most %d characters", maxTitle))
	case strings.IndexFunc(t, unicode.IsControl) >= 0:
		return invalid("title", "title must not hold control characters (newlines, tabs)")
	}
	if err := s.opt.Store.RenameConversation(r.Context(), p.TenantID, c.ID, t); err != nil {
		return s.storeError(err)
	}
	c.Title = t
	writeJSON(w, http.StatusOK, convJSON(c))
	return nil
}

// usage sums the tenant's usage by model and day: ?from=YYYY-MM-DD&to=
// YYYY-MM-DD (to inclusive; default the last 30 days). The answers' tokens
// and cost and those of the attempts that did not give them (attempts_*:
// lost hedges, first-token timeouts) are summed apart (see store.UsageSum).
func (s *Server) usage(w http.ResponseWriter, r *http.Request) error {
	p, err := s.authenticate(w, r, budget.New(time.Now()))
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	to := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	from := to.Add(-30 * 24 * time.Hour)
	for name, dst := range map[string]*time.Time{"from": &from, "to": &to} {
		if v := r.URL.Query().Get(name); v != "" {
			d, err := time.Parse("2006-01-02", v)
			if err != nil {
				return invalid(name, name+" must be a date YYYY-MM-DD")
			}
			if name == "to" {
				d = d.Add(24 * time.Hour)
			}
			*dst = d
		}
	}
	sums, err := s.opt.Store.UsageSummary(r.Context(), p.TenantID, from, to)
	if err != nil {
		return s.storeError(err)
	}
	if sums == nil {
		sums = []store.UsageSum{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "tenant_id": p.TenantID, "data": sums})
	return nil
}

// shared reports whether a tenant's conversations are every key's.
func (s *Server) shared(tenant string) bool {
	return s.opt.SharedConversations != nil && s.opt.SharedConversations(tenant)
}

// conversation returns conversation id if p may see it: it is p's tenant's
// and p's user's (or the tenant shares its conversations). Others get
// store.ErrNotFound, exactly as if it did not exist.
// ownConversation authenticates the request and reads the conversation
// its path names ({id}), if the caller may see it; its errors are the
// 401 and 503 of authenticate, and storeError's.
func (s *Server) ownConversation(w http.ResponseWriter, r *http.Request) (auth.Principal, *store.Conversation, error) {
	p, err := s.authenticate(w, r, budget.New(time.Now()))
	if err != nil {
		return p, nil, err
	}
	c, err := s.conversation(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return p, nil, s.storeError(err)
	}
	return p, c, nil
}

func (s *Server) conversation(ctx context.Context, p auth.Principal, id string) (*store.Conversation, error) {
	c, err := s.opt.Store.GetConversation(ctx, p.TenantID, id)
	if err != nil {
		return nil, err
	}
	if c.UserID != p.UserID && !s.shared(p.TenantID) {
		return nil, store.ErrNotFound
	}
	return c, nil
}

// storeError classifies a store's error: a conversation that is not the
// caller's is a 404, any other failure (logged) a 503.
func (s *Server) storeError(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return conversationNotFound("id")
	}
	s.log.Error("store", "err", err)
	return errConversationStore
}
