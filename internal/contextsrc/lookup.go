package contextsrc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// DefaultMaxBytes is the response size a Lookup keeps when MaxBytes is 0.
const DefaultMaxBytes = 4096

// Lookup is a Source that calls an HTTP endpoint (an order lookup, an
// account summary) and puts its answer into the prompt.
type Lookup struct {
	// LookupName is the source's name; it also labels the answer in the
	// prompt. Required.
	LookupName string
	// URLTemplate is the absolute http or https URL to GET, e.g.
	// "http://orders.internal/lookup?user={{user}}&q={{question}}". The
	// placeholders {{user}}, {{tenant}}, {{question}} and {{conversation}}
	// are replaced by the query's values, escaped for where they stand:
	// query-escaped after the "?", path-escaped before it. Placeholders are
	// not allowed in the scheme or host; any other name is an error.
	URLTemplate string
	// Headers are added to the request (e.g. Authorization).
	Headers map[string]string
	// MaxBytes is how much of the answer is kept (default 4096). A longer
	// answer is cut at a UTF-8 character boundary and ends with "…".
	MaxBytes int
	// Client makes the request; nil means a client with the default
	// transport.
	Client *http.Client
}

// Validate reports every problem with l at once.
func (l *Lookup) Validate() error {
	var errs []error
	if strings.TrimSpace(l.LookupName) == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if u, err := expand(l.URLTemplate, Query{"t", "u", "c", "q"}); err != nil {
		errs = append(errs, fmt.Errorf("url: %w", err))
	} else if p, err := url.Parse(u); err != nil {
		errs = append(errs, fmt.Errorf("url: %w", err))
	} else if (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		errs = append(errs, fmt.Errorf("url: want an absolute http or https URL, got %q", l.URLTemplate))
	}
	if l.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max_bytes: must not be negative, got %d", l.MaxBytes))
	}
	for k, v := range l.Headers {
		if !validHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
			errs = append(errs, fmt.Errorf("headers: invalid header %q", k))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lookup %s: %w", l.LookupName, err)
	}
	return nil
}

// Name returns LookupName.
func (l *Lookup) Name() string { return l.LookupName }

// Fetch GETs the expanded URL. A 2xx answer becomes Text as "<name>:
// <body>", the body trimmed, compacted when it is JSON, and cut to MaxBytes;
// an empty body gives an empty Text. A non-2xx answer is an error naming the
// status. Cancelling ctx aborts the request at once. Errors do not repeat
// the URL, which may hold the user's question.
func (l *Lookup) Fetch(ctx context.Context, q Query) (Result, error) {
	res := Result{Source: l.Name()}
	fail := func(err error) (Result, error) {
		if ctx.Err() != nil {
			err = ctxErr(ctx)
		}
		return res, fmt.Errorf("lookup %s: %w", l.LookupName, err)
	}
	u, err := expand(l.URLTemplate, q)
	if err != nil {
		return fail(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(errors.New("invalid url"))
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	for k, v := range l.Headers {
		req.Header.Set(k, v)
	}
	client := l.Client
	if client == nil {
		client = &http.Client{}
	}
	resp, err := client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // drop the URL
		}
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // let the connection be reused
		return fail(fmt.Errorf("status %s", resp.Status))
	}
	limit := l.MaxBytes
	if limit == 0 {
		limit = DefaultMaxBytes
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return fail(fmt.Errorf("read answer: %w", err))
	}
	if text := formatBody(body, limit); text != "" {
		res.Text = l.LookupName + ": " + text
	}
	return res, nil
}

// formatBody trims body, compacts it when it is complete JSON, and cuts it
// to limit bytes on a UTF-8 boundary, marking the cut with "…". A body of
// more than limit bytes is taken to be cut already.
func formatBody(body []byte, limit int) string {
	cut := len(body) > limit
	if cut {
		n := limit
		for n > 0 && !utf8.RuneStart(body[n]) {
			n--
		}
		body = body[:n]
	}
	body = bytes.TrimSpace(body)
	if !cut && json.Valid(body) {
		var b bytes.Buffer
		if json.Compact(&b, body) == nil {
			body = b.Bytes()
		}
	}
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	if cut {
		s += "…"
	}
	return s
}

// expand fills the placeholders of a URL template with q's values,
// path-escaped before the first "?" and query-escaped after it. Unknown or
// unclosed placeholders, and placeholders in the scheme or host, are errors.
func expand(tmpl string, q Query) (string, error) {
	// The authority ends at the first "/", "?" or "#" after "//".
	authEnd := 0
	if i := strings.Index(tmpl, "//"); i >= 0 {
		authEnd = i + 2
		if j := strings.IndexAny(tmpl[authEnd:], "/?#"); j >= 0 {
			authEnd += j
		} else {
			authEnd = len(tmpl)
		}
	}
	var b strings.Builder
	inQuery := false
	for pos := 0; ; {
		i := strings.Index(tmpl[pos:], "{{")
		if i < 0 {
			b.WriteString(tmpl[pos:])
			return b.String(), nil
		}
		i += pos
		lit := tmpl[pos:i]
		b.WriteString(lit)
		inQuery = inQuery || strings.Contains(lit, "?")
		j := strings.Index(tmpl[i+2:], "}}")
		if j < 0 {
			return "", fmt.Errorf("unclosed placeholder at byte %d", i)
		}
		name := strings.TrimSpace(tmpl[i+2 : i+2+j])
		if i < authEnd {
			return "", fmt.Errorf("placeholder {{%s}} in the scheme or host", name)
		}
		var v string
		switch name {
		case "user":
			v = q.UserID
		case "tenant":
			v = q.TenantID
		case "question":
			v = q.Question
		case "conversation":
			v = q.ConversationID
		default:
			return "", fmt.Errorf("unknown placeholder {{%s}} (want user, tenant, question or conversation)", name)
		}
		if inQuery {
			b.WriteString(url.QueryEscape(v))
		} else {
			b.WriteString(url.PathEscape(v))
		}
		pos = i + 2 + j + 2
	}
}

// validHeaderName reports whether k is an HTTP token (RFC 9110, 5.6.2).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= 0x7f || c <= ' ' || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
