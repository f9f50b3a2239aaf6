package gateway

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/limits"
	limitsredis "github.com/firstword/firstword/internal/limits/redis"
	"github.com/firstword/firstword/internal/store"
)

// buildLimits starts admission: the config's tenant policies, the store's
// overrides and spend, and the counts in process or on Redis.
func (g *Gateway) buildLimits(ctx context.Context, cfg *config.Config, st store.Store, log *slog.Logger) error {
	opt := limits.Options{Tenants: map[string]limits.Policy{}, Source: st, Timeout: cfg.Limits.Timeout, Cooldown: cfg.Limits.Cooldown,
		Refresh: cfg.Limits.Refresh, Lease: cfg.Limits.Lease, Period: cfg.Limits.Period, Log: log}
	for id, t := range cfg.Tenants {
		if t == nil {
			continue
		}
		var p limits.Policy
		if r := t.Limits; r != nil {
			p.Limits = limits.Rates{RequestsPerMinute: r.RequestsPerMinute, TokensPerMinute: r.TokensPerMinute, ConcurrentStreams: r.ConcurrentStreams}
		}
		if b := t.Budget; b != nil {
			p.Budget = limits.Budget{USDPerDay: b.USDPerDay, USDPerMonth: b.USDPerMonth, TokensPerDay: b.TokensPerDay,
				TokensPerMonth: b.TokensPerMonth, SoftThreshold: b.SoftThreshold}
		}
		opt.Tenants[id] = p
	}
	if cfg.Limits.Driver == "redis" {
		rc, err := limitsredis.Open(redisServer(cfg.Limits.Redis), "", cfg.Limits.Lease)
		if err != nil {
			return fmt.Errorf("limits: %w", err)
		}
		opt.Shared = rc
	}
	g.limiter = limits.New(ctx, opt)
	// The limiter first: its last releases reach the counts, which then
	// give back what this replica holds.
	g.closers = append(g.closers, func() error { g.limiter.Close(); return nil })
	if rc, ok := opt.Shared.(*limitsredis.Counts); ok {
		g.closers = append(g.closers, rc.Close)
	}
	if g.metrics != nil {
		g.metrics.ObserveLimits(g.limiter.Stats)
	}
	return nil
}
