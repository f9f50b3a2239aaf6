package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/upstream"
)

// ErrorBody is a google.rpc.Status as the API sends it in JSON: in an error
// response, {"error": {...}} (a JSON array of one such object when the
// request did not ask for SSE), and in an SSE event.
type ErrorBody struct {
	Code    int           `json:"code"`
	Message string        `json:"message"`
	Status  string        `json:"status"`
	Details []ErrorDetail `json:"details"`
}

// ErrorDetail is one entry of details: its @type says which fields it has.
type ErrorDetail struct {
	Type string `json:"@type"`
	// Reason is set on google.rpc.ErrorInfo (e.g. API_KEY_INVALID).
	Reason string `json:"reason"`
	// RetryDelay is set on google.rpc.RetryInfo, as a duration ("46s").
	RetryDelay string `json:"retryDelay"`
}

// DecodeError classifies a non-2xx response body. It understands the
// {"error": {...}} object and its array form; any other body is classified
// by the HTTP status alone. RetryAfter is set from a RetryInfo detail.
func DecodeError(status int, body []byte) *chat.Error {
	body = bytes.TrimSpace(body)
	if eb := errorObject(body); eb != nil {
		return errorFromBody(status, eb)
	}
	cat, retry := chat.CategoryForStatus(status)
	msg := upstream.Excerpt(string(body), 200)
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d", status)
	}
	return &chat.Error{Category: cat, Status: status, Message: msg, Retryable: retry}
}

// errorObject returns the error of a body, {"error": {...}} or its array
// form, when it says something; else nil.
func errorObject(body []byte) *ErrorBody {
	body = bytes.TrimSpace(body)
	type envelope struct {
		Error *ErrorBody `json:"error"`
	}
	var env envelope
	if len(body) > 0 && body[0] == '[' {
		var arr []envelope
		if json.Unmarshal(body, &arr) == nil && len(arr) > 0 {
			env = arr[0]
		}
	} else {
		_ = json.Unmarshal(body, &env)
	}
	if env.Error != nil && (env.Error.Message != "" || env.Error.Status != "") {
		return env.Error
	}
	return nil
}

// errorFromBody classifies a status. status is the HTTP status, or 0 for an
// error inside a stream, where the body's code stands in for it.
func errorFromBody(status int, eb *ErrorBody) *chat.Error {
	httpStatus := status
	if httpStatus == 0 {
		httpStatus = eb.Code
	}
	cat, retry := chat.CategoryForStatus(httpStatus)
	if httpStatus == 0 {
		cat, retry = chat.CategoryUpstreamUnavailable, true
	}
	switch eb.Status {
	case "RESOURCE_EXHAUSTED":
		cat, retry = chat.CategoryRateLimited, true
	case "UNAVAILABLE":
		cat, retry = chat.CategoryOverloaded, true
	case "INTERNAL", "UNKNOWN", "ABORTED", "CANCELLED":
		cat, retry = chat.CategoryUpstreamUnavailable, true
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		cat, retry = chat.CategoryInvalidRequest, false
	case "PERMISSION_DENIED", "UNAUTHENTICATED":
		cat, retry = chat.CategoryAuth, false
	case "NOT_FOUND":
		cat, retry = chat.CategoryNotFound, false
	case "DEADLINE_EXCEEDED":
		cat, retry = chat.CategoryTimeout, true
	}
	var retryAfter time.Duration
	for _, d := range eb.Details {
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo") && d.Reason == "API_KEY_INVALID":
			// An invalid key is a 400 INVALID_ARGUMENT.
			cat, retry = chat.CategoryAuth, false
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && d.RetryDelay != "":
			if dur, err := time.ParseDuration(d.RetryDelay); err == nil && dur > 0 {
				retryAfter = dur
			}
		}
	}
	if cat == chat.CategoryInvalidRequest && contextTooLong(eb.Message) {
		cat = chat.CategoryContextLength
	}
	msg := eb.Message
	if msg == "" {
		msg = eb.Status
	}
	return &chat.Error{Category: cat, Status: status, Message: msg, Retryable: retry, RetryAfter: retryAfter}
}

// contextTooLong recognises the message of a prompt over the model's input
// limit: "The input token count (1200000) exceeds the maximum number of
// tokens allowed (1048576)."
func contextTooLong(msg string) bool {
	return strings.Contains(msg, "input token count") && strings.Contains(msg, "exceeds the maximum")
}
