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
