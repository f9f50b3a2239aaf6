package levers

import (
	"errors"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/router"
)

// TestPassthrough checks what the levers pass on as the router's: a name
// the levers do not list goes to the router as it is, and the router's
// timeouts.
func TestPassthrough(t *testing.T) {
	r := &scripted{script: hello}
	l := New(Options{Inner: r, Aliases: map[string]Alias{"chat": {MaxTokens: 10}}})
	req := &chat.Request{Model: "unlisted", Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}}
	chunks, _, err := read(t.Context(), l, req, nil, 0) // no report: the levers make one
	if err != nil || len(chunks) != 3 {
		t.Fatalf("read = %d chunks, %v", len(chunks), err)
	}
	if reqs, _, _ := r.calls(); len(reqs) != 1 || reqs[0] != req {
		t.Errorf("the router was sent %v, want the request itself", reqs)
	}
}

// resolving is a router that says why it does not serve a name.
type resolving struct{ *scripted }

var errPassthroughOff = errors.New("models_passthrough is off")

func (r resolving) Timeout(name string) (time.Duration, error) {
	if name == "openai/gpt-4o" {
		return 0, errPassthroughOff
	}
	return time.Second, nil
}

// TestTimeout checks the router's Timeout through the levers: the alias's
// timeout, or why the router does not serve a name.
func TestTimeout(t *testing.T) {
	tests := []struct {
		name  string
		inner Inner
		model string
		want  time.Duration
		err   error
	}{
		{name: "an alias", inner: &scripted{}, model: "chat", want: time.Minute},
		{name: "an unknown name", inner: &scripted{}, model: "unknown", err: router.ErrUnknownModel},
		{name: "the router resolves", inner: resolving{&scripted{}}, model: "chat", want: time.Second},
		{name: "the router says why not", inner: resolving{&scripted{}}, model: "openai/gpt-4o", err: errPassthroughOff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{Inner: tt.inner})
			d, err := l.Timeout(tt.model)
			if !errors.Is(err, tt.err) || d != tt.want {
				t.Errorf("Timeout(%q) = %v, %v; want %v, %v", tt.model, d, err, tt.want, tt.err)
			}
		})
	}
}
