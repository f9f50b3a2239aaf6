package upstream

import (
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

func TestExcerpt(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"longer text", 6, "longer…"},
		{"héllo", 2, "h…"}, // é is two bytes: not cut in half
		{"日本", 1, "…"},
	}
	for _, tt := range tests {
		if got := Excerpt(tt.s, tt.n); got != tt.want {
			t.Errorf("Excerpt(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// step is one event of a fake stream: the chunk it produces (if Text is
// not empty), whether the event after it is already buffered, and how it
// ends the stream.
type step struct {
	text     string
	buffered bool
	done     bool
	err      error
}

type fakeStepper struct {
	steps []step
	i     int
}

func (f *fakeStepper) Step(c *chat.Chunk) (emit, done bool, err error) {
	if f.i >= len(f.steps) {
		return false, false, errors.New("read past the end")
	}
	s := f.steps[f.i]
	f.i++
	*c = chat.Chunk{Text: s.text}
	return s.text != "", s.done, s.err
}

func (f *fakeStepper) Buffered() bool {
	return f.i > 0 && f.steps[f.i-1].buffered
}

func TestHoldBack(t *testing.T) {
	broken := errors.New("broken")
	type got struct {
		Text string
		More bool
	}
	tests := []struct {
		name    string
		steps   []step
		want    []got
		wantErr error
	}{
		{
			name:    "each chunk alone",
			steps:   []step{{text: "a"}, {text: "b"}, {done: true}},
			want:    []got{{"a", false}, {"b", false}},
			wantErr: io.EOF,
		},
		{
			name:    "a chunk followed at once is More",
			steps:   []step{{text: "a", buffered: true}, {text: "b"}, {done: true}},
			want:    []got{{"a", true}, {"b", false}},
			wantErr: io.EOF,
		},
		{
			name:    "an event with no chunk between",
			steps:   []step{{text: "a", buffered: true}, {buffered: true}, {text: "b", buffered: true}, {done: true}},
			want:    []got{{"a", true}, {"b", false}},
			wantErr: io.EOF,
		},
		{
			name:    "the held chunk goes out before the error",
			steps:   []step{{text: "a", buffered: true}, {err: broken}},
			want:    []got{{"a", false}},
			wantErr: broken,
		},
		{
			name:    "a chunk of the failing event is dropped",
			steps:   []step{{text: "a", err: broken}},
			wantErr: broken,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h HoldBack
			s := &fakeStepper{steps: tt.steps}
			var chunks []got
			var err error
			for {
				var c *chat.Chunk
				if c, err = h.Next(s); err != nil {
					break
				}
				chunks = append(chunks, got{c.Text, c.More})
			}
			if diff := cmp.Diff(tt.want, chunks); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			if err != tt.wantErr {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if _, again := h.Next(s); again != tt.wantErr {
				t.Errorf("Next after the end = %v, want %v again", again, tt.wantErr)
			}
		})
	}
}
