package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/firstword/firstword/internal/sse"
)

// Sample is one streamed request as the client saw it.
type Sample struct {
	TTFT time.Duration // request sent → first content event parsed
	// FirstThought is request sent → first thinking (reasoning_content)
	// event parsed; 0 when none came.
	FirstThought time.Duration
	Total        time.Duration   // request sent → stream end
	Gaps         []time.Duration // between content events
}

// NewClient returns an HTTP client for conc concurrent streams.
func NewClient(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conc * 2,
		MaxIdleConnsPerHost: conc * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

var (
	contentMarker  = []byte(`"content"`)
	thinkingMarker = []byte(`"reasoning_content"`)
)

func requestBody(model string) string {
	return `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"benchmark"}]}`
}

// postJSON posts body to url and returns the response, once its status
// is 200, and when the request was sent; any other status is an error
// with the body's text.
func postJSON(ctx context.Context, c *http.Client, url, body string) (*http.Response, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return nil, start, err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, start, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return resp, start, nil
}

// Stream sends one streaming request and reads it to the end.
func Stream(ctx context.Context, c *http.Client, url, model string, gaps bool) (Sample, error) {
	var s Sample
	resp, start, err := postJSON(ctx, c, url+"/v1/chat/completions", requestBody(model))
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	rd := sse.NewReader(resp.Body, 0)
	var last time.Time
	for {
		ev, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				return s, fmt.Errorf("stream ended without [DONE]")
			}
			return s, err
		}
		if bytes.Equal(ev.Data, []byte("[DONE]")) {
			s.Total = time.Since(start)
			io.Copy(io.Discard, resp.Body) // keep the connection for the next request
			return s, nil
		}
		if s.FirstThought == 0 && bytes.Contains(ev.Data, thinkingMarker) {
			s.FirstThought = time.Since(start)
		}
		if !bytes.Contains(ev.Data, contentMarker) || bytes.Contains(ev.Data, []byte(`"content":""`)) {
			continue
		}
		now := time.Now()
		if s.TTFT == 0 {
			s.TTFT = now.Sub(start)
		} else if gaps {
			s.Gaps = append(s.Gaps, now.Sub(last))
		}
		last = now
	}
}

// OpenIdle opens a stream and returns once its first content event
// arrived, leaving it open; close the returned body to end it.
func OpenIdle(ctx context.Context, c *http.Client, url, model string) (io.Closer, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(requestBody(model)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err != nil {
			resp.Body.Close()
			return nil, err
		}
		if bytes.Contains(ev.Data, []byte("tok0")) {
			return resp.Body, nil
		}
	}
}
