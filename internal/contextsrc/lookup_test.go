package contextsrc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var testQuery = Query{TenantID: "acme", UserID: "u 42", ConversationID: "c/7", Question: "where is order #12&x=1?"}

// expandRows are the template table, also the fuzz seeds.
var expandRows = []struct {
	name    string
	tmpl    string
	want    string
	wantErr string
}{
	{name: "no placeholders", tmpl: "http://orders.internal/lookup", want: "http://orders.internal/lookup"},
	{name: "query escaping", tmpl: "http://orders.internal/lookup?user={{user}}&q={{question}}",
		want: "http://orders.internal/lookup?user=u+42&q=where+is+order+%2312%26x%3D1%3F"},
	{name: "all placeholders", tmpl: "http://h/x?t={{tenant}}&u={{user}}&c={{conversation}}",
		want: "http://h/x?t=acme&u=u+42&c=c%2F7"},
	{name: "path escaping before the query", tmpl: "http://h/users/{{user}}/conv/{{conversation}}?q={{question}}",
		want: "http://h/users/u%2042/conv/c%2F7?q=where+is+order+%2312%26x%3D1%3F"},
	{name: "spaces inside braces", tmpl: "http://h/?u={{ user }}", want: "http://h/?u=u+42"},
	{name: "repeated", tmpl: "http://h/?a={{tenant}}&b={{tenant}}", want: "http://h/?a=acme&b=acme"},
	{name: "stray closing braces", tmpl: "http://h/}}?u={{user}}", want: "http://h/}}?u=u+42"},
	{name: "unknown placeholder", tmpl: "http://h/?o={{order}}", wantErr: "unknown placeholder {{order}}"},
	{name: "wrong case", tmpl: "http://h/?u={{User}}", wantErr: "unknown placeholder {{User}}"},
	{name: "unclosed", tmpl: "http://h/?u={{user", wantErr: "unclosed placeholder at byte 12"},
	{name: "placeholder in host", tmpl: "http://{{tenant}}.internal/x", wantErr: "placeholder {{tenant}} in the scheme or host"},
	{name: "placeholder in scheme", tmpl: "{{tenant}}://h/x", wantErr: "in the scheme or host"},
}

func TestExpand(t *testing.T) {
	for _, tt := range expandRows {
		t.Run(tt.name, func(t *testing.T) {
			got, err := expand(tt.tmpl, testQuery)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("expand(%q) = %q, %v; want error %q", tt.tmpl, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("expand(%q) = %q, %v; want %q", tt.tmpl, got, err, tt.want)
			}
		})
	}
}

func FuzzExpand(f *testing.F) {
	for _, r := range expandRows {
		f.Add(r.tmpl, testQuery.Question)
	}
	f.Fuzz(func(t *testing.T, tmpl, value string) {
		q := Query{TenantID: value, UserID: value, ConversationID: value, Question: value}
		out, err := expand(tmpl, q)
		if err == nil && !strings.Contains(tmpl, "{{") && out != tmpl {
			t.Fatalf("expand(%q) = %q, want the template unchanged", tmpl, out)
		}
		// A value in the query round-trips through URL parsing, whatever
		// bytes it holds.
		u, err := expand("http://h/p/{{user}}?q={{question}}", q)
		if err != nil {
			t.Fatal(err)
		}
		p, err := url.Parse(u)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", u, err)
		}
		if got := p.Query().Get("q"); got != value {
			t.Fatalf("query value %q came back as %q from %q", value, got, u)
		}
		if p.Host != "h" || p.Fragment != "" || strings.Count(p.EscapedPath(), "/") != 2 {
			t.Fatalf("value %q changed the URL's structure: %q", value, u)
		}
	})
}

func TestLookupValidate(t *testing.T) {
	tests := []struct {
		name string
		l    Lookup
		want []string // substrings of the error; none means valid
	}{
		{name: "ok", l: Lookup{LookupName: "orders", URLTemplate: "https://orders.internal/lookup?user={{user}}", Headers: map[string]string{"Authorization": "Bearer x"}}},
		{name: "no name", l: Lookup{URLTemplate: "http://h/"}, want: []string{"name is required"}},
		{name: "unknown placeholder", l: Lookup{LookupName: "o", URLTemplate: "http://h/?x={{order_id}}"}, want: []string{"unknown placeholder {{order_id}}"}},
		{name: "relative", l: Lookup{LookupName: "o", URLTemplate: "/lookup?u={{user}}"}, want: []string{"absolute http or https"}},
		{name: "bad scheme", l: Lookup{LookupName: "o", URLTemplate: "file:///etc/passwd"}, want: []string{"absolute http or https"}},
		{name: "every problem at once", l: Lookup{URLTemplate: "http://{{question}}/", MaxBytes: -1, Headers: map[string]string{"Bad Header": "x"}},
			want: []string{"name is required", "in the scheme or host", "max_bytes", `invalid header "Bad Header"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestLookupFetch(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		maxBytes int
		want     Result
		wantErr  string
	}{
		{name: "json is compacted",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, "{\n  \"order\": \"A-77231\",\n  \"status\": \"shipped\"\n}\n")
			},
			want: Result{Source: "orders", Text: `orders: {"order":"A-77231","status":"shipped"}`}},
		{name: "text",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "  Order A-77231 shipped on 14 March.\n")
			},
			want: Result{Source: "orders", Text: "orders: Order A-77231 shipped on 14 March."}},
		{name: "empty body",
			handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
			want:    Result{Source: "orders"}},
		{name: "huge body is cut",
			handler: func(w http.ResponseWriter, r *http.Request) {
				for range 1000 {
					io.WriteString(w, "0123456789")
				}
			},
			maxBytes: 25,
			want:     Result{Source: "orders", Text: "orders: 0123456789012345678901234…"}},
		{name: "cut on a character boundary",
			handler:  func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "Größe: 42 — Farbe: blau") },
			maxBytes: 5, // "Grö" is 4 bytes, "ß" would end at byte 6
			want:     Result{Source: "orders", Text: "orders: Grö…"}},
		{name: "not found",
			handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such order", http.StatusNotFound) },
			wantErr: "lookup orders: status 404 Not Found"},
		{name: "server error",
			handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) },
			wantErr: "lookup orders: status 502 Bad Gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, tt.handler)
			l := &Lookup{LookupName: "orders", URLTemplate: srv.URL + "/lookup?q={{question}}", MaxBytes: tt.maxBytes, Client: srv.Client()}
			got, err := l.Fetch(t.Context(), testQuery)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Fetch = %+v, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Fetch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookupRequest(t *testing.T) {
	type request struct {
		Method, Path, User, Q, Auth string
	}
	got := make(chan request, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got <- request{r.Method, r.URL.EscapedPath(), r.URL.Query().Get("user"), r.URL.Query().Get("q"), r.Header.Get("Authorization")}
		io.WriteString(w, "ok")
	})
	l := &Lookup{LookupName: "orders", URLTemplate: srv.URL + "/t/{{tenant}}/lookup?user={{user}}&q={{question}}",
		Headers: map[string]string{"Authorization": "Bearer s3cret"}}
	if _, err := l.Fetch(t.Context(), testQuery); err != nil {
		t.Fatal(err)
	}
	want := request{Method: "GET", Path: "/t/acme/lookup", User: "u 42", Q: testQuery.Question, Auth: "Bearer s3cret"}
	if diff := cmp.Diff(want, <-got); diff != "" {
		t.Errorf("lookup request (-want +got):\n%s", diff)
	}
}

func TestLookupCancel(t *testing.T) {
	// The server never answers until the client goes away.
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	l := &Lookup{LookupName: "orders", URLTemplate: srv.URL + "/?q={{question}}", Client: srv.Client()}

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var cancelled time.Time
		time.AfterFunc(20*time.Millisecond, func() { cancelled = time.Now(); cancel() })
		_, err := l.Fetch(ctx, testQuery)
		late := time.Since(cancelled)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Fetch = %v, want context.Canceled", err)
		}
		t.Logf("Fetch returned %v after cancel", late)
		if late > 100*time.Millisecond {
			t.Errorf("Fetch returned %v after cancel, want a few ms", late)
		}
		if strings.Contains(err.Error(), "where") {
			t.Errorf("error %q repeats the question", err)
		}
	})
	t.Run("deadline with a cause", func(t *testing.T) {
		errBudget := errors.New("source over budget")
		ctx, cancel := context.WithTimeoutCause(t.Context(), 20*time.Millisecond, errBudget)
		defer cancel()
		_, err := l.Fetch(ctx, testQuery)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errBudget) {
			t.Errorf("Fetch = %v, want DeadlineExceeded and the cause", err)
		}
	})
}

func TestLookupTransportErrorHidesURL(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // nothing listens there now
	l := &Lookup{LookupName: "orders", URLTemplate: addr + "/?q={{question}}"}
	_, err := l.Fetch(t.Context(), Query{Question: "secret question"})
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.HasPrefix(err.Error(), "lookup orders: ") {
		t.Errorf("Fetch = %v, want a lookup error without the URL", err)
	}
}
