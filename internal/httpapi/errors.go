package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/firstword/firstword/internal/chat"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// writeOpenAIError writes an OpenAI-style error response.
func writeOpenAIError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	body := map[string]any{"message": msg, "type": typ, "code": code, "param": nil}
	if param != "" {
		body["param"] = param
	}
	writeJSON(w, status, map[string]any{"error": body})
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
