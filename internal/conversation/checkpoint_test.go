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
// is alive), never after stop; while the answer's journal keeps it,
// every DurableCheckpointEvery only, and as usual again from the tick
// after the journal failed.
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
		// journal, if set, says whether the answer's journal keeps it
		// (Input.Durable), by the time since the start.
		journal func(time.Duration) bool
		want    []saved
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
		{
			// The journal keeps the answer: a turn of a few seconds
			// writes no checkpoint, whatever its tokens.
			name:    "journal keeps a short answer",
			journal: func(time.Duration) bool { return true },
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(700 * ms)
				c.update("one two three four five", every+1)
				sleep(100 * ms)
				c.update("one two three four five six seven eight nine", 2*every+1)
				sleep(DurableCheckpointEvery - 900*ms)
			},
			want: nil,
		},
		{
			name:    "journal keeps a long answer",
			journal: func(time.Duration) bool { return true },
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(7 * time.Second)
				c.update("Hello", 2)
				sleep(4 * time.Second)
			},
			// Every DurableCheckpointEvery, text or not.
			want: []saved{{"Hel", 1, DurableCheckpointEvery}, {"Hello", 2, 2 * DurableCheckpointEvery}},
		},
		{
			// The journal fails at 2s: the text delivered is saved at the
			// next tick, then as without a journal.
			name:    "journal fails",
			journal: func(d time.Duration) bool { return d < 2*time.Second },
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(time.Second)
				c.update("Hello", 2)
				sleep(1200 * ms)
				c.update("Hello wor", 3)
				sleep(time.Second)
			},
			want: []saved{{"Hello", 2, 2 * time.Second}, {"Hello wor", 3, 2500 * ms}},
		},
		{
			// Failing from 1s to 2s: checkpoints as usual meanwhile, rare
			// again once it is back.
			name:    "journal fails and comes back",
			journal: func(d time.Duration) bool { return d < time.Second || d >= 2*time.Second },
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(1200 * ms)
				c.update("Hello", 2)
				sleep(time.Second)
				c.update("Hello wor", 3)
				sleep(5 * time.Second)
			},
			want: []saved{{"Hel", 1, time.Second}, {"Hello", 2, 1500 * ms}, {"Hello wor", 3, 1500*ms + DurableCheckpointEvery}},
		},
		{
			// The journal never wrote (Redis down from the start): the
			// checkpoints are the usual ones.
			name:    "journal down",
			journal: func(time.Duration) bool { return false },
			play: func(c *checkpointer, sleep func(time.Duration)) {
				c.update("Hel", 1)
				sleep(700 * ms)
				c.update("Hello", 2)
				sleep(700 * ms)
			},
			want: []saved{{"Hel", 1, 500 * ms}, {"Hello", 2, 1000 * ms}},
		},
	}
	written := make(chan struct{})
	close(written)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newFakeStore()
				start := time.Now()
				var durable func() bool
				if tt.journal != nil {
					durable = func() bool { return tt.journal(time.Since(start)) }
				}
				c := newCheckpointer(st, "msg_1", written, interval, every, 0, nil, nil, durable, 0)
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
