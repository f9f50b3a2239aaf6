package levers

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/router"
)

// TestPassthrough checks what the levers pass on as the router's: a name
// the levers do not list goes to the router as it is, and the router's
// timeouts, aliases and health.
func TestPassthrough(t *testing.T) {
	r := &scripted{script: hello}
	l := New(Options{Inner: r, Aliases: map[string]Alias{"chat": {MaxTokens: 10}}})
	req := &chat.Request{Model: "unknown", Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}}
	chunks, _, err := read(t.Context(), l, req, nil, 0) // no report: the levers make one
	if err != nil || len(chunks) != 3 {
		t.Fatalf("read = %d chunks, %v", len(chunks), err)
	}
	if reqs, _, _ := r.calls(); len(reqs) != 1 || reqs[0] != req {
		t.Errorf("the router was sent %v, want the request itself", reqs)
	}
	if d, ok := l.Timeout("chat"); d != time.Minute || !ok {
		t.Errorf("Timeout(chat) = %v, %v", d, ok)
	}
	if _, ok := l.Timeout("unknown"); ok {
		t.Error("Timeout(unknown) is served")
	}
	if diff := cmp.Diff(r.Aliases(), l.Aliases()); diff != "" {
		t.Errorf("Aliases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(r.Health(), l.Health()); diff != "" {
		t.Errorf("Health (-want +got):\n%s", diff)
	}
}

// resolving is a router that says why it does not serve a name, and
// which PROVIDER/MODEL names it serves.
type resolving struct{ *scripted }

var errPassthroughOff = errors.New("models_passthrough is off")

func (r resolving) Resolve(name string) (time.Duration, error) {
	if name == "openai/gpt-4o" {
		return 0, errPassthroughOff
	}
	return time.Second, nil
}

func (r resolving) PassthroughModels() []router.PassthroughModel {
	return []router.PassthroughModel{{ID: "local/small", Provider: "local"}}
}

// TestResolve checks the router's Resolve and PassthroughModels through
// the levers: the router's own when it has them, else the timeout (or
// router.ErrUnknownModel) and none.
func TestResolve(t *testing.T) {
	tests := []struct {
		name   string
		inner  Inner
		model  string
		want   time.Duration
		err    error
		models []router.PassthroughModel
	}{
		{name: "an alias", inner: &scripted{}, model: "chat", want: time.Minute},
		{name: "an unknown name", inner: &scripted{}, model: "unknown", err: router.ErrUnknownModel},
		{name: "the router resolves", inner: resolving{&scripted{}}, model: "chat", want: time.Second, models: []router.PassthroughModel{{ID: "local/small", Provider: "local"}}},
		{name: "the router says why not", inner: resolving{&scripted{}}, model: "openai/gpt-4o", err: errPassthroughOff, models: []router.PassthroughModel{{ID: "local/small", Provider: "local"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{Inner: tt.inner})
			if d, err := l.Resolve(tt.model); d != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("Resolve(%q) = %v, %v; want %v, %v", tt.model, d, err, tt.want, tt.err)
			}
			if diff := cmp.Diff(tt.models, l.PassthroughModels()); diff != "" {
				t.Errorf("PassthroughModels (-want +got):\n%s", diff)
			}
		})
	}
}
