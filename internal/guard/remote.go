package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// errRemoteTimeout is the cause of a remote call that ran out of
// HTTPConfig.Timeout.
var errRemoteTimeout = errors.New("remote guard timed out")

// maxAnswerBytes bounds the remote guard's answer.
const maxAnswerBytes = 64 << 10

// remote calls a remote guard service.
type remote struct {
	url      string
	timeout  time.Duration
	failOpen bool
	headers  http.Header
	client   *http.Client
}

func newRemote(h HTTPConfig, client *http.Client) (*remote, error) {
	var errs []error
	if err := validURL(h.URL); err != nil {
		errs = append(errs, fmt.Errorf("url: %w", err))
	}
	if h.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: must not be negative, got %v", h.Timeout))
	}
	r := &remote{url: h.URL, timeout: h.Timeout, failOpen: h.FailOpen, headers: http.Header{}, client: client}
	if r.timeout == 0 {
		r.timeout = DefaultHTTPTimeout
	}
	if r.client == nil {
		r.client = &http.Client{}
	}
	r.headers.Set("Content-Type", "application/json")
	r.headers.Set("Accept", "application/json")
	for k, v := range h.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			errs = append(errs, fmt.Errorf("headers: invalid header %q", k))
			continue
		}
		r.headers.Set(k, v)
	}
	return r, errors.Join(errs...)
}

// check asks the remote guard about text. It returns an error when the call
// fails, times out, answers with a non-2xx status or a malformed answer.
func (r *remote) check(ctx context.Context, text, user string) (allowed bool, reason string, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, r.timeout, errRemoteTimeout)
	defer cancel()
	body, err := json.Marshal(struct {
		Text string `json:"text"`
		User string `json:"user"`
	}{text, user})
	if err != nil {
		return false, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return false, "", err
	}
	req.Header = r.headers.Clone()
	resp, err := r.client.Do(req)
	if err != nil {
		if context.Cause(ctx) == errRemoteTimeout {
			return false, "", fmt.Errorf("timed out after %v", r.timeout)
		}
		return false, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // let the connection be reused
		return false, "", fmt.Errorf("status %s", resp.Status)
	}
	var ans struct {
		Allowed *bool  `json:"allowed"`
		Reason  string `json:"reason"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(&ans); err != nil {
		if context.Cause(ctx) == errRemoteTimeout {
			return false, "", fmt.Errorf("timed out after %v", r.timeout)
		}
		return false, "", fmt.Errorf("decode answer: %w", err)
	}
	if ans.Allowed == nil {
		return false, "", errors.New(`answer has no "allowed" field`)
	}
	return *ans.Allowed, ans.Reason, nil
}
