package provider

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

func TestUnexpected(t *testing.T) {
	decode := func(status int, body []byte) *chat.Error {
		return &chat.Error{Category: chat.CategoryOverloaded, Status: status, Message: "decoded: " + string(body)}
	}
	for _, tt := range []struct {
		ctype, body string
		jsonIsError bool
		want        string // "" means nil
	}{
		{"text/event-stream", "data: {}\n\n", true, ""},
		{"", "data: {}\n\n", true, ""},
		{"application/x-ndjson", "{}\n", false, ""},
		{"application/json", `{"error":{"message":"x"}}`, false, ""},
		{"text/html; charset=utf-8", "<html>hello</html>", false, "HTML page"},
		{"TEXT/HTML", "<html>hello</html>", true, "HTML page"},
		{"application/json", `{"error":{"message":"quota"}}`, true, `decoded: {"error":{"message":"quota"}}`},
		{"application/json", `{"ok":true}`, true, "JSON, not an event stream"},
	} {
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tt.ctype}}, Body: io.NopCloser(strings.NewReader(tt.body))}
		e := Unexpected("p", resp, tt.jsonIsError, decode)
		switch {
		case tt.want == "" && e != nil:
			t.Errorf("%s %q: %v, want nil", tt.ctype, tt.body, e)
		case tt.want != "" && (e == nil || !strings.Contains(e.Message, tt.want) || e.Provider != "p"):
			t.Errorf("%s %q: %+v, want a message with %q", tt.ctype, tt.body, e, tt.want)
		}
	}
}
