package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/connguard"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/httpapi"
)

// Serve serves on ln until ctx ends, then shuts down gracefully: /readyz
// answers 503 for the config's shutdown_delay while requests are still
// served, then Serve stops accepting (losing no connection already made:
// see quiesce) and lets open streams finish for shutdown_timeout, then
// cancels the rest (they end with an error event
// and are recorded). It returns nil after a shutdown, or the error that
// stopped the listener. Call it once; Close the gateway after it returns.
// mw, if any, wrap the gateway's handler, the first outermost (what embeds
// the gateway may record or add to every request).
func (g *Gateway) Serve(ctx context.Context, ln net.Listener, mw ...func(http.Handler) http.Handler) error {
	drain := g.cfg.ShutdownTimeout
	base, cancelAll := context.WithCancelCause(context.Background())
	defer cancelAll(nil)
	var handler http.Handler = g.api
	for i := len(mw) - 1; i >= 0; i-- {
		handler = mw[i](handler)
	}
	first := newFirstRequests()
	srv := &http.Server{
		Handler: handler,
		// net/http reads 4 KiB past MaxHeaderBytes before it refuses:
		// take it off, so the limit is the configured one.
		MaxHeaderBytes:    max(g.cfg.MaxHeaderBytes-4096, 1),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return httpapi.WithLifetime(base) },
		ConnState:         first.connState,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	raw := ln
	// Requests framed two ways at once (Content-Length and
	// Transfer-Encoding) are refused with 400 and a closed connection
	// before net/http would serve them as chunked.
	ln = connguard.NewListener(ln, connguard.Options{OnReject: func(remote net.Addr, reason string) {
		g.log.Warn("refused a request with ambiguous framing", "remote", remote.String(), "reason", reason)
	}})
	if addr := g.cfg.Metrics.Listen; addr != "" && g.metrics != nil {
		// /metrics alone, on a port of its own; it stays up through the
		// drain, so a scrape sees the streams finishing.
		mln, err := net.Listen("tcp", addr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("metrics.listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", g.metrics.Handler())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: srv.ErrorLog}
		go msrv.Serve(mln)
		defer msrv.Close()
	}
	go func() { errc <- srv.Serve(ln) }()
	if g.cfg.Store.Driver == "postgres" {
		go g.sweep(base)
	}
	if g.shared {
		go g.sweepLost(base)
	}
	if g.store != nil {
		go g.purgeIdempotencyKeys(base)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Unready first: a load balancer polling /readyz stops sending new
	// requests while this replica still serves them.
	g.api.Drain()
	if d := g.cfg.ShutdownDelay; d > 0 {
		g.log.Info("shutting down: unready, still serving", "delay", d.String())
		select {
		case err := <-errc:
			return err
		case <-time.After(d):
		}
	}
	g.quiesce(raw, first)
	g.log.Info("shutting down", "drain", drain.String())
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := srv.Shutdown(dctx)
	if errors.Is(err, context.DeadlineExceeded) {
		g.log.Warn("drain timeout: cancelling open streams")
		cancelAll(chat.ErrShutdown)
		// Give the handlers a moment to write their final events.
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer fcancel()
		if srv.Shutdown(fctx) != nil {
			srv.Close()
		}
		err = nil
	}
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return err
}

// every runs f every interval until ctx ends; at once too if now.
func every(ctx context.Context, interval time.Duration, now bool, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if now {
			f()
		}
		now = true
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep marks answers interrupted whose replica stopped writing them (it
// crashed), so they do not stay "streaming" until some replica restarts.
func (g *Gateway) sweep(ctx context.Context) {
	every(ctx, conversation.StreamLease/2, false, func() {
		if n, err := g.store.InterruptStreaming(ctx, time.Now().Add(-conversation.StreamLease), time.Now().UTC()); err != nil {
			g.log.Warn("sweeping stale streams", "err", err)
		} else if n > 0 {
			g.log.Warn("answers abandoned by a crashed replica are now interrupted", "count", n)
		}
	})
}

// lostQuiet is how long an answer's row must have gone unwritten for
// the lost-answer sweep to ask the journal about it. A live answer's row
// is written every conversation.DurableCheckpointEvery while the shared
// journal keeps it (and every checkpoint, or third of a lease, while the
// journal fails): quieter than that and half a lease, it is a dead
// producer's, or one whose database writes fail (the journal tells them
// apart: a live producer holds its lease). Asking about fewer rows keeps
// the sweep's cost (a journal read each) to the answers that need it.
func (g *Gateway) lostQuiet() time.Duration {
	return conversation.DurableCheckpointEvery + g.cfg.Resume.Lease/2
}

// idempotencyPurgeInterval is how often expired idempotency keys are
// deleted.
const idempotencyPurgeInterval = 10 * time.Minute

// purgeIdempotencyKeys deletes the idempotency keys whose window has
// passed, at start and then every idempotencyPurgeInterval. Every replica
// purges; a key deleted twice is deleted once.
func (g *Gateway) purgeIdempotencyKeys(ctx context.Context) {
	every(ctx, idempotencyPurgeInterval, true, func() {
		if n, err := g.store.PurgeIdempotencyKeys(ctx, time.Now().UTC()); err != nil && ctx.Err() == nil {
			g.log.Warn("purging expired idempotency keys", "err", err)
		} else if n > 0 {
			g.log.Info("purged expired idempotency keys", "count", n)
		}
	})
}

// sweepLost continues the answers whose replica died, as seen by the
// shared journal (their lease lapsed before their end), from their
// journaled text (httpapi.ContinueLost), or stores them interrupted with
// it when they cannot be continued: within lostQuiet and a second of the
// death, rather than the rows' own 30 s. (A replica a client resumes on
// takes an answer over as soon as its lease lapses.) Every replica
// sweeps; the journal's take-over lets one of them win.
func (g *Gateway) sweepLost(ctx context.Context) {
	every(ctx, time.Second, false, func() {
		ids, err := g.store.StaleStreaming(ctx, time.Now().Add(-g.lostQuiet()), 100)
		if err != nil {
			g.log.Warn("sweeping lost answers", "err", err)
			return
		}
		for _, id := range ids {
			snap, err := g.journal.Snapshot(ctx, id)
			if err != nil || !snap.Lost {
				continue
			}
			if err := g.api.ContinueLost(ctx, id); err != nil && !errors.Is(err, httpapi.ErrNotTaken) {
				g.log.Warn("continuing a lost answer", "message_id", id, "err", err)
			}
		}
	})
}
