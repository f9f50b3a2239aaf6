package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

// Idempotent sends (docs/chat.md). A POST /v1/chat with an Idempotency-Key
// header claims the key in the store, for the user, for the window; the
// store's unique key makes one of two concurrent first sends the claimer.
// A retry (or the loser) with the same request gets the claimer's answer:
// followed from its start through the journal while it is written, or
// replayed from the store once ended; with another request, 422.

// maxIdempotencyKey bounds an Idempotency-Key's length.
const maxIdempotencyKey = 255

// idempotencyWait bounds how long a retry waits for the send that claimed
// its key to create its turn.
const idempotencyWait = 10 * time.Second

// abandonedClaim is how old a claim with no turn must be to be taken for
// abandoned (its replica died between the claim and the turn): a retry
// then claims the key anew. Preparing a turn takes far less.
const abandonedClaim = time.Minute

var (
	errIdempotencyReused = &chat.Error{Category: chat.CategoryUnprocessable, Code: "idempotency_key_reused",
		Message: "this Idempotency-Key was used with a different request; use a new key for a new request"}
	errIdempotencyPending = &chat.Error{Category: chat.CategoryConflict, Code: "idempotency_key_in_progress",
		Message: "a request with this Idempotency-Key is still being prepared; retry shortly"}
)

// ParseIdempotencyKey checks an Idempotency-Key header value: 1 to 255
// printable ASCII characters.
func ParseIdempotencyKey(v string) error {
	if v == "" || len(v) > maxIdempotencyKey {
		return invalid("Idempotency-Key", "the Idempotency-Key header must be 1 to 255 printable ASCII characters")
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return invalid("Idempotency-Key", "the Idempotency-Key header must be 1 to 255 printable ASCII characters")
		}
	}
	return nil
}

// idempotentSend is a send's claim of its Idempotency-Key.
type idempotentSend struct {
	s   *Server
	rec store.IdempotencyKey
}

// requestHash is the hash of a /v1/chat request's canonical form (its
// fields, the default model filled in, as JSON).
func requestHash(body chatRequest) []byte {
	b, _ := json.Marshal(body)
	sum := sha256.Sum256(b)
	return sum[:]
}

// claimSend claims key for p's send of body. It returns the claim, or nil
// and replayed set when it answered the request with the claimer's
// answer, or an error to answer.
func (s *Server) claimSend(w http.ResponseWriter, r *http.Request, p auth.Principal, key string, body chatRequest) (claim *idempotentSend, replayed bool, err error) {
	now := time.Now().UTC()
	c := &idempotentSend{s: s, rec: store.IdempotencyKey{TenantID: p.TenantID, Scope: p.UserID, Key: key,
		RequestHash: requestHash(body), CreatedAt: now, ExpiresAt: now.Add(s.idempotencyWindow())}}
	deadline := now.Add(idempotencyWait)
	for {
		existing, err := s.opt.Store.ClaimIdempotencyKey(r.Context(), &c.rec, time.Now().UTC())
		if err != nil {
			return nil, false, s.idempotencyStoreError(err)
		}
		if existing == nil {
			return c, false, nil
		}
		if !bytes.Equal(existing.RequestHash, c.rec.RequestHash) {
			return nil, false, errIdempotencyReused
		}
		if existing.MessageID == "" && time.Since(existing.CreatedAt) > abandonedClaim {
			if err := s.opt.Store.ReleaseIdempotencyKey(r.Context(), p.TenantID, p.UserID, key); err != nil {
				return nil, false, s.idempotencyStoreError(err)
			}
			continue
		}
		// The claimer may not have created its turn yet: wait for it, or
		// for its release (then claim again).
		for existing != nil && existing.MessageID == "" {
			if time.Now().After(deadline) {
				return nil, false, errIdempotencyPending
			}
			select {
			case <-r.Context().Done():
				return nil, false, chat.ErrClientClosed
			case <-time.After(25 * time.Millisecond):
			}
			existing, err = s.opt.Store.GetIdempotencyKey(r.Context(), p.TenantID, p.UserID, key)
			if errors.Is(err, store.ErrNotFound) {
				existing = nil
			} else if err != nil {
				return nil, false, s.idempotencyStoreError(err)
			}
		}
		if existing != nil {
			return nil, true, s.replaySend(w, r, p, existing)
		}
	}
}

// bind records the turn the claimed send created.
func (c *idempotentSend) bind(ctx context.Context, conversationID, messageID string) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.s.opt.Store.BindIdempotencyKey(ctx, c.rec.TenantID, c.rec.Scope, c.rec.Key, conversationID, messageID); err != nil {
		c.s.log.Error("binding an idempotency key to its turn", "conversation_id", conversationID, "err", err)
	}
}

// release gives up the claim of a send refused before it created a turn,
// so that a retry may send again.
func (c *idempotentSend) release(ctx context.Context) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.s.opt.Store.ReleaseIdempotencyKey(ctx, c.rec.TenantID, c.rec.Scope, c.rec.Key); err != nil {
		c.s.log.Error("releasing an idempotency key", "err", err)
	}
}

// replaySend answers a retried send with the answer of the send that
// claimed its key, from its first event.
func (s *Server) replaySend(w http.ResponseWriter, r *http.Request, p auth.Principal, k *store.IdempotencyKey) error {
	msgs, err := s.opt.Store.ListMessages(r.Context(), p.TenantID, k.ConversationID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return s.idempotencyStoreError(err)
	}
	for i := range msgs {
		if msgs[i].ID == k.MessageID {
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("X-Firstword-Protocol", ChatProtocol)
			return s.followAnswer(w, r, p, &msgs[i], position{seq: -1}, nil)
		}
	}
	// The conversation was deleted since.
	return &chat.Error{Category: chat.CategoryNotFound, Code: "idempotent_answer_gone",
		Message: "the answer of the request with this Idempotency-Key was deleted"}
}

func (s *Server) idempotencyWindow() time.Duration {
	if s.opt.IdempotencyWindow <= 0 {
		return 24 * time.Hour
	}
	return s.opt.IdempotencyWindow
}

func (s *Server) idempotencyStoreError(err error) error {
	if errors.Is(err, context.Canceled) {
		return chat.ErrClientClosed
	}
	s.log.Error("idempotency keys", "err", err)
	return errConversationStore
}
