package conversation

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/store"
)

// checkpointer saves a streaming answer in the background, at most every
// interval or every `every` tokens, so that a crash loses little and the
// stream never waits on the database. While the model is silent it still
// touches the row every touchEvery, so that other replicas can tell a live
// stream from one whose replica crashed (store.InterruptStreaming).
//
// While the answer's journal keeps it for another process (durable), the
// journal is what a take-over continues from: the row is saved only
// every durableEvery, to show the answer alive to the stale-row sweeps.
// When the journal stops keeping it (Redis unreachable, the answer cut),
// the next tick saves the text delivered and the row is saved as above
// again, until the journal is back.
type checkpointer struct {
	st       store.Store
	id       string
	ready    <-chan struct{} // closed once the row exists
	interval time.Duration
	every    int
	touch    time.Duration
	// held, if set, is false once another process took the answer over:
	// nothing more is saved.
	held func() bool
	// durable, if set, reports whether the journal keeps the answer
	// (Input.Durable); durableEvery is how often the row is saved then.
	durable      func() bool
	durableEvery time.Duration

	// mu guards the state shared by the stream's goroutine (update) and the
	// saver's (save); the database write itself is made outside it.
	mu      sync.Mutex
	content string
	// thinking is the thinking delivered, with its signatures, after
	// prior's (an answer taken over: the thinking its first producer
	// stored).
	thinking chat.ThinkingCollector
	prior    []chat.ThinkingBlock
	tokens   int
	saved    int // tokens at the last save
	dirty    bool
	lastAt   time.Time

	// kick asks for a save now (buffered: a pending kick covers later ones);
	// stopped is closed once to end the saver; done is closed by the saver
	// when it has returned.
	kick    chan struct{}
	stopped chan struct{}
	done    chan struct{}
	once    sync.Once
}

// newCheckpointer starts the saver of answer id; held, durable and prior
// are the fields' (nil: none), touch how often a silent stream's row is
// rewritten (0: touchEvery), durableEvery how often the row is saved
// while durable says the journal keeps the answer (0:
// DurableCheckpointEvery).
func newCheckpointer(st store.Store, id string, ready <-chan struct{}, interval time.Duration, every int, touch time.Duration, held func() bool, prior []chat.ThinkingBlock,
	durable func() bool, durableEvery time.Duration) *checkpointer {
	if touch <= 0 {
		touch = touchEvery
	}
	if durableEvery <= 0 {
		durableEvery = DurableCheckpointEvery
	}
	c := &checkpointer{st: st, id: id, ready: ready, interval: interval, every: every, touch: touch, lastAt: time.Now(), held: held, prior: prior,
		durable: durable, durableEvery: durableEvery,
		kick: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// update records the text delivered so far.
// update is called on the stream's goroutine for every delta: it only
// swaps the text under the lock and never waits on the saver.
func (c *checkpointer) update(content string, tokens int) {
	c.mu.Lock()
	c.content = content
	c.changed(tokens)
}

// think folds in the thinking of a chunk that was delivered (text, a
// signature, a redacted block, a restart), on the stream's goroutine as
// update.
func (c *checkpointer) think(ch *chat.Chunk, tokens int) {
	c.mu.Lock()
	c.thinking.Add(ch)
	c.changed(tokens)
}

// changed marks the state dirty and kicks a save when enough tokens came
// since the last; it unlocks mu.
func (c *checkpointer) changed(tokens int) {
	c.tokens, c.dirty = tokens, true
	due := tokens-c.saved >= c.every
	c.mu.Unlock()
	if due {
		select {
		// A kick already pending will save this text too: never block the stream.
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// run is the saver's goroutine: a save at every tick (a touch when
// silent) and whenever update kicks it.
func (c *checkpointer) run() {
	defer close(c.done)
	// No checkpoint before the row it updates is written.
	select {
	case <-c.stopped:
		return
	case <-c.ready:
	}
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-c.stopped:
			return
		case <-t.C:
		case <-c.kick:
		}
		c.save()
	}
}

// touchEvery is how often a silent stream's row is rewritten to show it is
// alive, by default (Options.TouchInterval); StreamLease must be several
// times longer.
const touchEvery = 5 * time.Second

// StreamLease is how long a streaming row may go unwritten before another
// replica takes its stream for dead.
const StreamLease = 30 * time.Second

// DurableCheckpointEvery is how often the row of an answer whose journal
// keeps it is saved, by default (Options.DurableCheckpointInterval):
// rarely enough that a turn of a few seconds writes no checkpoint, often
// enough that StreamLease is several times longer. The shared journal's
// lost-answer sweep asks only about rows quiet for longer than it.
const DurableCheckpointEvery = 5 * time.Second

func (c *checkpointer) save() {
	if c.held != nil && !c.held() {
		return
	}
	durable := c.durable != nil && c.durable()
	c.mu.Lock()
	quiet := time.Since(c.lastAt)
	switch {
	case durable && quiet < c.durableEvery:
		// The journal keeps the answer: the row waits, its text still
		// dirty (saved as soon as the journal stops keeping it). The
		// tokens count as saved, so that the stream kicks the saver
		// every `every` tokens, not at every delta.
		c.saved = c.tokens
		c.mu.Unlock()
		return
	case !durable && !c.dirty && quiet < c.touch:
		c.mu.Unlock()
		return
	}
	// Marked clean before the write: an update during the write is saved
	// next time. A failed write is not retried at once: the next save (new
	// text, or the touch) or the turn's final save covers it.
	content, tokens, blocks := c.content, c.tokens, c.blocks()
	c.dirty, c.saved, c.lastAt = false, tokens, time.Now()
	c.mu.Unlock()
	thinking := thinkingJSON(blocks)
	// Not the request's context: a checkpoint is wanted even as the client
	// leaves; its own timeout keeps a slow database from holding stop.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.st.CheckpointMessage(ctx, c.id, content, thinking, tokens, time.Now().UTC())
}

// blocks is the thinking so far (nil: none); mu is held.
func (c *checkpointer) blocks() []chat.ThinkingBlock {
	if c.thinking.Empty() {
		return c.prior
	}
	return append(c.prior[:len(c.prior):len(c.prior)], c.thinking.Blocks()...)
}

// delivered returns the thinking delivered; call it after stop.
func (c *checkpointer) delivered() []chat.ThinkingBlock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blocks()
}

// thinkingJSON is the stored form of a message's thinking
// (store.Message.Thinking): nil for none.
func thinkingJSON(blocks []chat.ThinkingBlock) []byte {
	if len(blocks) == 0 {
		return nil
	}
	// Cannot fail: strings only.
	b, _ := json.Marshal(blocks)
	return b
}

// stop ends the background saver and waits for it; the final state is
// written by the caller.
func (c *checkpointer) stop() {
	// Once: stream calls stop and defers it too.
	c.once.Do(func() { close(c.stopped) })
	<-c.done
}
