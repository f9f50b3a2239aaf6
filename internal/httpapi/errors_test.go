package httpapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/wire/anthropic"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// errorStore is a store whose conversations are all missing, or which
// fails every call when down.
type errorStore struct {
	store.Store
	down bool
}

func (s errorStore) err() error {
	if s.down {
		return errors.New("database is down")
	}
	return store.ErrNotFound
}

func (s errorStore) GetConversation(context.Context, string, string) (*store.Conversation, error) {
	return nil, s.err()
}

func (s errorStore) ListConversations(context.Context, string, string, int) ([]store.Conversation, error) {
	return nil, s.err()
}

func (s errorStore) CreateConversation(context.Context, *store.Conversation, ...*store.Message) error {
	return s.err()
}

// The undo of a refused turn (see conversation.Turn.undo) finds nothing.
func (s errorStore) DeleteConversation(context.Context, string, string) error {
	return store.ErrNotFound
}

func (s errorStore) DeleteMessages(context.Context, string, ...string) (int, error) { return 0, nil }

func (s errorStore) UsageSummary(context.Context, string, time.Time, time.Time) ([]store.UsageSum, error) {
	return nil, s.err()
}

// failing is a provider whose every answer is err, before any chunk.
func failing(err error) provider.Provider {
	return providertest.Func(func(context.Context, *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) { yield(chat.Chunk{}, err) }
	})
}

// errorServer serves a gateway with keys ("k", "admin"; "broken" makes the
// key check fail), conversations in the given store, and aliases whose
// upstreams fail: "over" (overloaded, Retry-After), "long" (a message over
// the clip), besides "m", which answers.
func errorServer(t *testing.T, a Authenticator, st store.Store) *httptest.Server {
	t.Helper()
	alias := func(name string, p provider.Provider) router.Alias {
		return router.Alias{Name: name, Deployments: []router.Deployment{{ProviderName: "p", Model: name, Provider: p}}}
	}
	r, err := router.New(router.Config{Aliases: []router.Alias{
		alias("m", slow(1, 0)),
		alias("over", failing(&chat.Error{Category: chat.CategoryOverloaded, Message: "the upstream is busy", RetryAfter: 10 * time.Millisecond})),
		alias("long", failing(&chat.Error{Category: chat.CategoryInvalidRequest, Message: strings.Repeat("é", 600)})),
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: metering.NewMemory(10), Auth: a,
		Chat: conversation.New(conversation.Options{Store: st}), Store: st,
		MaxMessages: 2, MaxPromptBytes: 64, MaxRequestBytes: 512 << 10, BodyTimeout: 100 * time.Millisecond,
		Budget: func(tenant, user, surface string, recent int) any { return nil }}))
	t.Cleanup(srv.Close)
	return srv
}

// brokenAuth fails the key check for the key "broken".
type brokenAuth struct{ keyAuth }

func (a brokenAuth) Authenticate(ctx context.Context, authorization, apiKey string) (auth.Principal, error) {
	if authorization == "Bearer broken" {
		return auth.Principal{}, errors.New("key store is down")
	}
	return a.keyAuth.Authenticate(ctx, authorization, apiKey)
}

// TestErrorAnswers records every error the gateway answers with before a
// response commits, in each API's shape: status, the headers that matter
// and the body, byte for byte (testdata/errors.golden; -update rewrites
// it).
func TestErrorAnswers(t *testing.T) {
	keys := keyAuth{keys: map[string]auth.Principal{
		"k":     {TenantID: "acme", UserID: "u"},
		"admin": {TenantID: "ops", UserID: "o", Admin: true},
	}}
	keyed := errorServer(t, brokenAuth{keys}, errorStore{})
	down := errorServer(t, brokenAuth{keys}, errorStore{down: true})
	local := errorServer(t, keyAuth{local: true}, errorStore{})

	gz := func(s string) string {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		io.WriteString(zw, s)
		zw.Close()
		return b.String()
	}
	// bodyFor is a request on path for model with n messages of content.
	bodyFor := func(path, model, content string, n int) string {
		m := strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"`+content+`"},`, n), ",")
		if path == "/v1/responses" {
			return `{"model":"` + model + `","input":[` + m + `]}`
		}
		return `{"model":"` + model + `","max_tokens":10,"messages":[` + m + `]}`
	}
	type row struct {
		name         string
		srv          *httptest.Server
		method, path string
		header       []string // name, value pairs; the key "k" unless an Authorization is given
		body         string
		raw          string // sent as is after the headers (no body): a stalled body
	}
	var rows []row
	// Each refusal on each of the three APIs, in its own shape.
	for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/responses"} {
		msgs := func(model, content string, n int) string { return bodyFor(path, model, content, n) }
		ok := msgs("m", "hi", 1)
		rows = append(rows,
			row{name: "no key", srv: keyed, method: "POST", path: path, header: []string{"Authorization", ""}, body: ok},
			row{name: "key check fails", srv: keyed, method: "POST", path: path, header: []string{"Authorization", "Bearer broken"}, body: ok},
			row{name: "cross-origin page", srv: keyed, method: "POST", path: path, header: []string{"Origin", "https://evil.example"}, body: ok},
			row{name: "cross-site fetch", srv: keyed, method: "POST", path: path, header: []string{"Sec-Fetch-Site", "cross-site"}, body: ok},
			row{name: "rebinding host", srv: local, method: "POST", path: path, header: []string{"Host", "evil.example"}, body: ok},
			row{name: "text/plain", srv: keyed, method: "POST", path: path, header: []string{"Content-Type", "text/plain"}, body: ok},
			row{name: "brotli", srv: keyed, method: "POST", path: path, header: []string{"Content-Encoding", "br"}, body: ok},
			row{name: "declared too large", srv: keyed, method: "POST", path: path, body: strings.Repeat(" ", 600<<10)},
			row{name: "inflates too large", srv: keyed, method: "POST", path: path, header: []string{"Content-Encoding", "gzip"}, body: gz(strings.Repeat(" ", 600<<10))},
			row{name: "corrupt gzip", srv: keyed, method: "POST", path: path, header: []string{"Content-Encoding", "gzip"}, body: gz(ok)[:12]},
			row{name: "stalled body", srv: keyed, method: "POST", path: path, raw: "Content-Length: 100\r\n\r\n{"},
			row{name: "not JSON", srv: keyed, method: "POST", path: path, body: `{"model":`},
			row{name: "no model", srv: keyed, method: "POST", path: path, body: `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"input":"hi"}`},
			row{name: "bad field", srv: keyed, method: "POST", path: path, body: `{"model":"m","max_tokens":10,"messages":[{"role":"wizard","content":"hi"}],"input":[{"role":"wizard","content":"hi"}]}`},
			row{name: "too many messages", srv: keyed, method: "POST", path: path, body: msgs("m", "hi", 3)},
			row{name: "prompt too large", srv: keyed, method: "POST", path: path, body: msgs("m", strings.Repeat("a", 100), 1)},
			row{name: "unknown model", srv: keyed, method: "POST", path: path, body: msgs("nope", "hi", 1)},
			row{name: "upstream overloaded", srv: keyed, method: "POST", path: path, body: msgs("over", "hi", 1)},
			row{name: "upstream overloaded, streaming", srv: keyed, method: "POST", path: path, body: strings.Replace(msgs("over", "hi", 1), `{`, `{"stream":true,`, 1)},
			row{name: "long upstream message", srv: keyed, method: "POST", path: path, body: msgs("long", "hi", 1)},
		)
	}
	rows = append(rows,
		// A refusal before routing on a path no route serves.
		row{name: "cross-origin page", srv: keyed, method: "POST", path: "/v1/messages/count_tokens", header: []string{"Origin", "https://evil.example"}, body: `{}`},
		row{name: "no route", srv: keyed, method: "POST", path: "/v1/messages/count_tokens", body: `{}`},
		row{name: "no route", srv: keyed, method: "GET", path: "/v2/nothing"},

		row{name: "no key", srv: keyed, method: "POST", path: "/v1/chat", header: []string{"Authorization", ""}, body: `{"message":"hi"}`},
		row{name: "not JSON", srv: keyed, method: "POST", path: "/v1/chat", body: `{"message":`},
		row{name: "unknown field", srv: keyed, method: "POST", path: "/v1/chat", body: `{"mesage":"hi"}`},
		row{name: "declared too large", srv: keyed, method: "POST", path: "/v1/chat", body: strings.Repeat(" ", 600<<10)},
		row{name: "empty message", srv: keyed, method: "POST", path: "/v1/chat", body: `{"message":" "}`},
		row{name: "message too long", srv: keyed, method: "POST", path: "/v1/chat", body: `{"message":"` + strings.Repeat("a", 300<<10) + `"}`},
		row{name: "unknown model", srv: keyed, method: "POST", path: "/v1/chat", body: `{"model":"nope","message":"hi"}`},
		row{name: "no such conversation", srv: keyed, method: "POST", path: "/v1/chat", body: `{"model":"m","message":"hi","conversation_id":"conv_x"}`},
		row{name: "store down", srv: down, method: "POST", path: "/v1/chat", body: `{"model":"m","message":"hi"}`},

		row{name: "no key", srv: keyed, method: "GET", path: "/v1/conversations", header: []string{"Authorization", ""}},
		row{name: "key check fails", srv: keyed, method: "GET", path: "/v1/conversations", header: []string{"Authorization", "Bearer broken"}},
		row{name: "bad limit", srv: keyed, method: "GET", path: "/v1/conversations?limit=0"},
		row{name: "store down", srv: down, method: "GET", path: "/v1/conversations"},
		row{name: "no such conversation", srv: keyed, method: "GET", path: "/v1/conversations/conv_x"},
		row{name: "no such conversation", srv: keyed, method: "DELETE", path: "/v1/conversations/conv_x"},
		row{name: "store down", srv: down, method: "GET", path: "/v1/conversations/conv_x"},
		row{name: "bad date", srv: keyed, method: "GET", path: "/v1/usage?from=yesterday"},
		row{name: "store down", srv: down, method: "GET", path: "/v1/usage"},
		row{name: "bad recent", srv: keyed, method: "GET", path: "/v1/budget?recent=-1"},
		row{name: "bad surface", srv: keyed, method: "GET", path: "/v1/budget?surface=gemini"},
		row{name: "no key", srv: keyed, method: "GET", path: "/admin/health", header: []string{"Authorization", ""}},
		row{name: "not an admin", srv: keyed, method: "GET", path: "/admin/health"},
		row{name: "not an admin", srv: keyed, method: "GET", path: "/admin/debug/pprof/heap"},
	)

	var out bytes.Buffer
	for _, tc := range rows {
		var resp *http.Response
		if tc.raw != "" {
			resp = rawPost(t, tc.srv, tc.path, "Authorization: Bearer k\r\n"+tc.raw)
		} else {
			req, err := http.NewRequest(tc.method, tc.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("Authorization", "Bearer k")
			req.Header.Set("Anthropic-Version", "2023-06-01")
			for i := 0; i < len(tc.header); i += 2 {
				if tc.header[i] == "Host" {
					req.Host = tc.header[i+1]
					continue
				}
				req.Header.Set(tc.header[i], tc.header[i+1])
				if tc.header[i+1] == "" {
					req.Header.Del(tc.header[i])
				}
			}
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s (%s): %v", tc.method, tc.path, tc.name, err)
			}
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&out, "=== %s %s: %s\n%d\n", tc.method, tc.path, tc.name, resp.StatusCode)
		for _, h := range []string{"Content-Type", "Retry-After", "WWW-Authenticate", "Connection"} {
			if v := resp.Header.Get(h); v != "" {
				fmt.Fprintf(&out, "%s: %s\n", h, v)
			}
		}
		fmt.Fprintf(&out, "%q\n\n", body)
	}

	golden := filepath.Join("testdata", "errors.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestErrorAnswers -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("error answers (-want +got):\n%s", diff)
	}
}

// rawPost sends a POST to path with a JSON content type, then rest (the
// remaining headers, the blank line, any body) as is, and reads the
// response.
func rawPost(t *testing.T, srv *httptest.Server, path, rest string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+rest)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

// TestStatusTable: each category answers with chat.Error.HTTPStatus in
// both dialects, but Anthropic's own 529 for overloaded, so the status
// wire/anthropic.ErrorType gives must agree with it; and every category
// firstword refuses a request with has a type in each dialect.
func TestStatusTable(t *testing.T) {
	for _, c := range []chat.Category{
		chat.CategoryRateLimited, chat.CategoryOverloaded, chat.CategoryAuth, chat.CategoryInvalidRequest,
		chat.CategoryNotFound, chat.CategoryContextLength, chat.CategoryContentFilter,
		chat.CategoryUpstreamUnavailable, chat.CategoryTimeout, chat.CategoryProtocol, chat.CategoryInternal,
		chat.CategoryBlocked, chat.CategoryContextUnavailable, chat.CategoryClientClosed, chat.CategoryShuttingDown,
	} {
		want := (&chat.Error{Category: c}).HTTPStatus()
		if c == chat.CategoryOverloaded {
			want = statusOverloaded
		}
		if _, got := anthropic.ErrorType(c); got != want {
			t.Errorf("anthropic.ErrorType(%s) status = %d, want %d", c, got, want)
		}
	}
	for _, c := range []chat.Category{
		chat.CategoryUnauthenticated, chat.CategoryPermissionDenied, chat.CategoryRequestTimeout,
		chat.CategoryTooLarge, chat.CategoryUnsupportedMedia, chat.CategoryStoreUnavailable, chat.CategoryConflict, chat.CategoryUnprocessable,
	} {
		if status := (&chat.Error{Category: c}).HTTPStatus(); status == http.StatusInternalServerError {
			t.Errorf("(%s).HTTPStatus() = 500: the refusal is missing from the table", c)
		}
		if ty, ok := refusalTypes[c]; !ok || ty.openAI == "" || ty.anthropic == "" {
			t.Errorf("refusalTypes[%s] = %+v, %v: want a type in each dialect", c, ty, ok)
		}
	}
}
