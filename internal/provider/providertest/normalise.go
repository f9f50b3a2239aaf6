package providertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Norm is a situation every upstream can be in, and what an adapter must
// make of it: the same normalised answer, and the same error, whatever
// the wire format.
type Norm struct {
	Name string
	// Want is the answer collected before the stream ended (its model is
	// not compared: wire formats name models differently). For an error
	// before the first chunk it is empty.
	Want *chat.Response
	// Err is the error that ends the stream, nil for none: its Category,
	// Retryable, Status and RetryAfter are compared, not its Message
	// (which is the upstream's, or the scrubber's).
	Err *chat.Error
}

// Normalisation is the table every HTTP adapter's wire format renders
// (see Normalises). Its rows are the situations a client can tell apart:
// an answer, a tool call, the two ways an answer is cut, what the usage
// counts, and the failures the router acts on.
var Normalisation = []Norm{
	{
		Name: "text",
		Want: &chat.Response{Choices: []chat.Choice{{Text: "Hello, world!", FinishReason: chat.FinishStop}},
			Usage: &chat.Usage{InputTokens: 12, OutputTokens: 4}},
	},
	{
		Name: "tool call",
		Want: &chat.Response{Choices: []chat.Choice{{FinishReason: chat.FinishToolCalls,
			ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
			Usage: &chat.Usage{InputTokens: 30, OutputTokens: 9}},
	},
	{
		Name: "length cut",
		Want: &chat.Response{Choices: []chat.Choice{{Text: "Hello", FinishReason: chat.FinishLength}},
			Usage: &chat.Usage{InputTokens: 12, OutputTokens: 1}},
	},
	{
		Name: "content filter",
		Want: &chat.Response{Choices: []chat.Choice{{Text: "Hello", FinishReason: chat.FinishContentFilter}},
			Usage: &chat.Usage{InputTokens: 12, OutputTokens: 1}},
	},
	{
		// Input tokens include the cached ones.
		Name: "usage with cache reads",
		Want: &chat.Response{Choices: []chat.Choice{{Text: "Hi", FinishReason: chat.FinishStop}},
			Usage: &chat.Usage{InputTokens: 2100, CachedInputTokens: 2048, OutputTokens: 2}},
	},
	{
		// Output tokens include the reasoning ones.
		Name: "usage with reasoning",
		Want: &chat.Response{Choices: []chat.Choice{{Text: "Hi", FinishReason: chat.FinishStop}},
			Usage: &chat.Usage{InputTokens: 12, OutputTokens: 40, ReasoningTokens: 38}},
	},
	{
		// The upstream reports a server error after some text: the text
		// stays, the error is retryable (elsewhere), nothing says the
		// answer finished.
		Name: "mid-stream error",
		Want: &chat.Response{Choices: []chat.Choice{{Text: "Hello"}}},
		Err:  &chat.Error{Category: chat.CategoryUpstreamUnavailable, Retryable: true},
	},
	{
		// The body ends after some text, without the format's end.
		Name: "cut short",
		Want: &chat.Response{Choices: []chat.Choice{{Text: "Hello"}}},
		Err:  &chat.Error{Category: chat.CategoryProtocol, Retryable: true},
	},
	{
		Name: "auth error",
		Want: &chat.Response{},
		Err:  &chat.Error{Category: chat.CategoryAuth, Status: 401},
	},
	{
		// Answered with Retry-After: 7.
		Name: "rate limited",
		Want: &chat.Response{},
		Err:  &chat.Error{Category: chat.CategoryRateLimited, Status: 429, Retryable: true, RetryAfter: 7 * time.Second},
	},
}

// Reply is an upstream's answer in an adapter's wire format.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// ContentType is the answer's; "" means text/event-stream.
	ContentType string
	Body        string
	// Skip says why the wire format cannot render the row; the row is
	// then skipped, and the reason logged.
	Skip string
}

// Normalises runs every row of Normalisation against the adapter
// newProvider returns, its upstream answering with replies[row.Name].
// Every row needs a reply (or a Skip), and every reply a row. A reply to
// "rate limited" is sent with Retry-After: 7.
func Normalises(t *testing.T, newProvider NewFunc, replies map[string]Reply) {
	t.Helper()
	for name := range replies {
		if !slices.ContainsFunc(Normalisation, func(n Norm) bool { return n.Name == name }) {
			t.Errorf("a reply for %q, which is not a row of Normalisation", name)
		}
	}
	for _, row := range Normalisation {
		t.Run(row.Name, func(t *testing.T) {
			reply, ok := replies[row.Name]
			if !ok {
				t.Fatalf("no reply renders %q", row.Name)
			}
			if reply.Skip != "" {
				t.Skip(reply.Skip)
			}
			p := fake(t, newProvider, func(w http.ResponseWriter) {
				ct := reply.ContentType
				if ct == "" {
					ct = "text/event-stream"
				}
				w.Header().Set("Content-Type", ct)
				if row.Name == "rate limited" {
					w.Header().Set("Retry-After", "7")
				}
				status := reply.Status
				if status == 0 {
					status = http.StatusOK
				}
				w.WriteHeader(status)
				io.WriteString(w, reply.Body)
			})
			req := &chat.Request{Model: "m", Messages: []chat.Message{{Role: chat.RoleUser, Content: "What is the weather in Paris?"}},
				Tools: []chat.Tool{{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}}
			got, err := chat.Collect(p.Stream(context.Background(), req))
			if diff := cmp.Diff(row.Want, got, cmpopts.IgnoreFields(chat.Response{}, "Model"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			switch {
			case row.Err == nil && err != nil:
				t.Errorf("error = %v, want none", err)
			case row.Err != nil:
				var ce *chat.Error
				if !errors.As(err, &ce) {
					t.Fatalf("error = %v, want a *chat.Error", err)
				}
				g := chat.Error{Category: ce.Category, Retryable: ce.Retryable, Status: ce.Status, RetryAfter: ce.RetryAfter}
				if diff := cmp.Diff(*row.Err, g, cmpopts.IgnoreFields(chat.Error{}, "Err")); diff != "" {
					t.Errorf("error %v (-want +got):\n%s", err, diff)
				}
			}
		})
	}
}
