package chat

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Sentinel causes. Timeouts are context causes: test them with errors.Is on
// context.Cause(ctx) or on the error a stream returns.
var (
	// ErrFirstTokenTimeout: an attempt produced no visible token in time.
	ErrFirstTokenTimeout = errors.New("first token timeout")
	// ErrDeadline: the request's overall deadline passed.
	ErrDeadline = errors.New("request deadline exceeded")
	// ErrTruncated: the upstream ended the stream without finishing it.
	ErrTruncated = errors.New("upstream stream ended before it finished")
	// ErrClientGone: the client went away; the request was cancelled.
	ErrClientGone = errors.New("client disconnected")
	// ErrShutdown: the server stopped the stream while shutting down.
	ErrShutdown = errors.New("server shutting down")
	// ErrStopped: the user stopped the answer (the stop route), from
	// whatever connection or replica.
	ErrStopped = errors.New("stopped by the user")
)

// Category classifies an upstream failure independently of its wire format.
type Category string

const (
	CategoryRateLimited         Category = "rate_limited"
	CategoryOverloaded          Category = "overloaded"
	CategoryAuth                Category = "auth"
	CategoryInvalidRequest      Category = "invalid_request"
	CategoryNotFound            Category = "not_found"
	CategoryContextLength       Category = "context_length"
	CategoryContentFilter       Category = "content_filter"
	CategoryUpstreamUnavailable Category = "upstream_unavailable"
	CategoryTimeout             Category = "timeout"
	// CategoryProtocol: the upstream sent bytes that break its own format
	// (truncated JSON, invalid UTF-8, an oversized event, a missing end).
	CategoryProtocol Category = "protocol"
	CategoryInternal Category = "internal"
	// CategoryBlocked: the input guardrail refused the message.
	CategoryBlocked Category = "guardrail_blocked"
	// CategoryContextUnavailable: a required context source failed.
	CategoryContextUnavailable Category = "context_unavailable"
	// CategoryClientClosed: the client closed its side of the connection
	// before the answer began (a half-close included, which net/http
	// takes for leaving); answered with nginx's 499, in case it still
	// reads.
	CategoryClientClosed Category = "client_closed_request"
	// CategoryShuttingDown: the server stopped the request while shutting
	// down; retrying it (on another replica) will do.
	CategoryShuttingDown Category = "server_shutting_down"

	// The categories below are requests firstword refuses itself, before
	// routing them (with CategoryInvalidRequest and CategoryNotFound).

	// CategoryUnauthenticated: the request has no valid firstword key.
	CategoryUnauthenticated Category = "unauthenticated"
	// CategoryPermissionDenied: the key, or the page the request comes
	// from, may not use the route.
	CategoryPermissionDenied Category = "permission_denied"
	// CategoryRequestTimeout: the request's body did not arrive in time.
	CategoryRequestTimeout Category = "request_timeout"
	// CategoryTooLarge: the request (its body, its messages) is over a
	// limit.
	CategoryTooLarge Category = "request_too_large"
	// CategoryUnsupportedMedia: the body is not JSON, or is in an encoding
	// firstword does not read.
	CategoryUnsupportedMedia Category = "unsupported_media_type"
	// CategoryStoreUnavailable: a store firstword needs to answer (its
	// keys, its conversations) failed.
	CategoryStoreUnavailable Category = "store_unavailable"
	// CategoryConflict: the request cannot be served in the state the
	// resource is in (an answer no replica here can reach).
	CategoryConflict Category = "conflict"
	// CategoryUnprocessable: the request is well-formed but contradicts
	// an earlier one (an Idempotency-Key reused with another request).
	CategoryUnprocessable Category = "unprocessable"
)

// StatusClientClosedRequest is nginx's status for a request its client
// closed before the answer; not a registered status.
const StatusClientClosedRequest = 499

// ErrClientClosed is the answer to a request whose client left before it
// began.
var ErrClientClosed = &Error{Category: CategoryClientClosed,
	Message: "the client closed its side of the connection before the answer began; the request was cancelled (a half-close counts as leaving)"}

// Error is a classified failure: an upstream's, the router's, or a
// CodeInsufficientQuota is the Code of a spent quota or budget: the
// account cannot pay, so retrying does not help (OpenAI's
// insufficient_quota, Anthropic's billing_error). It is kept as the
// failure's code on every surface.
const CodeInsufficientQuota = "insufficient_quota"

// request firstword refuses itself.
type Error struct {
	Category Category
	// Status is the upstream HTTP status, when there was one.
	Status int
	// Message is safe to show to the client.
	Message string
	// Code, when set, is a client-facing code finer than the category's
	// (e.g. "model_not_found" for a CategoryNotFound).
	Code string
	// Param names the request field at fault, when there is one.
	Param string
	// Retryable says whether the same request may succeed if sent again
	// (now, elsewhere, or after RetryAfter).
	Retryable bool
	// RetryAfter is the upstream's Retry-After hint, when it sent one.
	RetryAfter time.Duration
	// Provider names the provider or deployment that failed.
	Provider string
	// ClientInduced says the request asked for this failure (a fault
	// directive for the simulated provider): it says nothing about the
	// deployment, so it does not count against the deployment's health.
	ClientInduced bool
	// Err is the underlying cause.
	Err error
}

func (e *Error) Error() string {
	s := string(e.Category)
	if e.Provider != "" {
		s = e.Provider + ": " + s
	}
	if e.Status != 0 {
		s += fmt.Sprintf(" (status %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && (e.Message == "" || e.Err.Error() != e.Message) {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// ProtocolError is an upstream answer that could not be read: malformed,
// truncated, or not what its format promises.
func ProtocolError(err error) *Error {
	return &Error{Category: CategoryProtocol, Message: err.Error(), Retryable: true, Err: err}
}

// HTTPStatus is the status firstword answers with when this error happens
// before the response is committed: the one table from error to status.
func (e *Error) HTTPStatus() int {
	switch e.Category {
	case CategoryUnauthenticated:
		return http.StatusUnauthorized
	case CategoryPermissionDenied:
		return http.StatusForbidden
	case CategoryRequestTimeout:
		return http.StatusRequestTimeout
	case CategoryTooLarge:
		return http.StatusRequestEntityTooLarge
	case CategoryUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case CategoryStoreUnavailable:
		return http.StatusServiceUnavailable
	case CategoryRateLimited:
		return http.StatusTooManyRequests
	case CategoryOverloaded:
		return http.StatusServiceUnavailable
	case CategoryUpstreamUnavailable:
		return http.StatusBadGateway
	case CategoryAuth:
		// The client's key was fine; firstword's upstream key was not.
		return http.StatusBadGateway
	case CategoryInvalidRequest, CategoryContextLength, CategoryContentFilter, CategoryBlocked:
		return http.StatusBadRequest
	case CategoryNotFound:
		return http.StatusNotFound
	case CategoryTimeout:
		return http.StatusGatewayTimeout
	case CategoryProtocol:
		return http.StatusBadGateway
	case CategoryClientClosed:
		return StatusClientClosedRequest
	case CategoryShuttingDown:
		return http.StatusServiceUnavailable
	case CategoryConflict:
		return http.StatusConflict
	case CategoryUnprocessable:
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// AsError returns err as an *Error, classifying errors that are not one.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, ErrFirstTokenTimeout):
		return &Error{Category: CategoryTimeout, Message: "no first token before the first-token timeout", Retryable: true, Err: err}
	case errors.Is(err, ErrDeadline):
		return &Error{Category: CategoryTimeout, Message: "the request's deadline passed", Err: err}
	case errors.Is(err, ErrTruncated):
		return &Error{Category: CategoryProtocol, Message: err.Error(), Retryable: true, Err: err}
	case errors.Is(err, ErrShutdown):
		return &Error{Category: CategoryShuttingDown, Message: "the server is shutting down; send the request again", Retryable: true, RetryAfter: time.Second, Err: err}
	}
	return &Error{Category: CategoryInternal, Message: "internal error", Err: err}
}

// CategoryForStatus classifies an upstream HTTP status.
func CategoryForStatus(status int) (c Category, retryable bool) {
	switch {
	case status == http.StatusTooManyRequests:
		return CategoryRateLimited, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return CategoryAuth, false
	case status == http.StatusNotFound:
		return CategoryNotFound, false
	case status == http.StatusRequestTimeout:
		return CategoryTimeout, true
	case status == http.StatusRequestEntityTooLarge:
		return CategoryContextLength, false
	case status == 529 || status == http.StatusServiceUnavailable:
		return CategoryOverloaded, true
	case status >= 500:
		return CategoryUpstreamUnavailable, true
	case status >= 400:
		return CategoryInvalidRequest, false
	}
	return CategoryUpstreamUnavailable, true
}
