package router

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/firstword/firstword/internal/provider"
)

// Why Deadline refuses a name.
var (
	// ErrUnknownModel: the name is no alias, and no PROVIDER/MODEL name
	// of a configured provider.
	ErrUnknownModel = errors.New("no such model")
	// ErrPassthroughOff: a PROVIDER/MODEL name while Passthrough.Allow
	// refuses them.
	ErrPassthroughOff = errors.New("PROVIDER/MODEL names are off: set models_passthrough")
	// ErrPassthroughFull: a new PROVIDER/MODEL name when Passthrough.Max
	// are in use.
	ErrPassthroughFull = errors.New("too many PROVIDER/MODEL names in use")
)

// DefaultPassthroughMax is Passthrough.Max's default.
const DefaultPassthroughMax = 64

// Passthrough serves names of the form PROVIDER/MODEL ("openai/gpt-4o-mini",
// "sim/small") where an alias would go: PROVIDER is a configured provider's
// name, MODEL whatever its upstream calls a model (it may hold slashes). A
// configured alias of the same name wins.
//
// Each name is an alias made on its first use, with one deployment (that
// provider and model, ID the name itself) and Template's settings, and
// kept: its health, breaker and latency statistics accumulate across
// requests as an alias's do, shared with a configured deployment of the
// same provider and model. The names in use are bounded by Max, since each
// is kept for good and is a label value in the metrics.
type Passthrough struct {
	// Providers are the providers a name may start with, by name.
	Providers map[string]provider.Provider
	// Allow reports whether PROVIDER/MODEL names are served now (nil:
	// always). It is asked on every lookup, so a policy may change while
	// the router runs (the gateway's models_passthrough: auto serves them
	// while no API key exists).
	Allow func() bool
	// Template is every name's alias settings: timeouts, attempts,
	// backoff, hedging (moot with one deployment), breaker. Its Name and
	// Deployments are ignored; zero values take an alias's defaults.
	Template Alias
	// Max bounds the names in use (default DefaultPassthroughMax). A new
	// name past it is refused (ErrPassthroughFull) until the router is
	// rebuilt; configure an alias for a model clients rely on.
	Max int
}

// passthrough is a Router's PROVIDER/MODEL names.
type passthrough struct {
	Passthrough

	mu     sync.Mutex
	names  map[string]*alias
	health map[string]*health // deployments no configured alias has
}

func newPassthrough(p Passthrough) *passthrough {
	if p.Max <= 0 {
		p.Max = DefaultPassthroughMax
	}
	return &passthrough{Passthrough: p, names: map[string]*alias{}, health: map[string]*health{}}
}

// split parses a PROVIDER/MODEL name of a configured provider.
func (p *passthrough) split(name string) (prov provider.Provider, provName, model string, ok bool) {
	provName, model, ok = strings.Cut(name, "/")
	if !ok || !validModel(model) {
		return nil, "", "", false
	}
	prov = p.Providers[provName]
	return prov, provName, model, prov != nil
}

// validModel accepts what a provider could call a model: printable ASCII
// without spaces, at most 256 bytes.
func validModel(m string) bool {
	if m == "" || len(m) > 256 {
		return false
	}
	for i := 0; i < len(m); i++ {
		if m[i] <= ' ' || m[i] >= 0x7f {
			return false
		}
	}
	return true
}

// resolve returns name's alias, making it on first use.
func (p *passthrough) resolve(r *Router, name string) (*alias, error) {
	prov, provName, model, ok := p.split(name)
	if !ok {
		return nil, ErrUnknownModel
	}
	// Asked before the lock and on every lookup, even for a name already
	// made: turning the policy off takes effect for names in use too.
	if p.Allow != nil && !p.Allow() {
		return nil, ErrPassthroughOff
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Under the lock: two first requests for one name make one alias, with
	// one health.
	if a := p.names[name]; a != nil {
		return a, nil
	}
	if len(p.names) >= p.Max {
		return nil, fmt.Errorf("%w: all %d places are taken; configure an alias for it", ErrPassthroughFull, p.Max)
	}
	ac := p.Template
	ac.Name = name
	ac.Deployments = []Deployment{{ProviderName: provName, Model: model, ID: name, Provider: prov}}
	a, err := newAlias(ac, func(id string) *health {
		if h := r.health[id]; h != nil {
			return h // a configured deployment's: one provider and model, one health
		}
		return healthOf(p.health, id, ac.Breaker)
	})
	if err != nil {
		return nil, err
	}
	p.names[name] = a
	return a, nil
}

// inUse returns the names' aliases, sorted by name.
func (p *passthrough) inUse() []*alias {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*alias, 0, len(p.names))
	for _, a := range p.names {
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *alias) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// PassthroughModel is a PROVIDER/MODEL name a client may ask for.
type PassthroughModel struct {
	ID       string // "openai/gpt-4o-mini"
	Provider string // "openai"
}

// PassthroughModels lists the PROVIDER/MODEL names known to exist, while
// they are served: each configured deployment's provider and model, less
// names a configured alias takes, sorted. None when PROVIDER/MODEL names
// are off. Any model of a configured provider may be asked for; these are
// the ones the configuration vouches for.
func (r *Router) PassthroughModels() []PassthroughModel {
	p := r.pt
	if p == nil || p.Allow != nil && !p.Allow() {
		return nil
	}
	var out []PassthroughModel
	seen := map[string]bool{}
	for _, name := range r.names {
		for _, d := range r.aliases[name].deps {
			id := d.ProviderName + "/" + d.Model
			if seen[id] || r.aliases[id] != nil || p.Providers[d.ProviderName] == nil || !validModel(d.Model) {
				continue
			}
			seen[id] = true
			out = append(out, PassthroughModel{ID: id, Provider: d.ProviderName})
		}
	}
	slices.SortFunc(out, func(x, y PassthroughModel) int { return strings.Compare(x.ID, y.ID) })
	return out
}
