package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/chat"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// writeOpenAIError writes an OpenAI-style error response.
func writeOpenAIError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	body := map[string]any{"message": clip(msg), "type": typ, "code": code, "param": nil}
	if param != "" {
		body["param"] = param
	}
	writeJSON(w, status, map[string]any{"error": body})
}

// writeRequestError answers a request the gateway refuses before routing
// it (401, 413, 400, 503) in the error shape of the API the client called:
// Anthropic's on /v1/messages, OpenAI's elsewhere.
func writeRequestError(w http.ResponseWriter, r *http.Request, status int, typ, code, msg string) {
	if strings.HasPrefix(r.URL.Path, "/v1/messages") {
		switch status {
		case http.StatusRequestEntityTooLarge:
			typ = "request_too_large"
		case http.StatusServiceUnavailable:
			typ = "api_error"
		}
		writeAnthropicError(w, status, typ, msg)
		return
	}
	writeOpenAIError(w, status, typ, code, "", msg)
}

// writeChatError answers a classified failure before the first byte: the
// one table from error category to HTTP status is chat.Error.HTTPStatus.
func writeChatError(w http.ResponseWriter, e *chat.Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(e))
	}
	writeJSON(w, e.HTTPStatus(), map[string]any{"error": wire.ErrorFromChat(e)})
}

// retryAfterSeconds is a Retry-After value, rounded up to a second.
func retryAfterSeconds(e *chat.Error) string {
	return strconv.Itoa(int((e.RetryAfter + time.Second - 1) / time.Second))
}

// maxErrorMessage bounds an error message sent to a client: a message may
// quote the client's own values, and must not echo a megabyte back.
const maxErrorMessage = 1024

// clip cuts msg to maxErrorMessage bytes, on a rune boundary.
func clip(msg string) string {
	if len(msg) <= maxErrorMessage {
		return msg
	}
	cut := maxErrorMessage
	for cut > 0 && !isRuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}
