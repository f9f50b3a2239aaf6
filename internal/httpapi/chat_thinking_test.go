package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/journal"
	redisjournal "github.com/firstword/firstword/internal/journal/redis"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/redisconn"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/sse"
	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/store/sqlite"
)

// thinkingSig is the signature thinker's thinking ends with.
const thinkingSig = "RXF1aXZhbGVudCBzaWduYXR1cmU="

// thinker is a provider that thinks "step 1. step 2. ..." in n deltas,
// signs that block, sends a redacted block, then answers "Hello" and
// " world". stall stops it, until cancelled, after its thinking
// ("thinking") or after its first word ("answer"); fail ends it with an
// error after its first word.
func thinker(n int, stall string, fail bool) provider.Provider {
	return providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			wait := func() bool {
				select {
				case <-ctx.Done():
					yield(chat.Chunk{}, context.Cause(ctx))
					return false
				case <-time.After(5 * time.Millisecond):
					return true
				}
			}
			hang := func() {
				<-ctx.Done()
				yield(chat.Chunk{}, context.Cause(ctx))
			}
			for i := range n {
				if !wait() || !yield(chat.Chunk{Thinking: fmt.Sprintf("step %d. ", i+1), Model: "m"}, nil) {
					return
				}
			}
			if !yield(chat.Chunk{Thought: &chat.Thought{Signature: thinkingSig, Format: chat.ThinkingAnthropic}}, nil) ||
				!yield(chat.Chunk{Thought: &chat.Thought{Redacted: "b3BhcXVl", Format: chat.ThinkingAnthropic}}, nil) {
				return
			}
			if stall == "thinking" {
				hang()
				return
			}
			if !wait() || !yield(chat.Chunk{Text: "Hello"}, nil) {
				return
			}
			switch {
			case stall == "answer":
				hang()
				return
			case fail:
				yield(chat.Chunk{}, &chat.Error{Category: chat.CategoryUpstreamUnavailable, Message: "the upstream broke"})
				return
			}
			if wait() && yield(chat.Chunk{Text: " world"}, nil) {
				yield(chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 3, OutputTokens: 20}}, nil)
			}
		}
	})
}

// thinkingServer serves /v1/chat on st and j (nil: no journal) with
// alias "m" answered by p.
func thinkingServer(t *testing.T, st store.Store, j journal.Journal, p provider.Provider) *httptest.Server {
	t.Helper()
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: p}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(10), Store: st, Journal: j,
		Chat: conversation.New(conversation.Options{Store: st}), Grace: 10 * time.Second, Lease: time.Second}))
	t.Cleanup(srv.Close)
	return srv
}

func sqliteStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "fw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := auth.EnsureTenant(t.Context(), st, auth.LocalTenant, "local"); err != nil {
		t.Fatal(err)
	}
	return st
}

// sseEvent is one event a client received.
type sseEvent struct {
	ID, Kind string
	Data     map[string]any
}

// seen is what a client was shown by the events it received: the
// answer's text, the thinking after the last restart, and how many
// redacted blocks.
type seen struct {
	Text, Thinking string
	Redacted       int
}

func shown(evs []sseEvent) seen {
	var s seen
	for _, ev := range evs {
		switch {
		case ev.Kind == "delta":
			s.Text += ev.Data["text"].(string)
		case ev.Kind == "thinking" && ev.Data["restart"] == true:
			s.Thinking, s.Redacted = "", 0
		case ev.Kind == "thinking" && ev.Data["redacted"] == true:
			s.Redacted++
		case ev.Kind == "thinking":
			s.Thinking += ev.Data["text"].(string)
		}
	}
	return s
}

// readEvents sends req and reads its events until the stream ends or
// stop (given each event) says to drop the connection.
func readEvents(t *testing.T, req *http.Request, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	var evs []sseEvent
	rd := sse.NewReader(resp.Body, 1<<20)
	for {
		e, err := rd.Next()
		if err != nil {
			return evs
		}
		ev := sseEvent{ID: e.ID, Kind: e.Type}
		if err := json.Unmarshal(e.Data, &ev.Data); err != nil {
			t.Fatalf("event %s data %q: %v", e.Type, e.Data, err)
		}
		evs = append(evs, ev)
		if stop != nil && stop(ev) {
			return evs
		}
	}
}

func postChat(t *testing.T, url string, stop func(sseEvent) bool) []sseEvent {
	req, _ := http.NewRequest("POST", url+"/v1/chat", strings.NewReader(`{"model":"m","message":"Think first."}`))
	req.Header.Set("Content-Type", "application/json")
	return readEvents(t, req, stop)
}

// storedMessage polls until the conversation's answer is no longer
// streaming and returns it as GET /v1/conversations/{id} does, and as
// stored.
func storedMessage(t *testing.T, url string, st store.Store, conv string) (messageJSON, store.Message) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/conversations/" + conv)
		if err != nil {
			t.Fatal(err)
		}
		var c conversationJSON
		json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if n := len(c.Messages); n > 0 && c.Messages[n-1].Status != store.StatusStreaming {
			msgs, err := st.ListMessages(t.Context(), "local", conv)
			if err != nil || len(msgs) != n {
				t.Fatalf("ListMessages = %d, %v", len(msgs), err)
			}
			return c.Messages[n-1], msgs[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answer of %s is still streaming", conv)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestChatThinking, on a real socket with a store on disk: /v1/chat
// streams the thinking as thinking events before the answer, numbered in
// the answer's sequence, and the message is stored with exactly what the
// client was shown (the thinking apart from the text, its signature kept
// for the model, not shown), however the answer ends.
func TestChatThinking(t *testing.T) {
	const steps = 4
	allThinking := "step 1. step 2. step 3. step 4. "
	tests := []struct {
		name   string
		p      provider.Provider
		leave  func(sseEvent) bool // drops the connection after this event
		status store.Status
		last   string
		want   seen
		signed bool
	}{
		{"done", thinker(steps, "", false), nil, store.StatusComplete, "done", seen{"Hello world", allThinking, 1}, true},
		{"error", thinker(steps, "", true), nil, store.StatusError, "error", seen{"Hello", allThinking, 1}, true},
		{
			// The provider stalls while it thinks: nothing is in flight when
			// the client leaves, so what it received is all that was sent.
			"client leaves while it thinks", thinker(steps, "thinking", false),
			func(ev sseEvent) bool { return ev.Data["redacted"] == true }, store.StatusCancelled, "thinking", seen{"", allThinking, 1}, true,
		},
		{
			"client leaves during the answer", thinker(steps, "answer", false),
			func(ev sseEvent) bool { return ev.Kind == "delta" }, store.StatusCancelled, "delta", seen{"Hello", allThinking, 1}, true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := sqliteStore(t)
			srv := thinkingServer(t, st, nil, tc.p)
			evs := postChat(t, srv.URL, tc.leave)
			if len(evs) == 0 || evs[0].Kind != "meta" {
				t.Fatalf("events %v", evs)
			}
			msgID := evs[0].Data["message_id"].(string)
			var kinds []string
			for i, ev := range evs {
				kinds = append(kinds, ev.Kind)
				if want := fmt.Sprintf("%s:%d", msgID, i); ev.ID != want {
					t.Errorf("event %d (%s) id %q, want %q", i, ev.Kind, ev.ID, want)
				}
			}
			// meta, the thinking (steps, then the redacted block), then the answer.
			wantKinds := append([]string{"meta"}, strings.Split(strings.Repeat("thinking ", steps+1), " ")[:steps+1]...)
			if n := len(wantKinds); len(kinds) < n || !cmp.Equal(kinds[:n], wantKinds) {
				t.Errorf("events %v, want them to start %v", kinds, wantKinds)
			}
			if got := kinds[len(kinds)-1]; got != tc.last {
				t.Errorf("last event %s, want %s", got, tc.last)
			}
			got := shown(evs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the client was shown (-want +got):\n%s", diff)
			}
			api, m := storedMessage(t, srv.URL, st, evs[0].Data["conversation_id"].(string))
			if m.Status != tc.status {
				t.Errorf("stored status %s, want %s", m.Status, tc.status)
			}
			// GET /v1/conversations/{id} says what the client was shown.
			var apiThinking seen
			apiThinking.Text = api.Content
			if api.Thinking != nil {
				apiThinking.Thinking, apiThinking.Redacted = api.Thinking.Text, api.Thinking.Redacted
			}
			if diff := cmp.Diff(got, apiThinking); diff != "" {
				t.Errorf("GET /v1/conversations/{id} differs from what the client was shown (-shown +stored):\n%s", diff)
			}
			// The store keeps the signed blocks, for the next turn.
			wantBlocks := []chat.ThinkingBlock{
				{Text: allThinking, Signature: thinkingSig, Format: chat.ThinkingAnthropic},
				{Redacted: "b3BhcXVl", Format: chat.ThinkingAnthropic},
			}
			if diff := cmp.Diff(wantBlocks, conversation.StoredThinking(m.Thinking)); diff != "" {
				t.Errorf("stored blocks (-want +got):\n%s", diff)
			}
			// Nothing of the signature reaches the browser.
			raw, _ := json.Marshal(api)
			if strings.Contains(string(raw), thinkingSig) || strings.Contains(string(raw), "b3BhcXVl") {
				t.Errorf("GET /v1/conversations/{id} shows a signature or redacted data: %s", raw)
			}
		})
	}
}

// TestChatThinkingResume: a client that drops in the middle of the
// thinking resumes, on another server sharing the store and the journal,
// from its Last-Event-ID and gets the rest of the thinking and the
// answer, each event once; with the Redis journal when
// FIRSTWORD_TEST_REDIS_URL is set.
func TestChatThinkingResume(t *testing.T) {
	journals := map[string]func(t *testing.T) (journal.Journal, journal.Journal){
		"memory": func(t *testing.T) (journal.Journal, journal.Journal) {
			j := journal.NewMemory(journal.Options{})
			t.Cleanup(func() { j.Close() })
			return j, j
		},
		"redis": func(t *testing.T) (journal.Journal, journal.Journal) {
			url := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
			if url == "" {
				t.Skip("FIRSTWORD_TEST_REDIS_URL not set: skipping the Redis journal")
			}
			o := journal.Options{KeyPrefix: fmt.Sprintf("fwtest:%d:", time.Now().UnixNano())}
			open := func() journal.Journal {
				j, err := redisjournal.Open(t.Context(), redisconn.Server{URL: url}, o, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { j.Close() })
				return j
			}
			return open(), open()
		},
	}
	for name, open := range journals {
		t.Run(name, func(t *testing.T) {
			ja, jb := open(t)
			st := sqliteStore(t)
			p := thinker(30, "", false)
			a, b := thinkingServer(t, st, ja, p), thinkingServer(t, st, jb, p)
			first := postChat(t, a.URL, func(ev sseEvent) bool {
				return ev.Kind == "thinking" && len(ev.Data["text"].(string)) > 0 && ev.Data["text"] == "step 3. "
			})
			conv := first[0].Data["conversation_id"].(string)
			req, _ := http.NewRequest("GET", b.URL+"/v1/conversations/"+conv+"/stream", nil)
			req.Header.Set("Last-Event-ID", first[len(first)-1].ID)
			rest := readEvents(t, req, nil)
			all := append(first, rest...)
			for i, ev := range all {
				if want := fmt.Sprintf("%s:%d", first[0].Data["message_id"], i); ev.ID != want {
					t.Fatalf("event %d (%s) id %q, want %q: the resume repeated or skipped an event", i, ev.Kind, ev.ID, want)
				}
			}
			if last := all[len(all)-1]; last.Kind != "done" {
				t.Errorf("last event %s %v, want done", last.Kind, last.Data)
			}
			var thinking strings.Builder
			for i := range 30 {
				fmt.Fprintf(&thinking, "step %d. ", i+1)
			}
			want := seen{"Hello world", thinking.String(), 1}
			if diff := cmp.Diff(want, shown(all)); diff != "" {
				t.Errorf("the client was shown, across the resume (-want +got):\n%s", diff)
			}
			api, _ := storedMessage(t, b.URL, st, conv)
			if api.Thinking == nil || api.Thinking.Text != want.Thinking || api.Content != want.Text {
				t.Errorf("stored %+v, want the thinking and the text shown", api)
			}
		})
	}
}

// TestReplayStoredThinking: an answer whose journal is gone is replayed
// from the store with its thinking before its text.
func TestReplayStoredThinking(t *testing.T) {
	st := sqliteStore(t)
	srv := thinkingServer(t, st, nil, thinker(3, "", false))
	evs := postChat(t, srv.URL, nil)
	conv := evs[0].Data["conversation_id"].(string)
	storedMessage(t, srv.URL, st, conv)
	req, _ := http.NewRequest("GET", srv.URL+"/v1/conversations/"+conv+"/stream", nil)
	replay := readEvents(t, req, nil)
	var kinds []string
	for _, ev := range replay {
		kinds = append(kinds, ev.Kind)
	}
	if diff := cmp.Diff([]string{"meta", "thinking", "thinking", "delta", "done"}, kinds); diff != "" {
		t.Errorf("replayed events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(shown(evs), shown(replay)); diff != "" {
		t.Errorf("the replay shows (-live +replayed):\n%s", diff)
	}
}
