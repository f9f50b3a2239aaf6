package gateway

import (
	"github.com/firstword/firstword/internal/budget/window"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/provider/sim"
	"github.com/firstword/firstword/internal/store"
)

// What the end-to-end tests read of a running gateway besides its HTTP
// API. Nothing in production reads these.

// Store returns the store requests use (bounded by store.timeout).
func (g *Gateway) Store() store.Store { return g.store }

// Window returns the rolling budget window behind /v1/budget.
func (g *Gateway) Window() *window.Window { return g.window }

// Levers returns the levers in front of the router (caps, rules, the
// response cache, coalescing).
func (g *Gateway) Levers() *levers.Levers { return g.levers }

// Sim returns the simulated provider configured as name, or nil.
func (g *Gateway) Sim(name string) *sim.Provider { return g.sims[name] }
