package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/auth"
)

// sendChat posts body to /v1/chat and returns the status and the whole
// answer.
func sendChat(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// conversationOf is the conversation_id of a first turn's answer.
func conversationOf(t *testing.T, code int, answer string) string {
	t.Helper()
	i := strings.Index(answer, `"conversation_id":"`)
	if code != 200 || i < 0 {
		t.Fatalf("first turn: %d %s", code, answer)
	}
	conv := answer[i+len(`"conversation_id":"`):]
	return conv[:strings.Index(conv, `"`)]
}

// TestChatRegenerate: POST /v1/chat with regenerate answers the last user
// message again in place of the last exchange; it needs the conversation
// and no message, and a conversation that does not exist is a 404.
func TestChatRegenerate(t *testing.T) {
	srv := errorServer(t, keyAuth{local: true}, sqliteStore(t))
	post := func(body string) (int, string) { t.Helper(); return sendChat(t, srv.URL, body) }
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"model": "m", "regenerate": true}`, 400},
		{`{"model": "m", "regenerate": true, "conversation_id": "conv_x", "message": "hi"}`, 400},
		{`{"model": "m", "regenerate": true, "conversation_id": "conv_nope"}`, 404},
	} {
		if code, b := post(tc.body); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.body, code, b, tc.want)
		}
	}
	code, b := post(`{"model": "m", "message": "first question"}`)
	conv := conversationOf(t, code, b)
	if code, b := post(`{"model": "m", "regenerate": true, "conversation_id": "` + conv + `"}`); code != 200 || !strings.Contains(b, "event: done") {
		t.Fatalf("regenerate: %d %s", code, b)
	}
	resp, err := http.Get(srv.URL + "/v1/conversations/" + conv)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Messages []struct{ Role, Content, Status string }
	}
	json.NewDecoder(resp.Body).Decode(&c)
	if len(c.Messages) != 2 || c.Messages[0].Content != "first question" || c.Messages[1].Role != "assistant" || c.Messages[1].Status != "complete" {
		t.Errorf("stored after the regeneration: %+v", c.Messages)
	}
}

// TestChatEdit: POST /v1/chat with edit sends message in place of the
// last user message: the last exchange is deleted and the edit answered.
// A refused edit (no conversation, an empty or too long message, with
// regenerate) changes nothing.
func TestChatEdit(t *testing.T) {
	st := sqliteStore(t)
	srv := errorServer(t, keyAuth{local: true}, st)
	post := func(body string) (int, string) { t.Helper(); return sendChat(t, srv.URL, body) }
	code, b := post(`{"model": "m", "message": "first question"}`)
	conv := conversationOf(t, code, b)
	if code, b := post(`{"model": "m", "message": "second question, with a typo", "conversation_id": "` + conv + `"}`); code != 200 || !strings.Contains(b, "event: done") {
		t.Fatalf("second turn: %d %s", code, b)
	}
	contents := func() []string {
		t.Helper()
		msgs, err := st.ListMessages(t.Context(), "local", conv)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Role+":"+string(m.Status)+":"+m.Content)
		}
		return out
	}
	before := contents()
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"model": "m", "edit": true, "message": "x"}`, 400},
		{`{"model": "m", "edit": true, "conversation_id": "` + conv + `", "message": "  "}`, 400},
		{`{"model": "m", "edit": true, "conversation_id": "` + conv + `", "message": "` + strings.Repeat("x", 300<<10) + `"}`, 413},
		{`{"model": "m", "edit": true, "regenerate": true, "conversation_id": "` + conv + `", "message": "x"}`, 400},
		{`{"model": "m", "edit": true, "conversation_id": "conv_nope", "message": "x"}`, 404},
	} {
		if code, b := post(tc.body); code != tc.want {
			t.Errorf("%.120s: %d %.200s, want %d", tc.body, code, b, tc.want)
		}
	}
	if got := contents(); strings.Join(got, "|") != strings.Join(before, "|") {
		t.Fatalf("after refused edits the history is %q; want it unchanged, %q", got, before)
	}

	if code, b := post(`{"model": "m", "edit": true, "message": "second question", "conversation_id": "` + conv + `"}`); code != 200 || !strings.Contains(b, "event: done") {
		t.Fatalf("edit: %d %s", code, b)
	}
	got := contents()
	if len(got) != 4 || got[0] != "user:complete:first question" || got[1] != before[1] || got[2] != "user:complete:second question" ||
		!strings.HasPrefix(got[3], "assistant:complete:") || got[3] == "" {
		t.Errorf("stored after the edit: %q; want the first exchange, then the edited question and its answer", got)
	}
}

// TestUIChatEdit: the AI SDK's edit (submit-message with the messageId of
// the user message it replaced) of the last user message replaces the last
// exchange; an edit of an earlier one is refused and changes nothing.
func TestUIChatEdit(t *testing.T) {
	st := sqliteStore(t)
	srv := errorServer(t, keyAuth{local: true}, st)
	user := func(id, text string) map[string]any {
		return map[string]any{"id": id, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}
	}
	answer := map[string]any{"id": "a", "role": "assistant", "parts": []any{map[string]any{"type": "text", "text": "..."}}}
	send := func(msgs []any, messageID string) (int, string) {
		t.Helper()
		q := map[string]any{"id": "chat-e", "trigger": "submit-message", "model": "m", "messages": msgs}
		if messageID != "" {
			q["messageId"] = messageID
		}
		body, _ := json.Marshal(q)
		resp := uiPost(t, srv.URL, string(body))
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := send([]any{user("u1", "one")}, ""); code != 200 || !strings.Contains(b, `"type":"finish"`) {
		t.Fatalf("first: %d %s", code, b)
	}
	if code, b := send([]any{user("u1", "one"), answer, user("u2", "two, wrong")}, ""); code != 200 || !strings.Contains(b, `"type":"finish"`) {
		t.Fatalf("second: %d %s", code, b)
	}
	conv := uiConversationID(auth.Principal{TenantID: auth.LocalTenant, UserID: auth.LocalUser}, "chat-e")
	contents := func() string {
		t.Helper()
		msgs, err := st.ListMessages(t.Context(), "local", conv)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			if m.Role == "user" {
				out = append(out, m.Content)
			} else {
				out = append(out, m.Role+":"+string(m.Status))
			}
		}
		return strings.Join(out, "|")
	}
	if got := contents(); got != "one|assistant:complete|two, wrong|assistant:complete" {
		t.Fatalf("before the edits: %s", got)
	}
	// An edit of the first message (the client dropped what followed).
	if code, b := send([]any{user("u1", "one, edited")}, "u1"); code != 400 || !strings.Contains(b, "messageId") {
		t.Errorf("edit of an earlier message: %d %s; want 400 naming messageId", code, b)
	}
	if got := contents(); got != "one|assistant:complete|two, wrong|assistant:complete" {
		t.Errorf("after a refused edit: %s", got)
	}
	if code, b := send([]any{user("u1", "one"), answer, user("u2", "two")}, "u2"); code != 200 || !strings.Contains(b, `"type":"finish"`) {
		t.Fatalf("edit of the last: %d %s", code, b)
	}
	if got := contents(); got != "one|assistant:complete|two|assistant:complete" {
		t.Errorf("after the edit: %s; want the last exchange replaced", got)
	}
}
