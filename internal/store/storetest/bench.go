package storetest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// Bench runs the benchmarks of the chat path, each goroutine on its own
// conversation as concurrent chats would be. open must return a new, empty
// store for each call and close it when b ends (b.Cleanup).
//
// ChatTurn is everything a /v1/chat turn writes: the user message, the
// assistant message, two checkpoints, the finish and the usage row. Besides
// ns/op (the inverse of throughput, as for every RunParallel benchmark) it
// reports the p50 and p99 latency of one turn. With b.RunParallel's
// GOMAXPROCS goroutines these are the latencies of a busy but not
// saturated store; a closed loop of many more goroutines would only
// measure its own queue.
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("AddMessage", func(b *testing.B) {
		runChats(b, open(b), func(c *chat) error {
			return c.s.AddMessages(b.Context(), c.user())
		})
	})
	b.Run("CheckpointMessage", func(b *testing.B) {
		runChats(b, open(b), func(c *chat) error {
			if c.m == nil {
				if err := c.s.AddMessages(b.Context(), c.assistant()); err != nil {
					return err
				}
			}
			return c.s.CheckpointMessage(b.Context(), c.m.ID, answer[:len(answer)/2], nil, 200, time.Now())
		})
	})
	b.Run("FinishMessage", func(b *testing.B) {
		runChats(b, open(b), func(c *chat) error {
			if c.m == nil {
				if err := c.s.AddMessages(b.Context(), c.assistant()); err != nil {
					return err
				}
			}
			return c.s.FinishMessage(b.Context(), c.finished())
		})
	})
	// Usage rows as the gateway writes them: in batches from a background
	// writer. ns/op is per row.
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("RecordUsage/batch=%d", n), func(b *testing.B) {
			s := open(b)
			batch := make([]*store.Usage, n)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if i%n == 0 && i > 0 {
					if err := s.RecordUsage(b.Context(), batch...); err != nil {
						b.Fatal(err)
					}
				}
				batch[i%n] = &store.Usage{RequestID: fmt.Sprint("req-", i), TenantID: "local", Surface: "openai", Model: "chat",
					Deployment: "up/m", Status: "complete", InputTokens: 10, OutputTokens: 20, Cost: 0.0001, TTFTMs: 50, TotalMs: 500}
				i++
			}
		})
	}
	b.Run("ChatTurn", func(b *testing.B) {
		var mu sync.Mutex
		var all []time.Duration
		runChats(b, open(b), func(c *chat) error {
			start := time.Now()
			if err := c.turn(b); err != nil {
				return err
			}
			c.lat = append(c.lat, time.Since(start))
			return nil
		}, func(c *chat) {
			mu.Lock()
			all = append(all, c.lat...)
			mu.Unlock()
		})
		if len(all) > 0 {
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs/turn")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs/turn")
		}
	})
}

var (
	question = strings.Repeat("How do I rotate an API key without downtime? ", 4)
	answer   = strings.Repeat("Create the new key, deploy it, then revoke the old one. ", 30)
	timings  = []byte(`{"guard_ms":0.4,"context_ms":1.2,"route_ms":0.1,"ttft_ms":412.5,"total_ms":2210.3}`)
)

// chat is one benchmark goroutine's conversation.
type chat struct {
	s      store.Store
	tenant string
	conv   string
	n      int
	m      *store.Message // the assistant message in progress
	lat    []time.Duration
}

func (c *chat) nextID() string {
	c.n++
	return c.conv + "-m" + strconv.Itoa(c.n)
}

func (c *chat) user() *store.Message {
	return &store.Message{ID: c.nextID(), ConversationID: c.conv, TenantID: c.tenant, Role: "user",
		Content: question, Status: store.StatusComplete}
}

func (c *chat) assistant() *store.Message {
	c.m = &store.Message{ID: c.nextID(), ConversationID: c.conv, TenantID: c.tenant, Role: "assistant",
		Status: store.StatusStreaming, Model: "fast"}
	return c.m
}

func (c *chat) finished() *store.Message {
	m := c.m
	m.Status, m.Content, m.FinishReason, m.Deployment = store.StatusComplete, answer, "stop", "openai-eu"
	m.InputTokens, m.OutputTokens, m.Cost, m.Timings, m.UpdatedAt = 220, 400, 0.0042, timings, time.Time{}
	return m
}

func (c *chat) turn(b *testing.B) error {
	ctx := b.Context()
	if err := c.s.AddMessages(ctx, c.user()); err != nil {
		return err
	}
	if err := c.s.AddMessages(ctx, c.assistant()); err != nil {
		return err
	}
	for _, n := range []int{len(answer) / 3, 2 * len(answer) / 3} {
		if err := c.s.CheckpointMessage(ctx, c.m.ID, answer[:n], nil, n/5, time.Now()); err != nil {
			return err
		}
	}
	if err := c.s.FinishMessage(ctx, c.finished()); err != nil {
		return err
	}
	return c.s.RecordUsage(ctx, &store.Usage{RequestID: c.m.ID, TenantID: c.tenant, UserID: "alice",
		Surface: "chat", Model: "fast", Deployment: "openai-eu", Status: "complete",
		InputTokens: 220, OutputTokens: 400, Cost: 0.0042, TTFTMs: 412.5, TotalMs: 2210.3})
}

// runChats runs op b.N times over goroutines of b.RunParallel, each with
// its own conversation; done, if given, gets each chat at the end.
func runChats(b *testing.B, s store.Store, op func(*chat) error, done ...func(*chat)) {
	ctx := b.Context()
	if err := s.CreateTenant(ctx, &store.Tenant{ID: "bench", Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := &chat{s: s, tenant: "bench", conv: "c" + strconv.FormatInt(next.Add(1), 10)}
		if err := s.CreateConversation(ctx, &store.Conversation{ID: c.conv, TenantID: c.tenant,
			UserID: "alice", Model: "fast"}); err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if err := op(c); err != nil {
				b.Error(err)
				return
			}
		}
		for _, f := range done {
			f(c)
		}
	})
}
