package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
	"github.com/google/go-cmp/cmp"
)

const (
	testKey   = "sk-proj-Zq3XbT9kLm2NvR8pW4sY7uA1cE6gH0jK5oQ"
	testToken = "gwt-7hQ2mK9xL4pV8sN1cR5"
	testOrg   = "org-Q7xv29LmPz41KdRt"
)

func testScrubber() *Scrubber {
	return NewScrubber("openai", testKey, map[string]string{
		"OpenAI-Organization": testOrg,
		"Authorization-Proxy": "Bearer " + testToken,
		"X-Team":              "the red team",    // words under MinSecretLen: the whole, exactly
		"X-Short":             "abc",             // under MinSecretLen: kept
		"OpenAI-Beta":         "assistants=v2-x", // public
	})
}

func TestScrub(t *testing.T) {
	s := testScrubber()
	tests := []struct {
		name, in, want string
	}{
		{"nothing to scrub", "Rate limit reached for gpt-4o on tokens per min.", "Rate limit reached for gpt-4o on tokens per min."},
		{"the key", "Incorrect API key provided: " + testKey + ".", "Incorrect API key provided: [redacted]."},
		{"the key twice", testKey + testKey + " and " + testKey, "[redacted] and [redacted]"},
		{"the key cut short", "key sk-proj-Zq3Xb…", "key [redacted]…"},
		{"a middle part of the key", "fragment T9kLm2NvR8pW here", "fragment [redacted] here"},
		{"under MinSecretLen of the key", "the key ends in K5oQ", "the key ends in K5oQ"},
		{"OpenAI's masked form", "Incorrect API key provided: sk-proj-" + strings.Repeat("*", 140) + "K5oQ. You can", "Incorrect API key provided: [redacted]. You can"},
		{"dots", "key sk-pr...jK5oQ.", "key [redacted]."},
		{"an ellipsis", "key sk-…0jK5oQ is revoked", "key [redacted] is revoked"},
		{"bullets, no prefix", "key ••••K5oQ", "key [redacted]"},
		{"a mask with 3 bytes of suffix", "key ****5oQ", "key ****5oQ"},
		{"a mask and no suffix", "wait... what", "wait... what"},
		{"a header value", "organization " + testOrg + " is unknown", "organization [redacted] is unknown"},
		{"a bearer token alone", "token " + testToken + ".", "token [redacted]."},
		{"a bearer token with its scheme", "got Bearer " + testToken + ".", "got [redacted]."},
		{"a credential header cut short", "token gwt-7hQ2mK9…", "token [redacted]…"},
		{"a value of short words", "not in the red team.", "not in [redacted]."},
		{"its words alone", "red team", "red team"},
		{"a short value", "abc def", "abc def"},
		{"a public header", "unknown beta assistants=v2-x", "unknown beta assistants=v2-x"},
		{"multibyte text around", "é " + testKey + " ü", "é [redacted] ü"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Scrub(tt.in); got != tt.want {
				t.Errorf("Scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestScrubberError(t *testing.T) {
	s := testScrubber()
	cause := fmt.Errorf("%w: stream cut after key %s", chat.ErrTruncated, testKey)
	tests := []struct {
		name string
		in   error
		want error // compared by view
	}{
		{"nil", nil, nil},
		{
			"401",
			&chat.Error{Category: chat.CategoryInvalidRequest, Status: 401, Provider: "openai", Message: "Incorrect API key provided: sk-proj-****K5oQ", Err: errors.New("body")},
			&chat.Error{Category: chat.CategoryInvalidRequest, Status: 401, Provider: "openai", Message: `provider "openai" rejected the gateway's credentials (HTTP 401): check its api_key_env and headers`},
		},
		{
			"403 auth",
			&chat.Error{Category: chat.CategoryAuth, Status: 403, Provider: "openai", Message: "You are not allowed to sample from this model"},
			&chat.Error{Category: chat.CategoryAuth, Status: 403, Provider: "openai", Message: `provider "openai" rejected the gateway's credentials (HTTP 403): check its api_key_env and headers`},
		},
		{
			"auth mid-stream",
			&chat.Error{Category: chat.CategoryAuth, Provider: "openai", Message: "key revoked"},
			&chat.Error{Category: chat.CategoryAuth, Provider: "openai", Message: `provider "openai" rejected the gateway's credentials: check its api_key_env and headers`},
		},
		{
			"message and cause",
			&chat.Error{Category: chat.CategoryProtocol, Retryable: true, Message: "bad event: " + testKey, Err: cause},
			&chat.Error{Category: chat.CategoryProtocol, Retryable: true, Message: "bad event: [redacted]", Err: errors.New(chat.ErrTruncated.Error() + ": stream cut after key [redacted]")},
		},
		{"not a chat.Error", cause, errors.New(chat.ErrTruncated.Error() + ": stream cut after key [redacted]")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.Error(tt.in)
			if diff := cmp.Diff(view(tt.want), view(got)); diff != "" {
				t.Errorf("Error(%v) (-want +got):\n%s", tt.in, diff)
			}
		})
	}

	// A scrubbed cause still unwraps to its sentinel; what needs no
	// scrubbing comes back as it is; nothing is changed in place.
	in := &chat.Error{Category: chat.CategoryProtocol, Message: "x " + testKey, Err: cause}
	if got := s.Error(in); !errors.Is(got, chat.ErrTruncated) || in.Message != "x "+testKey {
		t.Errorf("Error(%v) = %v: lost its sentinel, or changed its argument", in, got)
	}
	for _, err := range []error{chat.ErrClientClosed, context.Canceled, &chat.Error{Category: chat.CategoryOverloaded, Message: "Overloaded"}} {
		if got := s.Error(err); got != err {
			t.Errorf("Error(%v) = %v, want it as it is", err, got)
		}
	}
	if got := s.Error(chat.ErrClientClosed); got != chat.ErrClientClosed {
		t.Errorf("Error(ErrClientClosed) = %v", got)
	}
}

// errView is what an error shows: a *chat.Error's fields, its cause by
// its text.
type errView struct {
	Chat              bool
	Category          chat.Category
	Status            int
	Provider, Message string
	Retryable         bool
	Text, Cause       string
}

func view(err error) *errView {
	if err == nil {
		return nil
	}
	ce, ok := err.(*chat.Error)
	if !ok {
		return &errView{Text: err.Error()}
	}
	v := &errView{Chat: true, Category: ce.Category, Status: ce.Status, Provider: ce.Provider, Message: ce.Message, Retryable: ce.Retryable, Text: ce.Error()}
	if ce.Err != nil {
		v.Cause = ce.Err.Error()
	}
	return v
}

func TestAuthAdvice(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		headers map[string]string
		want    string
	}{
		{"key", "k", nil, "check its api_key_env"},
		{"headers", "", map[string]string{"Authorization": "Bearer t"}, "check its headers"},
		{"both", "k", map[string]string{"X-Org": "o"}, "check its api_key_env and headers"},
		{"a public header only", "k", map[string]string{"anthropic-beta": "b"}, "check its api_key_env"},
		{"none", "", nil, "none are configured, set its api_key_env or headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewScrubber("p", tt.key, tt.headers).Error(&chat.Error{Category: chat.CategoryAuth, Status: 401})
			want := `provider "p" rejected the gateway's credentials (HTTP 401): ` + tt.want
			if got := err.(*chat.Error).Message; got != want {
				t.Errorf("message %q, want %q", got, want)
			}
		})
	}
}

// FuzzScrub: whatever the text, what Scrub returns holds no credential
// fragment of MinSecretLen bytes and no exact secret.
func FuzzScrub(f *testing.F) {
	f.Add("Incorrect API key provided: " + testKey + ".")
	f.Add("sk-proj-" + strings.Repeat("*", 20) + "K5oQ")
	f.Add("organization " + testOrg + " got Bearer " + testToken)
	f.Add("key sk-…0jK5oQ is revoked")
	s := testScrubber()
	f.Fuzz(func(t *testing.T, text string) {
		got := s.Scrub(text)
		for _, c := range s.creds {
			for i := 0; i+MinSecretLen <= len(c); i++ {
				if strings.Contains(got, c[i:i+MinSecretLen]) {
					t.Fatalf("Scrub(%q) = %q, quotes %q", text, got, c[i:i+MinSecretLen])
				}
			}
		}
		for _, x := range s.exact {
			if strings.Contains(got, x) {
				t.Fatalf("Scrub(%q) = %q, quotes %q", text, got, x)
			}
		}
	})
}
