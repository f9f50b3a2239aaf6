package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/chat"
)

// TestTransportErrorHidesAddress: the message a client sees says why the
// upstream was unreachable without naming its address; the log (Error())
// keeps the detail.
func TestTransportErrorHidesAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/chat/completions", nil)
	_, err = (&http.Client{}).Do(req)
	if err == nil {
		t.Fatal("the request to a closed port succeeded")
	}
	var ce *chat.Error
	if !errors.As(TransportError(context.Background(), "up", err), &ce) {
		t.Fatal("not a chat.Error")
	}
	if ce.Message != "upstream unreachable: connection refused" || ce.Category != chat.CategoryUpstreamUnavailable || !ce.Retryable {
		t.Errorf("client message %q (%s, retryable %v)", ce.Message, ce.Category, ce.Retryable)
	}
	if !strings.Contains(ce.Error(), addr) {
		t.Errorf("the log line lost the address: %q", ce.Error())
	}
	// A cancelled request is not an upstream failure.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(context.Canceled)
	if got := TransportError(ctx, "up", err); !errors.Is(got, context.Canceled) {
		t.Errorf("cancelled: %v", got)
	}
}
