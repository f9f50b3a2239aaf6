// Package store is firstword's persistence contract: tenants, API keys,
// conversations, messages and usage. Implementations live in sqlite/ (the
// embedded default) and postgres/ (to scale out); storetest/ is the
// conformance suite both run.
//
// Every read and write of conversation data is scoped by tenant: a tenant
// asking for another tenant's conversation gets ErrNotFound, exactly as if
// it did not exist.
package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// ErrNotFound is returned for missing rows and for rows of another tenant.
var ErrNotFound = errors.New("not found")

// Store is the persistence contract. Implementations are safe for
// concurrent use.
type Store interface {
	// CreateTenant inserts a tenant; ID must be set.
	CreateTenant(ctx context.Context, t *Tenant) error
	// GetTenant returns a tenant by ID.
	GetTenant(ctx context.Context, id string) (*Tenant, error)

	// CreateAPIKey inserts a key. Only its hash is stored.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// APIKeysByPrefix returns the keys (revoked ones included) whose
	// public prefix is prefix; the caller compares hashes.
	APIKeysByPrefix(ctx context.Context, prefix string) ([]APIKey, error)
	// ListAPIKeys returns all keys of a tenant ("" for every tenant),
	// newest first.
	ListAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error)
	// RevokeAPIKey marks a key revoked (by ID or prefix) from at, which
	// may be in the future (a rotation's grace); a key already revoked
	// keeps the earlier time. ErrNotFound if none matches.
	RevokeAPIKey(ctx context.Context, idOrPrefix string, at time.Time) error
	// CountAPIKeys counts keys, revoked ones included: a store that has
	// never had a key is what puts the gateway in local mode.
	CountAPIKeys(ctx context.Context) (int, error)

	// CreateConversation inserts a conversation (ID must be set) and, in
	// the same transaction, its first messages (see AddMessages).
	CreateConversation(ctx context.Context, c *Conversation, first ...*Message) error
	// GetConversation returns a tenant's conversation.
	GetConversation(ctx context.Context, tenantID, id string) (*Conversation, error)
	// ListConversations returns a tenant's conversations (of one user if
	// userID is not empty), most recently updated first, at most limit.
	ListConversations(ctx context.Context, tenantID, userID string, limit int) ([]Conversation, error)
	// DeleteConversation deletes a tenant's conversation and its
	// messages.
	DeleteConversation(ctx context.Context, tenantID, id string) error
	// RenameConversation sets a tenant's conversation's title, leaving
	// its place in the list (UpdatedAt) as it was. ErrNotFound if there
	// is none.
	RenameConversation(ctx context.Context, tenantID, id, title string) error

	// AddMessages appends messages, in order and in one transaction, to a
	// tenant's conversation (all to the same one): it sets each m.Seq to
	// the next number in the conversation and bumps the conversation's
	// UpdatedAt. ErrNotFound if the conversation is not the tenant's; on
	// any error none is added.
	AddMessages(ctx context.Context, ms ...*Message) error
	// CheckpointMessage saves the text of a message that is still
	// streaming. It only changes rows whose status is streaming.
	// thinking is its Thinking so far (nil: none).
	CheckpointMessage(ctx context.Context, id, content string, thinking []byte, outputTokens int, at time.Time) error
	// FinishMessage writes a message's final state: status, content,
	// finish reason, model, deployment, usage, cost, timings, error.
	FinishMessage(ctx context.Context, m *Message) error
	// ListMessages returns a tenant's conversation's messages in order.
	ListMessages(ctx context.Context, tenantID, conversationID string) ([]Message, error)
	// DeleteMessages deletes a tenant's messages ids that exist (a turn
	// refused after its write may have landed) and returns how many there
	// were.
	DeleteMessages(ctx context.Context, tenantID string, ids ...string) (int, error)
	// GetMessage returns message id, whatever its tenant (ErrNotFound if
	// there is none): for the server's own work on an answer (continuing
	// one whose replica died), never for a client.
	GetMessage(ctx context.Context, id string) (*Message, error)
	// LastMessages returns the last n messages of a conversation, in
	// order (oldest first).
	LastMessages(ctx context.Context, tenantID, conversationID string, n int) ([]Message, error)
	// InterruptStreaming marks messages still streaming whose last write
	// (creation or checkpoint) is older than staleBefore interrupted,
	// stamping them at, keeping their last checkpoint, and returns how
	// many there were. Streaming answers are checkpointed at least every
	// few seconds, so with several replicas on one database a stale row is
	// one whose replica crashed; a live stream elsewhere is left alone.
	InterruptStreaming(ctx context.Context, staleBefore, at time.Time) (int, error)
	// StaleStreaming returns the IDs of at most limit messages still
	// streaming whose last write is older than staleBefore, oldest first:
	// the candidates of InterruptMessage, for a caller that knows more
	// of their text than the last checkpoint (a resume journal).
	StaleStreaming(ctx context.Context, staleBefore time.Time, limit int) ([]string, error)
	// InterruptMessage marks message id interrupted, stamping it at, if
	// it is still streaming, and reports whether it was. A non-nil
	// content replaces the last checkpoint's text (with outputTokens);
	// the thinking is the last checkpoint's.
	InterruptMessage(ctx context.Context, id string, content *string, outputTokens int, at time.Time) (bool, error)
	// ReopenMessage marks message id streaming again, stamping it at, if
	// its writer was lost: it is interrupted without an error code (a
	// crash, not a shutdown, which says so). It reports whether it did:
	// of callers at once, one does.
	ReopenMessage(ctx context.Context, id string, at time.Time) (bool, error)

	// RecordUsage inserts usage rows, one per request, in one transaction.
	RecordUsage(ctx context.Context, us ...*Usage) error
	// UsageSummary sums usage by tenant, model and UTC day for rows with
	// from <= Time < to, of one tenant ("" for all).
	UsageSummary(ctx context.Context, tenantID string, from, to time.Time) ([]UsageSum, error)

	// Limits and spend (issue 21): the admin API's overrides of the
	// config's limits and budgets, and the sums admission and the admin
	// API read.

	// PutLimitOverride inserts or replaces the override of o.Scope and
	// o.SubjectID.
	PutLimitOverride(ctx context.Context, o *LimitOverride) error
	// ListLimitOverrides returns every override.
	ListLimitOverrides(ctx context.Context) ([]LimitOverride, error)
	// DeleteLimitOverride removes an override; ErrNotFound if none.
	DeleteLimitOverride(ctx context.Context, scope, subjectID string) error
	// UsageSpend sums usage rows with Time >= since by tenant, key and
	// UTC day: what budgets count.
	UsageSpend(ctx context.Context, since time.Time) ([]SpendSum, error)
	// UsageReport sums usage rows matching f by tenant, key, model and UTC
	// day, ordered by day, tenant, key and model.
	UsageReport(ctx context.Context, f UsageFilter) ([]UsageRow, error)

	// Idempotent sends (see IdempotencyKey).

	// ClaimIdempotencyKey inserts k (unbound: no turn yet) unless a record
	// of the same tenant, scope and key that has not expired at now
	// exists: then it inserts nothing and returns that record. An expired
	// record is replaced. Of concurrent claims of one key, exactly one
	// inserts.
	ClaimIdempotencyKey(ctx context.Context, k *IdempotencyKey, now time.Time) (existing *IdempotencyKey, err error)
	// GetIdempotencyKey returns a record, expired or not, or ErrNotFound.
	GetIdempotencyKey(ctx context.Context, tenantID, scope, key string) (*IdempotencyKey, error)
	// BindIdempotencyKey records the turn a claimed key created.
	// ErrNotFound if there is no such record.
	BindIdempotencyKey(ctx context.Context, tenantID, scope, key, conversationID, messageID string) error
	// ReleaseIdempotencyKey deletes a claim that is still unbound (its
	// send failed before a turn was created), so that a retry may claim
	// the key again. A bound record is kept.
	ReleaseIdempotencyKey(ctx context.Context, tenantID, scope, key string) error
	// PurgeIdempotencyKeys deletes the records that expired at or before
	// before and returns how many there were.
	PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int, error)

	// Close releases the store.
	Close() error
}

// Scopes of a LimitOverride.
const (
	ScopeTenant = "tenant"
	ScopeKey    = "key"
)

// LimitOverride is a tenant's or a key's limits and budget as set through
// the admin API; Settings is JSON the limits package owns.
type LimitOverride struct {
	Scope     string
	SubjectID string
	Settings  []byte
	UpdatedAt time.Time
}

// SpendSum is what a tenant's key spent in a UTC day. Tokens are input
// plus output, and Cost the price table's, both with the attempts that
// did not give the answer.
type SpendSum struct {
	TenantID string
	KeyID    string
	Day      string // YYYY-MM-DD
	Requests int64
	Tokens   int64
	Cost     float64
}

// UsageFilter selects usage rows; empty fields match all.
type UsageFilter struct {
	TenantID, KeyID, Model string
	From, To               time.Time // From <= Time < To; zero: unbounded
}

// UsageRow is a sum of usage rows by tenant, key, model and UTC day.
type UsageRow struct {
	TenantID     string  `json:"tenant_id"`
	KeyID        string  `json:"key_id"`
	Model        string  `json:"model"`
	Day          string  `json:"day"`
	Requests     int64   `json:"requests"`
	Errors       int64   `json:"errors"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
	// AttemptsCost is what the attempts that did not give the answers
	// cost, on top of Cost.
	AttemptsCost float64 `json:"attempts_cost"`
	// TTFWP95Ms is the 95th percentile (nearest rank) of time to first
	// word of the requests that had one.
	TTFWP95Ms float64 `json:"ttfw_p95_ms"`
}

// IdempotencyKey records the turn a send with an Idempotency-Key created,
// for the key's window: a retry with the same key gets that turn.
type IdempotencyKey struct {
	TenantID string
	// Scope is whose key it is within the tenant (the user).
	Scope string
	Key   string
	// RequestHash is the hash of the canonical request: the same key with
	// another request is refused.
	RequestHash []byte
	// ConversationID and MessageID are the turn's answer, empty while the
	// send that claimed the key has not created it yet.
	ConversationID string
	MessageID      string
	CreatedAt      time.Time
	ExpiresAt      time.Time
}

// Tenant is an organisation using the gateway.
type Tenant struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// APIKey authenticates a tenant's user. The secret is never stored: Hash
// is its SHA-256, Prefix is the public part used to find it.
type APIKey struct {
	ID        string
	TenantID  string
	UserID    string
	Name      string
	Prefix    string
	Hash      []byte
	CreatedAt time.Time
	RevokedAt *time.Time
	// Admin keys reach the operators' routes and every tenant's views.
	Admin bool
}

// Conversation is a thread of messages.
type Conversation struct {
	ID        string
	TenantID  string
	UserID    string
	Title     string
	Model     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Status is a message's state. An assistant message is created streaming
// and ends in one of the others; user messages are complete.
type Status string

const (
	StatusStreaming   Status = "streaming"
	StatusComplete    Status = "complete"
	StatusCancelled   Status = "cancelled"
	StatusError       Status = "error"
	StatusTimeout     Status = "timeout"
	StatusInterrupted Status = "interrupted"
)

// Message is one turn. Content is always exactly the text that was sent to
// the client, so the next turn's history matches the screen.
type Message struct {
	ID             string
	ConversationID string
	TenantID       string
	Seq            int
	Role           string // "user" or "assistant"
	Content        string
	Status         Status
	FinishReason   string
	Model          string // alias
	Deployment     string
	InputTokens    int
	OutputTokens   int
	CachedTokens   int
	Estimated      bool
	Cost           float64
	// Timings is the message's stage timings as JSON (see budget).
	Timings []byte
	// Meta is other JSON the surface wants kept (attempts, sources...).
	Meta []byte
	// Thinking is an assistant message's thinking as JSON: the blocks
	// (chat.ThinkingBlock) the client was shown, with their signatures
	// and redacted data, for the next turn's history. Nil: none.
	Thinking     []byte
	ErrorCode    string
	ErrorMessage string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Usage is one request's metered usage.
type Usage struct {
	RequestID    string
	TenantID     string
	UserID       string
	Time         time.Time
	Surface      string
	Model        string // alias
	Deployment   string
	Status       string
	InputTokens  int
	OutputTokens int
	CachedTokens int
	Estimated    bool
	Cost         float64
	TTFTMs       float64
	TotalMs      float64
	// KeyID is the API key the request was made with ("" in local mode);
	// TTFWMs its time to first word (0 if nothing was visible).
	KeyID  string
	TTFWMs float64
	// What the request's upstream attempts that did not give the answer
	// cost (a hedge that lost, one abandoned at its first-token timeout);
	// the counts and Cost above are the answer's alone.
	AttemptsInputTokens  int
	AttemptsOutputTokens int
	AttemptsCost         float64
}

// UsageSum is a sum of usage rows.
type UsageSum struct {
	TenantID string `json:"tenant_id"`
	Model    string `json:"model"`
	Day      string `json:"day"` // YYYY-MM-DD, UTC
	Sums
}

// Sums add up usage: the requests, the answers' tokens and cost, and
// apart, what the attempts that did not give them cost (see Usage).
type Sums struct {
	Requests             int64   `json:"requests"`
	InputTokens          int64   `json:"input_tokens"`
	OutputTokens         int64   `json:"output_tokens"`
	CachedTokens         int64   `json:"cached_tokens"`
	Cost                 float64 `json:"cost"`
	AttemptsInputTokens  int64   `json:"attempts_input_tokens"`
	AttemptsOutputTokens int64   `json:"attempts_output_tokens"`
	AttemptsCost         float64 `json:"attempts_cost"`
}

// NewID returns a random identifier with a prefix ("conv_", "msg_",
// "key_", a request's): 20 characters of [0-9a-z] after it, about 103
// bits.
func NewID(prefix string) string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, len(prefix), len(prefix)+20)
	copy(b, prefix)
	for range 20 {
		b = append(b, alphabet[rand.IntN(len(alphabet))])
	}
	return string(b)
}
