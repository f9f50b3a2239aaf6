package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// stalled is a store whose every read waits until its context ends, as a
// frozen database does.
type stalled struct{ store.Store }

func (stalled) GetConversation(ctx context.Context, _, _ string) (*store.Conversation, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestWithTimeout(t *testing.T) {
	st := store.WithTimeout(stalled{}, 20*time.Millisecond)

	start := time.Now()
	_, err := st.GetConversation(context.Background(), "t", "c")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("stalled store: err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stalled store answered after %s", d)
	}

	// A caller that leaves first gets its own error, not ErrUnavailable.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = st.GetConversation(ctx, "t", "c")
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("cancelled caller: err = %v, want context.Canceled only", err)
	}
}

// Operations under one budget share it: the second waits only for what
// the first left, and one made after it ran out fails at once.
func TestWithBudget(t *testing.T) {
	st := store.WithTimeout(stalled{}, time.Hour)
	ctx := store.WithBudget(context.Background(), time.Now().Add(30*time.Millisecond))
	start := time.Now()
	for range 2 {
		if _, err := st.GetConversation(ctx, "t", "c"); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	}
	// Two operations of a 30 ms budget, under an hour's timeout each.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("two operations under a 30ms budget took %s", d)
	}
}
