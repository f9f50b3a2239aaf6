package openai

import (
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// TestCompletionChunksErrors: a whole completion is an answer unless it
// carries an error that says something or has no choices.
func TestCompletionChunksErrors(t *testing.T) {
	ok := `"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]`
	for _, tt := range []struct {
		body, wantErr string
	}{
		{`{` + ok + `}`, ""},
		{`{` + ok + `,"error":null}`, ""},
		{`{` + ok + `,"error":""}`, ""},
		{`{` + ok + `,"error":{}}`, ""},
		{`{"error":{"message":"quota exceeded","type":"insufficient_quota"}}`, "quota exceeded"},
		{`{"error":"overloaded"}`, "overloaded"},
		{`{"id":"x","choices":[]}`, "without choices"},
		{`{"id":`, "malformed"},
	} {
		var text string
		chunks, err := CompletionChunks(strings.NewReader(tt.body))
		for _, c := range chunks {
			text += c.Text
		}
		switch {
		case tt.wantErr == "" && (err != nil || text != "Hi"):
			t.Errorf("%s: %q, %v; want the answer", tt.body, text, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: %v, want an error with %q", tt.body, err, tt.wantErr)
		}
		if ce, isChat := err.(*chat.Error); err != nil && !isChat {
			t.Errorf("%s: %T is not a *chat.Error (%v)", tt.body, err, ce)
		}
	}
}
