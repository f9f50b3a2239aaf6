// Package cache stores complete answers for the response cache: an Entry
// is the whole normalised stream of a finished answer, replayed as a
// stream on a hit. Memory is the in-process store (otter, bounded by bytes,
// with a TTL per entry); redis/ shares entries between replicas.
package cache

import (
	"context"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/firstword/firstword/internal/chat"
)

// Entry is a complete, successful answer.
type Entry struct {
	Alias      string       `json:"alias"`
	Model      string       `json:"model"`
	Deployment string       `json:"deployment"`
	Chunks     []chat.Chunk `json:"chunks"`
	Created    time.Time    `json:"created"`
	Expires    time.Time    `json:"expires"`
}

// Size approximates the entry's memory in bytes.
func (e *Entry) Size() int {
	n := 128 + len(e.Model) + len(e.Deployment) + len(e.Alias)
	for i := range e.Chunks {
		c := &e.Chunks[i]
		n += 96 + len(c.Text) + len(c.Refusal)
		for _, t := range c.ToolCalls {
			n += 64 + len(t.ID) + len(t.Name) + len(t.Arguments)
		}
	}
	return n
}

// Cache stores entries by key. Get returns nil and no error on a miss.
type Cache interface {
	Get(ctx context.Context, key string) (*Entry, error)
	Set(ctx context.Context, key string, e *Entry) error
}

// Memory is an in-process cache bounded by bytes. Safe for concurrent use.
type Memory struct {
	c *otter.Cache[string, *Entry]
}

// NewMemory returns a Memory holding at most maxBytes of entries.
func NewMemory(maxBytes int64) (*Memory, error) {
	if maxBytes <= 0 {
		maxBytes = 64 << 20
	}
	c, err := otter.New(&otter.Options[string, *Entry]{
		MaximumWeight: uint64(maxBytes),
		Weigher: func(_ string, e *Entry) uint32 {
			return uint32(min(e.Size(), 1<<31))
		},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, *Entry]) time.Duration {
			return max(time.Until(e.Value.Expires), time.Millisecond)
		}),
	})
	if err != nil {
		return nil, err
	}
	return &Memory{c: c}, nil
}

// Get implements Cache.
func (m *Memory) Get(_ context.Context, key string) (*Entry, error) {
	e, ok := m.c.GetIfPresent(key)
	if !ok || time.Now().After(e.Expires) {
		return nil, nil
	}
	return e, nil
}

// Set implements Cache.
func (m *Memory) Set(_ context.Context, key string, e *Entry) error {
	m.c.Set(key, e)
	return nil
}

// Close stops the cache's background cleanup.
func (m *Memory) Close() error {
	m.c.StopAllGoroutines()
	return nil
}
