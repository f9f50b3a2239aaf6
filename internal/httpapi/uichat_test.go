package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/journal"
	redisjournal "github.com/firstword/firstword/internal/journal/redis"
	"github.com/firstword/firstword/internal/redisconn"
	"github.com/firstword/firstword/internal/store"
)

var updateGolden = flag.Bool("update-ui-golden", false, "rewrite testdata/uichat_*.golden")

// uiChunk is one chunk of a UI message stream ("[DONE]": Type "[DONE]").
type uiChunk map[string]any

func (c uiChunk) typ() string { s, _ := c["type"].(string); return s }

// uiPost sends an AI SDK request body to /v1/ui/chat.
func uiPost(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/ui/chat", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func uiSubmitBody(chatID, text string) string {
	b, _ := json.Marshal(map[string]any{"id": chatID, "trigger": "submit-message", "model": "m", "messages": []any{
		map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}},
	}})
	return string(b)
}

// readChunks reads a UI message stream's data lines, until it ends or
// stop says to drop it; it fails on a line that is not one.
func readChunks(t *testing.T, body io.Reader, stop func(uiChunk) bool) []uiChunk {
	t.Helper()
	var out []uiChunk
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not a data line: %q", line)
		}
		c := uiChunk{"type": "[DONE]"}
		if data != "[DONE]" {
			c = uiChunk{}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatalf("chunk %q: %v", data, err)
			}
		}
		out = append(out, c)
		if stop != nil && stop(c) {
			return out
		}
	}
	return out
}

// uiText is the text of a stream's text-deltas.
func uiText(cs []uiChunk) (text, reasoning string) {
	for _, c := range cs {
		d, _ := c["delta"].(string)
		switch c.typ() {
		case "text-delta":
			text += d
		case "reasoning-delta":
			reasoning += d
		}
	}
	return text, reasoning
}

// TestUIChatGolden: a simple answer with thinking, on a real socket, is
// the AI SDK's UI message stream byte for byte (ids and metadata values
// normalised), with its header; the start's messageId is the stored
// answer's and the finish's metadata carries its timings and cost.
func TestUIChatGolden(t *testing.T) {
	st := sqliteStore(t)
	srv := thinkingServer(t, st, journal.NewMemory(journal.Options{}), thinker(2, "", false))
	resp := uiPost(t, srv.URL, uiSubmitBody("chat-golden", "Think first."))
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := resp.Header.Get("X-Vercel-Ai-Ui-Message-Stream"); got != "v1" {
		t.Errorf("x-vercel-ai-ui-message-stream = %q, want v1", got)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type = %q", ct)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	cs := readChunks(t, strings.NewReader(string(raw)), nil)
	msgID, _ := cs[0]["messageId"].(string)
	meta, _ := cs[0]["messageMetadata"].(map[string]any)
	conv, _ := meta["conversation_id"].(string)
	if !strings.HasPrefix(msgID, "msg_") || !strings.HasPrefix(conv, "conv_ui_") {
		t.Fatalf("start = %v", cs[0])
	}
	_, m := storedMessage(t, srv.URL, st, conv)
	if m.ID != msgID || m.Content != "Hello world" {
		t.Errorf("stored %s %q, streamed messageId %s", m.ID, m.Content, msgID)
	}
	var fin uiChunk
	for _, c := range cs {
		if c.typ() == "finish" {
			fin = c
		}
	}
	fm, _ := fin["messageMetadata"].(map[string]any)
	if _, ok := fm["timings"].(map[string]any); !ok || fm["cost"] == nil || fm["status"] != "complete" {
		t.Errorf("finish metadata = %v, want timings, cost and status", fm)
	}
	// Normalise: ids, and each metadata object to its sorted keys.
	got := strings.ReplaceAll(string(raw), msgID, "MSG")
	got = strings.ReplaceAll(got, conv, "CONV")
	got = regexp.MustCompile(`msg_[0-9a-z]{20}`).ReplaceAllString(got, "USERMSG")
	got = regexp.MustCompile(`"messageMetadata":\{.*\}\}`).ReplaceAllStringFunc(got, func(s string) string {
		var v map[string]map[string]any
		json.Unmarshal([]byte("{"+s), &v)
		var keys []string
		for k := range v["messageMetadata"] {
			keys = append(keys, k)
		}
		return `"messageMetadata":` + strings.Join(sortedStrings(keys), ",") + "}"
	})
	golden := filepath.Join("testdata", "uichat_simple.golden")
	if *updateGolden {
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("the stream (-want +got):\n%s", diff)
	}
}

func sortedStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// TestUIChatRequests: what /v1/ui/chat refuses, and the reconnect of a
// chat with nothing live.
func TestUIChatRequests(t *testing.T) {
	st := sqliteStore(t)
	srv := thinkingServer(t, st, journal.NewMemory(journal.Options{}), thinker(0, "", false))
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"no id", `{"messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`, 400},
		{"bad trigger", `{"id":"c","trigger":"resume-stream","messages":[]}`, 400},
		{"last not the user's", `{"id":"c","messages":[{"role":"assistant","parts":[{"type":"text","text":"hi"}]}]}`, 400},
		{"no text", `{"id":"c","messages":[{"role":"user","parts":[{"type":"file","url":"x"}]}]}`, 400},
		{"not json", `{"id":`, 400},
		{"regenerate of an unknown chat", `{"id":"never","trigger":"regenerate-message","messages":[]}`, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := uiPost(t, srv.URL, tc.body)
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
		})
	}
	resp, err := http.Get(srv.URL + "/v1/ui/chat/never/stream")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("GET stream of an unknown chat: %d, want 204", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL + "/v1/ui/chat/never/messages")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("GET messages of an unknown chat: %d %s, want 200 []", resp.StatusCode, b)
	}
}

// TestUIChatIDsScoped: a chat id is the tenant's and the user's: the
// same id is another conversation for anyone else.
func TestUIChatIDsScoped(t *testing.T) {
	a := uiConversationID(auth.Principal{TenantID: "t1", UserID: "u"}, "chat")
	for _, p := range []auth.Principal{{TenantID: "t2", UserID: "u"}, {TenantID: "t1", UserID: "v"}} {
		if b := uiConversationID(p, "chat"); b == a {
			t.Errorf("%v shares %s", p, a)
		}
	}
	if a != uiConversationID(auth.Principal{TenantID: "t1", UserID: "u"}, "chat") {
		t.Error("not stable")
	}
	// No separator trick joins two principals.
	if uiConversationID(auth.Principal{TenantID: "t", UserID: "1u"}, "c") == uiConversationID(auth.Principal{TenantID: "t1", UserID: "u"}, "c") {
		t.Error("ambiguous")
	}
}

// TestUIChatResumeStopRegenerate: a client that drops mid-answer
// reconnects with GET /v1/ui/chat/{id}/stream and is replayed the answer
// from its start (same messageId), then live; the stop route ends it;
// regenerate-message replaces the last exchange in the stored history;
// an upstream failure is an error chunk.
func TestUIChatResumeStopRegenerate(t *testing.T) {
	st := sqliteStore(t)
	srv := thinkingServer(t, st, journal.NewMemory(journal.Options{}), thinker(1, "answer", false))
	resp := uiPost(t, srv.URL, uiSubmitBody("chat-r", "Think first."))
	first := readChunks(t, resp.Body, func(c uiChunk) bool { return c.typ() == "text-delta" })
	resp.Body.Close() // the client drops
	msgID := first[0]["messageId"]

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/ui/chat/chat-r/stream", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" {
		t.Fatalf("resume: %d %v", res.StatusCode, res.Header)
	}
	got := make(chan []uiChunk, 1)
	go func() { got <- readChunks(t, res.Body, nil) }()
	time.Sleep(100 * time.Millisecond)
	stop, err := http.Post(srv.URL+"/v1/ui/chat/chat-r/stop", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	stop.Body.Close()
	if stop.StatusCode != 200 {
		t.Errorf("stop: %d", stop.StatusCode)
	}
	replay := <-got
	if replay[0].typ() != "start" || replay[0]["messageId"] != msgID {
		t.Errorf("replay starts %v, want start of %v", replay[0], msgID)
	}
	if text, reasoning := uiText(replay); text != "Hello" || reasoning != "step 1. " {
		t.Errorf("replay text %q reasoning %q", text, reasoning)
	}
	var types []string
	for _, c := range replay {
		types = append(types, c.typ())
	}
	want := []string{"start", "start-step", "reasoning-start", "reasoning-delta", "reasoning-end", "text-start", "text-delta", "text-end", "finish-step", "finish", "[DONE]"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("replay chunks (-want +got):\n%s", diff)
	}
	conv := replay[0]["messageMetadata"].(map[string]any)["conversation_id"].(string)
	_, m := storedMessage(t, srv.URL, st, conv)
	if m.Status != store.StatusCancelled || m.Content != "Hello" {
		t.Errorf("stored %s %q", m.Status, m.Content)
	}
	// Nothing live now (once the replay window is over it is 204; within
	// it the ended answer is replayed whole).
	again, err := http.Get(srv.URL + "/v1/ui/chat/chat-r/stream")
	if err != nil {
		t.Fatal(err)
	}
	cs := readChunks(t, again.Body, nil)
	again.Body.Close()
	if again.StatusCode != 200 || cs[len(cs)-1].typ() != "[DONE]" {
		t.Errorf("a reconnect just after the end: %d %v", again.StatusCode, cs)
	}

	// Regenerate: the last exchange is replaced.
	regen := uiPost(t, srv.URL, `{"id":"chat-r","trigger":"regenerate-message","messageId":"`+msgID.(string)+`","messages":[]}`)
	if regen.StatusCode != 200 {
		b, _ := io.ReadAll(regen.Body)
		t.Fatalf("regenerate: %d %s", regen.StatusCode, b)
	}
	cs = readChunks(t, regen.Body, func(c uiChunk) bool { return c.typ() == "text-delta" })
	regen.Body.Close()
	if cs[0]["messageId"] == msgID {
		t.Error("the regenerated answer has the old id")
	}
	stop, _ = http.Post(srv.URL+"/v1/ui/chat/chat-r/stop", "application/json", nil)
	stop.Body.Close()
	storedMessage(t, srv.URL, st, conv)
	msgs, err := st.ListMessages(t.Context(), "local", conv)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "Think first." || msgs[1].ID != cs[0]["messageId"] {
		t.Errorf("after regenerate: %d messages, %v", len(msgs), err)
	}
}

// TestUIChatError: an upstream failure after the first word is an error
// chunk, after message-metadata with how the answer was stored.
func TestUIChatError(t *testing.T) {
	st := sqliteStore(t)
	srv := thinkingServer(t, st, journal.NewMemory(journal.Options{}), thinker(0, "", true))
	resp := uiPost(t, srv.URL, uiSubmitBody("chat-e", "Hi"))
	cs := readChunks(t, resp.Body, nil)
	var types []string
	for _, c := range cs {
		types = append(types, c.typ())
	}
	want := []string{"start", "start-step", "text-start", "text-delta", "text-end", "message-metadata", "error", "[DONE]"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Fatalf("chunks (-want +got):\n%s", diff)
	}
	if e := cs[6]["errorText"]; e == "" || e == nil {
		t.Errorf("error chunk %v", cs[6])
	}
	md := cs[5]["messageMetadata"].(map[string]any)
	if md["code"] == nil || md["status"] == nil {
		t.Errorf("error metadata %v", md)
	}
}

// TestUIChatResumeOnAnotherServer: the AI SDK's reconnect reaches
// another server sharing the store and the journal, which replays the
// answer from its start with the same messageId and follows it live;
// with the Redis journal when FIRSTWORD_TEST_REDIS_URL is set.
func TestUIChatResumeOnAnotherServer(t *testing.T) {
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
			o := journal.Options{KeyPrefix: fmt.Sprintf("fwtest:ui:%d:", time.Now().UnixNano())}
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
			a := thinkingServer(t, st, ja, thinker(3, "answer", false))
			b := thinkingServer(t, st, jb, thinker(3, "answer", false))
			resp := uiPost(t, a.URL, uiSubmitBody("chat-moved", "Think first."))
			first := readChunks(t, resp.Body, func(c uiChunk) bool { return c.typ() == "text-delta" })
			resp.Body.Close()

			res, err := http.Get(b.URL + "/v1/ui/chat/chat-moved/stream")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("resume on the other server: %d", res.StatusCode)
			}
			got := make(chan []uiChunk, 1)
			go func() { got <- readChunks(t, res.Body, nil) }()
			time.Sleep(100 * time.Millisecond)
			stop, err := http.Post(b.URL+"/v1/ui/chat/chat-moved/stop", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			stop.Body.Close()
			replay := <-got
			if replay[0].typ() != "start" || replay[0]["messageId"] != first[0]["messageId"] {
				t.Errorf("replay starts %v, want the start of %v", replay[0], first[0]["messageId"])
			}
			if text, reasoning := uiText(replay); text != "Hello" || reasoning != "step 1. step 2. step 3. " {
				t.Errorf("replay text %q reasoning %q", text, reasoning)
			}
			if last := replay[len(replay)-1]; last.typ() != "[DONE]" || replay[len(replay)-2].typ() != "finish" {
				t.Errorf("replay ends %v", replay[len(replay)-3:])
			}
		})
	}
}

// TestUIEncoder: each /v1/chat event's UI message chunks, in a row of
// events as one answer sends them.
func TestUIEncoder(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []journal.Event // Kind and Data
		want string
	}{
		{
			name: "a thinking restart closes the part; redacted thinking and rewinds send nothing",
			evs: []journal.Event{
				{Kind: "meta", Data: []byte(`{"message_id":"m1"}`)},
				{Kind: "thinking", Data: []byte(`{"text":"a"}`)},
				{Kind: "thinking", Data: []byte(`{"restart":true}`)},
				{Kind: "thinking", Data: []byte(`{"redacted":true}`)},
				{Kind: "thinking", Data: []byte(`{"text":"b"}`)},
				{Kind: "rewind", Data: []byte(`{"offset":0}`)},
				{Kind: "delta", Data: []byte(`{"text":"x\"y"}`)},
				{Kind: "done", Data: []byte(`{"finish_reason":"cancelled"}`)},
				{Kind: "delta", Data: []byte(`{"text":"after the end"}`)},
			},
			want: `data: {"type":"start","messageId":"m1","messageMetadata":{"message_id":"m1"}}

data: {"type":"start-step"}

data: {"type":"reasoning-start","id":"reasoning-0"}

data: {"type":"reasoning-delta","id":"reasoning-0","delta":"a"}

data: {"type":"reasoning-end","id":"reasoning-0"}

data: {"type":"reasoning-start","id":"reasoning-1"}

data: {"type":"reasoning-delta","id":"reasoning-1","delta":"b"}

data: {"type":"reasoning-end","id":"reasoning-1"}

data: {"type":"text-start","id":"text-2"}

data: {"type":"text-delta","id":"text-2","delta":"x\"y"}

data: {"type":"text-end","id":"text-2"}

data: {"type":"finish-step"}

data: {"type":"finish","finishReason":"other","messageMetadata":{"finish_reason":"cancelled"}}

data: [DONE]

`,
		},
		{
			name: "an error without a message says its code",
			evs: []journal.Event{
				{Kind: "meta", Data: []byte(`{"message_id":"m1"}`)},
				{Kind: "error", Data: []byte(`{"code":"interrupted"}`)},
			},
			want: `data: {"type":"start","messageId":"m1","messageMetadata":{"message_id":"m1"}}

data: {"type":"start-step"}

data: {"type":"message-metadata","messageMetadata":{"code":"interrupted"}}

data: {"type":"error","errorText":"interrupted"}

data: [DONE]

`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e uiEncoder
			var b []byte
			for _, ev := range tc.evs {
				b = e.append(b, ev)
			}
			if diff := cmp.Diff(tc.want, string(b)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for in, want := range map[string]string{"stop": "stop", "length": "length", "content_filter": "content-filter", "tool_calls": "tool-calls", "timeout": "other", "": "other"} {
		if got := uiFinishReason(in); got != want {
			t.Errorf("uiFinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}
