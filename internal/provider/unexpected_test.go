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

// TestReadErrorHTMLPage: a non-2xx answer that is a web page (a proxy's or
// load balancer's) is reported by its status and title, not its markup.
func TestReadErrorHTMLPage(t *testing.T) {
	decode := func(status int, body []byte) *chat.Error {
		return &chat.Error{Category: chat.CategoryUpstreamUnavailable, Status: status, Message: string(body)}
	}
	for _, tt := range []struct {
		ctype, body, want string
	}{
		{"text/html", "<html><head><TITLE>502 Bad\n  Gateway</TITLE></head><body><center><h1>502</h1></center></body></html>", `upstream answered 502 with an HTML page (title: "502 Bad Gateway")`},
		{"text/html; charset=utf-8", "<html><body>oops</body></html>", "upstream answered 502 with an HTML page (no title)"},
		{"text/html", "<title>" + strings.Repeat("é", 100) + "</title>", "…"},
		{"application/json", `{"error":"x"}`, `{"error":"x"}`},
		// Latin-1 bytes before the title (bytes.ToLower would change
		// the length).
		{"text/html", "<html>" + strings.Repeat("\xe9", 600) + "<title>Bad Gateway</title></html>", `(title: "Bad Gateway")`},
		// A JSON error labelled text/html keeps its message.
		{"text/html", `{"error":"x"}`, `{"error":"x"}`},
	} {
		resp := &http.Response{StatusCode: 502, Header: http.Header{"Content-Type": {tt.ctype}}, Body: io.NopCloser(strings.NewReader(tt.body))}
		e := ReadError("p", resp, decode)
		if !strings.Contains(e.Message, tt.want) || e.Status != 502 || e.Provider != "p" || strings.Contains(e.Message, "<") {
			t.Errorf("%s %q: %+v, want a message with %q", tt.ctype, tt.body, e, tt.want)
		}
	}
}
