package yardstick

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
)

// Sample is one streamed request as the client saw it. Durations count
// from the moment the request was handed to the transport.
type Sample struct {
	TTFB time.Duration // first byte of the response body
	TTFW time.Duration // first visible text
	TTC  time.Duration // clean end of the stream
	// Gaps are the times between consecutive text chunks.
	Gaps []time.Duration
	// Tokens is the output tokens the stream reported, or its text
	// chunks when it reported none.
	Tokens int
	// Err is the error's kind ("" for a clean end): see errorKind.
	Err string
	// At is when the request was sent, from the run's start.
	At time.Duration
}

// firstByte records when the first byte of a body was read.
type firstByte struct {
	r    io.Reader
	at   time.Time
	once bool
}

func (f *firstByte) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && !f.once {
		f.at, f.once = time.Now(), true
	}
	return n, err
}

// exchange is one request in flight: what a probe needs to measure and
// to leave early.
type exchange struct {
	start time.Time
	resp  *http.Response
	fb    *firstByte
	dec   chunkReader
}

// open sends the request and returns once the response headers are in.
func (t *Target) open(ctx context.Context, c *http.Client, prompt string, maxTokens int) (*exchange, error) {
	req, err := t.newRequest(prompt, maxTokens)
	if err != nil {
		return nil, err
	}
	req = req.WithContext(ctx)
	x := &exchange{start: time.Now()}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, &statusError{resp.StatusCode}
	}
	x.resp = resp
	x.fb = &firstByte{r: resp.Body}
	x.dec = t.decoder(x.fb)
	return x, nil
}

type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d", e.code) }

// measure sends one request and reads its stream to the end.
func (t *Target) measure(ctx context.Context, c *http.Client, prompt string, maxTokens int) Sample {
	var s Sample
	x, err := t.open(ctx, c, prompt, maxTokens)
	if err != nil {
		s.Err = errorKind(err)
		return s
	}
	defer x.resp.Body.Close()
	var last time.Time
	texts, usage := 0, 0
	for {
		ch, err := x.dec.Next()
		now := time.Now()
		if err != nil {
			if x.fb.once {
				s.TTFB = x.fb.at.Sub(x.start)
			}
			if err == io.EOF {
				s.TTC = now.Sub(x.start)
				io.Copy(io.Discard, io.LimitReader(x.resp.Body, 64<<10)) // keep the connection
			} else {
				s.Err = errorKind(err)
			}
			s.Tokens = texts
			if usage > 0 {
				s.Tokens = usage
			}
			return s
		}
		if ch.Usage != nil {
			usage = ch.Usage.OutputTokens
		}
		if !visible(ch.Text) {
			continue
		}
		texts++
		if s.TTFW == 0 {
			s.TTFW = now.Sub(x.start)
		} else {
			s.Gaps = append(s.Gaps, now.Sub(last))
		}
		last = now
	}
}

// visible reports whether text holds something a reader sees: not empty,
// not only white space.
func visible(text string) bool {
	for _, r := range text {
		switch r {
		case ' ', '\t', '\n', '\r', utf8.RuneError:
		default:
			return true
		}
	}
	return false
}

// errorKind names an error for the errors-by-kind column: http_NNN (any
// redirect: http_3xx, as none is followed), done_STATUS or incomplete (the
// stream ended by its rules with a cut answer), an
// error event's code (event_CODE), protocol (the stream broke its
// surface's rules or ended without its end marker), timeout, refused,
// reset, eof, or other.
func errorKind(err error) string {
	var se *statusError
	var ce *chat.Error
	var ne net.Error
	var ee *eventError
	var de *endError
	switch {
	case errors.As(err, &de):
		return de.kind
	case errors.As(err, &ee):
		return "event_" + ee.code
	case errors.As(err, &se):
		if se.code >= 300 && se.code < 400 {
			return "http_3xx"
		}
		return fmt.Sprintf("http_%d", se.code)
	case errors.As(err, &ce) && ce.Category == chat.CategoryProtocol:
		if errors.Is(ce, io.ErrUnexpectedEOF) || errors.Is(ce, syscall.ECONNRESET) {
			return "cut"
		}
		return "protocol"
	case errors.As(err, &ce):
		return "event_" + string(ce.Category)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "cut"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "cut"
	}
	return "other"
}

// clientFor returns an HTTP client for conc concurrent streams.
func clientFor(conc int) *http.Client {
	return &http.Client{CheckRedirect: refuseRedirect, Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conc * 2,
		MaxIdleConnsPerHost: conc * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   true,
	}}
}

// refuseRedirect keeps every request on the target given: a redirect could
// lead off loopback past --allow-remote, with the key in its headers. The
// 3xx itself is returned and counted as http_3xx.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
