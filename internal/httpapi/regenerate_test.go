package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestChatRegenerate: POST /v1/chat with regenerate answers the last user
// message again in place of the last exchange; it needs the conversation
// and no message, and a conversation that does not exist is a 404.
func TestChatRegenerate(t *testing.T) {
	srv := errorServer(t, keyAuth{local: true}, sqliteStore(t))
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/chat", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
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
	i := strings.Index(b, `"conversation_id":"`)
	if code != 200 || i < 0 {
		t.Fatalf("first turn: %d %s", code, b)
	}
	conv := b[i+len(`"conversation_id":"`):]
	conv = conv[:strings.Index(conv, `"`)]
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
