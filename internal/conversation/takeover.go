package conversation

import (
	"context"
	"errors"
	"fmt"

	"github.com/firstword/firstword/internal/call"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

// Takeover is an answer whose producer died mid-answer (a replica
// killed), for this process to continue (docs/continuation.md).
type Takeover struct {
	RequestID string
	// Answer is the answer's row as stored, streaming again.
	Answer *store.Message
	// Text is the durable text: what the journal holds of the answer,
	// else its row's last checkpoint. It is not empty.
	Text string
	// Resolve returns the call the continuation is routed through, for
	// the answer's model and the conversation's user.
	Resolve func(userID string) (*call.Call, error)
	Hints   chat.Hints
	// Held and Durable are the new producer's Input.Held and
	// Input.Durable.
	Held, Durable func() bool
}

// ErrNotContinuable: the answer cannot be continued (no text yet, or no
// user message before it).
var ErrNotContinuable = errors.New("the answer cannot be continued")

// Continue prepares the turn that continues tk's answer under its own
// message id: the prompt is the one the answer had (its conversation up
// to the user message it answers, the context sources asked again), and
// the router asks for the rest of Text (Hints.Continues). Run yields
// only what follows Text, then done or error, and saves Text and what it
// delivered after it; the guard let the message through when the answer
// began and is not asked again.
func (s *Service) Continue(ctx context.Context, tk Takeover) (*Turn, error) {
	m := tk.Answer
	if tk.Text == "" || m == nil {
		return nil, ErrNotContinuable
	}
	c, err := s.opt.Store.GetConversation(ctx, m.TenantID, m.ConversationID)
	if err != nil {
		return nil, err
	}
	msgs, err := s.opt.Store.ListMessages(ctx, m.TenantID, m.ConversationID)
	if err != nil {
		return nil, err
	}
	var user *store.Message
	for i := range msgs {
		if msgs[i].ID == m.ID {
			if i > 0 && msgs[i-1].Role == "user" {
				user = &msgs[i-1]
			}
			break
		}
	}
	if user == nil {
		return nil, fmt.Errorf("%w: no user message before %s", ErrNotContinuable, m.ID)
	}
	cl, err := tk.Resolve(c.UserID)
	if err != nil {
		return nil, err
	}
	a := *m
	t := &Turn{s: s, conv: c, user: user, assistant: &a, continues: tk.Text, historyUntil: user.Seq,
		in: Input{RequestID: tk.RequestID, TenantID: m.TenantID, UserID: c.UserID, ConversationID: c.ID,
			Model: m.Model, Message: user.Content, Call: cl, Hints: tk.Hints, Held: tk.Held, Durable: tk.Durable},
		written: make(chan struct{})}
	close(t.written)
	return t, nil
}
