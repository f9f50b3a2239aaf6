package gateway

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Closing a listening socket loses two kinds of connections a load
// balancer has already sent its request on, and which it cannot tell
// from a replica that failed while answering (nginx answers such a POST
// 502: it never resends one that went out):
//
//   - the kernel resets the connections it completed but the server had
//     not accepted yet, and
//   - http.Server.Shutdown closes, unanswered, a connection whose first
//     request it reads after the shutdown began.
//
// A load balancer that learns a replica is leaving only from a refused
// connection (open-source nginx; anything that does not poll /readyz)
// connects until the listener closes, so under load one of these is
// likely at each close (TestShutdownResetsNoConnection lost 1 to 3
// connections in each of its runs without quiesce). quiesce makes the
// close lose nothing: the listener first stops completing new connections (on
// Linux a socket filter drops their SYNs: the client sends it again a
// second later, is refused by then, and nginx sends the request to the
// next replica), then the server accepts what the kernel completed and
// waits until every connection has read its first request.

const (
	// quiesceSettle lets handshakes under way when SYNs stop being
	// taken complete (a round trip: microseconds on loopback, a
	// millisecond or two across a data centre). Every shutdown waits it.
	quiesceSettle = 20 * time.Millisecond
	// quiesceMax bounds the wait for first requests: a client that
	// connected and sends nothing is not waited for longer.
	quiesceMax = time.Second
)

// quiesce prepares ln's close (see above); Serve calls srv.Shutdown after
// it. first tracks the connections whose first request is still to come.
func (g *Gateway) quiesce(ln net.Listener, first *firstRequests) {
	start := time.Now()
	refusing := refuseNewConnections(ln)
	if refusing {
		time.Sleep(quiesceSettle)
	}
	for {
		queued := acceptQueue(ln)
		waiting := first.waiting()
		if queued == 0 && waiting == 0 {
			g.log.Info("shutting down: no connection is waiting to be served", "refusing_new", refusing, "took", time.Since(start).Round(time.Millisecond).String())
			return
		}
		if time.Since(start) > quiesceMax {
			g.log.Warn("shutting down with connections not served yet", "accept_queue", queued, "first_requests_due", waiting)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ListenTCP listens on addr (host:port) with plain TCP, for Serve. Go
// listens with Multipath TCP where the kernel has it, and Linux refuses a
// socket filter on an MPTCP socket, so Serve could not make such a
// listener stop taking connections before closing it (see quiesce). A
// client that speaks MPTCP falls back to TCP, as it does behind any load
// balancer.
func ListenTCP(addr string) (net.Listener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	return lc.Listen(context.Background(), "tcp", addr)
}

// firstRequests counts the server's connections that have not read
// their first request yet (net/http drops one it reads after Shutdown
// began). Its connState is the http.Server's ConnState hook: net/http
// calls it with StateActive once a request's bytes are read, on the
// connection's own goroutine, a few instructions before it checks for a
// shutdown. A wrapper of the handler would see the request later but
// costs every stream a frame at its deepest moment (TestOpenStreamStacks),
// so the hook is used, and waiting counts a connection that turned active
// in the last activeSettle as still due.
type firstRequests struct {
	mu         sync.Mutex
	due        map[net.Conn]struct{}
	lastActive atomic.Int64 // unix nanoseconds
}

const activeSettle = 2 * time.Millisecond

func newFirstRequests() *firstRequests {
	return &firstRequests{due: map[net.Conn]struct{}{}}
}

func (f *firstRequests) connState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		f.mu.Lock()
		f.due[c] = struct{}{}
		f.mu.Unlock()
	case http.StateActive:
		f.mu.Lock()
		_, due := f.due[c]
		delete(f.due, c)
		f.mu.Unlock()
		if due {
			f.lastActive.Store(time.Now().UnixNano())
		}
	case http.StateClosed, http.StateHijacked:
		f.mu.Lock()
		delete(f.due, c)
		f.mu.Unlock()
	}
}

func (f *firstRequests) waiting() int {
	f.mu.Lock()
	n := len(f.due)
	f.mu.Unlock()
	if n == 0 && time.Since(time.Unix(0, f.lastActive.Load())) < activeSettle {
		n = 1
	}
	return n
}
