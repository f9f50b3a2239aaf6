package store

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestStamps(t *testing.T) {
	local := time.FixedZone("UTC+2", 2*60*60)
	created := time.Date(2025, 3, 14, 11, 26, 53, 589_793_238, local)
	updated := created.Add(time.Minute)
	wantCreated := time.Date(2025, 3, 14, 9, 26, 53, 589_793_000, time.UTC)

	c, u := Stamps(created, updated)
	if !c.Equal(wantCreated) || c.Location() != time.UTC || !u.Equal(wantCreated.Add(time.Minute)) {
		t.Errorf("Stamps(created, updated) = %v, %v; want %v and a minute later, in UTC", c, u, wantCreated)
	}
	if c, u := Stamps(created, time.Time{}); !c.Equal(wantCreated) || !u.Equal(c) {
		t.Errorf("Stamps(created, zero) = %v, %v; want %v twice", c, u, wantCreated)
	}
	before := time.Now().Truncate(time.Microsecond)
	if got := Stamp(time.Time{}); got.Before(before) || got.After(time.Now()) || got.Nanosecond()%1000 != 0 {
		t.Errorf("Stamp(zero) = %v, want now to the microsecond", got)
	}
}

func TestCeilMicro(t *testing.T) {
	at := time.Date(2025, 3, 14, 9, 26, 53, 589_793_000, time.UTC)
	for _, tc := range []struct{ in, want time.Time }{
		{at, at},
		{at.Add(1), at.Add(time.Microsecond)},
		{at.Add(999), at.Add(time.Microsecond)},
	} {
		if got := CeilMicro(tc.in); !got.Equal(tc.want) {
			t.Errorf("CeilMicro(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestBumped(t *testing.T) {
	updated := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	msg := func(d time.Duration) *Message { return &Message{CreatedAt: updated.Add(d)} }
	for _, tc := range []struct {
		name  string
		added []*Message
		want  time.Time
	}{
		{"none", nil, updated},
		{"last later", []*Message{msg(-time.Hour), msg(time.Minute)}, updated.Add(time.Minute)},
		{"last earlier", []*Message{msg(time.Hour), msg(-time.Minute)}, updated},
	} {
		if got := Bumped(updated, tc.added); !got.Equal(tc.want) {
			t.Errorf("%s: Bumped = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNotFound(t *testing.T) {
	if err := NotFound(fmt.Errorf("get: %w", sql.ErrNoRows)); err != ErrNotFound {
		t.Errorf("NotFound(no rows) = %v, want ErrNotFound", err)
	}
	other := errors.New("boom")
	if err := NotFound(other); err != other {
		t.Errorf("NotFound(other) = %v, want it unchanged", err)
	}
	if err := NotFound(nil); err != nil {
		t.Errorf("NotFound(nil) = %v, want nil", err)
	}
}

func TestAppendUsageArgs(t *testing.T) {
	args := AppendUsageArgs([]any{"before"}, &Usage{RequestID: "r1", TTFWMs: 12.5}, "at")
	cols := strings.Split(UsageColumns, ",")
	if len(args) != 1+len(cols) {
		t.Fatalf("AppendUsageArgs appended %d values for %d columns", len(args)-1, len(cols))
	}
	for i, col := range cols {
		want := map[string]any{"request_id": "r1", "created_at": "at", "ttfw_ms": 12.5}[strings.TrimSpace(col)]
		if want != nil && args[1+i] != want {
			t.Errorf("value of %s = %v, want %v", strings.TrimSpace(col), args[1+i], want)
		}
	}
}
