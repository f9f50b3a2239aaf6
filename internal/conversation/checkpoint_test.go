package conversation

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCheckpointer checks when a streaming answer is saved: every
// interval while it changes, at once every `every` tokens, every
// touchEvery while the model is silent (so other replicas see the stream
// is alive), never after stop.
func TestCheckpointer(t *testing.T) {
	const interval, every = 500 * time.Millisecond, 4
	ms := time.Millisecond
	// saved is a checkpoint at an offset from the start.
	type saved struct {
		Content string
		Tokens  int
		At      time.Duration
	}
	tests := []struct {
		name string
		// play drives the checkpointer; sleep advances the fake clock and
		// lets the saver run.
		play func(c *checkpointer, sleep func(time.Duration))
		want []saved
	}{
		{
			name: "interval",
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(1200 * ms)
			},
			// Saved at the first tick; the second finds nothing new.
			want: []saved{{"Hel", 1, 500 * ms}},
		},
		{
			name: "every interval while it changes",
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(700 * ms)
				c.update("Hello", 2)
				sleep(700 * ms)
			},
			want: []saved{{"Hel", 1, 500 * ms}, {"Hello", 2, 1000 * ms}},
		},
		{
			name: "token count",
			play: func(c *checkpointer, sleep func(time.Duration)) {
				sleep(100 * ms)
				c.update("one two three four", every)
				sleep(100 * ms)
				c.update("one two three four five", every+1) // one more: not due
				sleep(400 * ms)
			},
			want: []saved{{"one two three four", 4, 100 * ms}, {"one two three four five", 5, 500 * ms}},
		},
		{
			name: "touch while silent",
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(6 * time.Second)
			},
			// The row is rewritten touchEvery after the last save.
			want: []saved{{"Hel", 1, 500 * ms}, {"Hel", 1, 500*ms + touchEvery}},
		},
		{
			name: "silent from the start",
			play: func(c *checkpointer, sleep func(time.Duration)) {
				sleep(touchEvery + 100*ms)
			},
			want: []saved{{"", 0, touchEvery}},
		},
		{
			// stop writes nothing: the caller writes the final state.
			name: "stop",
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(100 * ms)
				c.stop()
				c.update("Hello", every) // late: nobody saves it
				sleep(touchEvery * 2)
			},
			want: nil,
		},
	}
	written := make(chan struct{})
	close(written)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newFakeStore()
				start := time.Now()
				c := newCheckpointer(st, "msg_1", written, interval, every, 0, nil, nil)
				tt.play(c, func(d time.Duration) {
					time.Sleep(d)
					synctest.Wait()
				})
				c.stop()
				c.stop() // twice is fine
				_, cps := st.saved()
				var got []saved
				for _, cp := range cps {
					if cp.ID != "msg_1" {
						t.Errorf("checkpoint of message %q, want msg_1", cp.ID)
					}
					got = append(got, saved{cp.Content, cp.Tokens, cp.At.Sub(start)})
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("checkpoints (-want +got):\n%s", diff)
				}
			})
		})
	}
}
