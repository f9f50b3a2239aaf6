package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/anthropic"
	wire "github.com/firstword/firstword/internal/wire/openai"
)

// Every error answered before a response commits is a *chat.Error: the
// upstream's and the router's, and the requests firstword refuses itself
// (below). Its status is chat.Error.HTTPStatus, the one table from error
// to status; its message is the client-safe part; a route's dialect
// writes it in the shape of the API the client called. After the commit
// the same errors become the surface's error event (exchange.go).

// dialect is the error shape of the API a route speaks. The route carries
// it (api.dialect, route), and a refusal made before routing asks the
// route the request would reach (Server.dialectOf): nothing looks at the
// URL.
type dialect uint8

const (
	// dialectOpenAI is {"error":{"message","type","param","code"}}: OpenAI's
	// APIs' and firstword's own routes'.
	dialectOpenAI dialect = iota
	// dialectAnthropic is {"type":"error","error":{"type","message"}}:
	// Anthropic's Messages API's.
	dialectAnthropic
)

// refusalTypes is the error type, in each dialect, of the categories of
// requests firstword refuses itself. The other categories' types are the
// wire packages' (wire/openai.ErrorType, wire/anthropic.ErrorType), which
// their error events use too.
var refusalTypes = map[chat.Category]struct{ openAI, anthropic string }{
	chat.CategoryUnauthenticated:  {"authentication_error", "authentication_error"},
	chat.CategoryPermissionDenied: {"permission_error", "permission_error"},
	chat.CategoryRequestTimeout:   {"invalid_request_error", "invalid_request_error"},
	chat.CategoryTooLarge:         {"invalid_request_error", "request_too_large"},
	chat.CategoryUnsupportedMedia: {"invalid_request_error", "invalid_request_error"},
	chat.CategoryStoreUnavailable: {"server_error", "api_error"},
	chat.CategoryConflict:         {"invalid_request_error", "invalid_request_error"},
	chat.CategoryUnprocessable:    {"invalid_request_error", "invalid_request_error"},
}

// codeInsufficientQuota is OpenAI's code and type of a 429 for a spent
// budget (Anthropic's dialect keeps rate_limit_error for the gateway's
// own budget, and says billing_error for an upstream's).
const codeInsufficientQuota = chat.CodeInsufficientQuota

// statusOverloaded is Anthropic's status for an overloaded API, which its
// SDKs retry; it answers CategoryOverloaded in Anthropic's dialect.
const statusOverloaded = 529

// The requests firstword refuses itself, and the helpers that build the
// refusals that quote the request. A Code is set where the client-facing
// code is finer than the category, a Param where a field is at fault.
var (
	errNoKey = &chat.Error{Category: chat.CategoryUnauthenticated, Code: "invalid_api_key",
		Message: "a valid API key is required (Authorization: Bearer fw_... or x-api-key: fw_...)"}
	errKeyCheck = &chat.Error{Category: chat.CategoryStoreUnavailable,
		Message: "could not check the API key"}
	errConversationStore = &chat.Error{Category: chat.CategoryStoreUnavailable,
		Message: "the conversation store is unavailable"}
	errAdminKeyRequired = &chat.Error{Category: chat.CategoryPermissionDenied, Code: "admin_key_required",
		Message: "this route needs an admin key (firstword keys create --admin)"}
	errCrossSiteAdmin = &chat.Error{Category: chat.CategoryPermissionDenied, Code: "cross_origin_refused",
		Message: "the operators' routes refuse requests from other origins' pages"}
)

// invalid refuses a request whose param (if any) is wrong.
func invalid(param, msg string) *chat.Error {
	return &chat.Error{Category: chat.CategoryInvalidRequest, Param: param, Message: msg}
}

// modelNotFound refuses a model no alias or PROVIDER/MODEL name serves;
// why, when not nil, says why a PROVIDER/MODEL name was refused (e.g.
// models_passthrough is off).
func modelNotFound(model string, why error) *chat.Error {
	msg := "the model " + quoteValue(model) + " does not exist; GET /v1/models lists the available ones"
	if why != nil {
		msg = "the model " + quoteValue(model) + " is not available: " + why.Error()
	}
	return &chat.Error{Category: chat.CategoryNotFound, Code: "model_not_found", Param: "model", Message: msg}
}

// conversationNotFound refuses a conversation that is not the caller's,
// named by param.
func conversationNotFound(param string) *chat.Error {
	return &chat.Error{Category: chat.CategoryNotFound, Param: param, Message: "conversation not found"}
}

// writeError answers err, classified by chat.AsError, in d's shape. A
// Retry-After hint becomes the header in either.
func (d dialect) writeError(w http.ResponseWriter, err error) {
	e := chat.AsError(err)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(e))
	}
	status := e.HTTPStatus()
	if d == dialectAnthropic {
		// ErrorType's status agrees with the table but for overloaded
		// (TestStatusTable), which Anthropic answers with its own.
		typ, _ := anthropic.ErrorType(e.Category)
		if t, ok := refusalTypes[e.Category]; ok {
			typ = t.anthropic
		}
		if e.Category == chat.CategoryOverloaded {
			status = statusOverloaded
		}
		if e.Code == chat.CodeInsufficientQuota && e.Provider != "" {
			// An upstream's spent quota (the gateway's own budget keeps
			// rate_limit_error: its window resets).
			typ, status = anthropic.BillingError()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(anthropic.ErrorResponse(typ, clip(e.Message)))
		return
	}
	body := wire.ErrorFromChat(e) // the code is the category's unless e.Code says otherwise
	body.Message = clip(e.Message)
	if t, ok := refusalTypes[e.Category]; ok {
		body.Type = t.openAI
	}
	if e.Code != "" {
		body.Code, _ = json.Marshal(e.Code)
	}
	if e.Param != "" {
		body.Param = &e.Param
	}
	writeJSON(w, status, struct {
		Error *wire.ErrorBody `json:"error"`
	}{body})
}

// route is one of firstword's own routes (/v1/chat, the conversations,
// usage, budget and admin routes): it returns the error it answers with,
// written in OpenAI's dialect (an error no table classifies is a 500).
type route func(w http.ResponseWriter, r *http.Request) error

func (f route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f(w, r); err != nil {
		dialectOpenAI.writeError(w, err)
	}
}

func (route) errorDialect() dialect { return dialectOpenAI }

// dialectOf is the dialect of the route r would reach (OpenAI's for a
// handler that does not say, or no route), for the refusals made before
// routing.
func (s *Server) dialectOf(r *http.Request) dialect {
	h, _ := s.mux.Handler(r)
	if d, ok := h.(interface{ errorDialect() dialect }); ok {
		return d.errorDialect()
	}
	return dialectOpenAI
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

// intParam reads the query parameter name, an integer from lo to hi (def
// when absent); any other value is a 400 that says the range.
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalid(name, name+" must be between "+strconv.Itoa(lo)+" and "+strconv.Itoa(hi))
	}
	return n, nil
}
