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
// deadlines, aliases and health.
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
	t0 := time.Unix(1e9, 0)
	if d, err := l.Deadline("chat", t0, 0); d != t0.Add(time.Minute) || err != nil {
		t.Errorf("Deadline(chat) = arrival+%v, %v", d.Sub(t0), err)
	}
	if _, err := l.Deadline("unknown", t0, 0); !errors.Is(err, router.ErrUnknownModel) {
		t.Errorf("Deadline(unknown) = %v, want router.ErrUnknownModel", err)
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

func (r resolving) Deadline(name string, arrival time.Time, _ time.Duration) (time.Time, error) {
	if name == "openai/gpt-4o" {
		return time.Time{}, errPassthroughOff
	}
	return arrival.Add(time.Second), nil
}

func (r resolving) PassthroughModels() []router.PassthroughModel {
	return []router.PassthroughModel{{ID: "local/small", Provider: "local"}}
}

// TestDeadline checks the router's Deadline and PassthroughModels through
// the levers: the router's deadline or why it does not serve a name; its
// PROVIDER/MODEL names when it has the method, else none.
func TestDeadline(t *testing.T) {
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
			t0 := time.Unix(1e9, 0)
			d, err := l.Deadline(tt.model, t0, 0)
			if !errors.Is(err, tt.err) || err == nil && d.Sub(t0) != tt.want {
				t.Errorf("Deadline(%q) = arrival+%v, %v; want arrival+%v, %v", tt.model, d.Sub(t0), err, tt.want, tt.err)
			}
			if diff := cmp.Diff(tt.models, l.PassthroughModels()); diff != "" {
				t.Errorf("PassthroughModels (-want +got):\n%s", diff)
			}
		})
	}
}
