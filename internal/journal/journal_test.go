package journal_test

import (
	"bytes"
	"testing"

	"github.com/firstword/firstword/internal/journal"
)

func TestCopier(t *testing.T) {
	var c journal.Copier
	if got := c.Copy(nil); got != nil {
		t.Errorf("Copy(nil) = %q, want nil", got)
	}
	small := []byte(`{"text":"a"}`)
	large := bytes.Repeat([]byte("x"), 4<<10)
	a, b, l := c.Copy(small), c.Copy(small), c.Copy(large)
	small[0], large[0] = 'X', 'X'
	if string(a) != `{"text":"a"}` || string(b) != `{"text":"a"}` || l[0] != 'x' || len(l) != len(large) {
		t.Fatalf("copies changed with their sources: %q, %q, %q...", a, b, l[:4])
	}
	// Copies share a chunk but never each other's bytes.
	if cap(a) != len(a) {
		t.Errorf("cap(copy) = %d, want %d: an append would write over the next copy", cap(a), len(a))
	}
	if string(append(a, '!')) != `{"text":"a"}!` || string(b) != `{"text":"a"}` {
		t.Errorf("appending to a copy changed the next one: %q", b)
	}
}

func TestEventSize(t *testing.T) {
	for _, tc := range []struct {
		data string
		want int64
	}{{"", 64}, {`{"text":"hi"}`, 13 + 64}} {
		if got := (journal.Event{Data: []byte(tc.data)}).Size(); got != tc.want {
			t.Errorf("Event{Data: %q}.Size() = %d, want %d", tc.data, got, tc.want)
		}
	}
}
