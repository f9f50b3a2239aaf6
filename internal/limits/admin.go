package limits

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// The admin operations on limits: what the admin API (/admin/v1/tenants,
// /admin/v1/keys/{id}/limits, /admin/v1/usage) serves and "firstword
// tenants" runs on a store, so that the two cannot drift.

// AdminStore is what the admin operations read and write.
type AdminStore interface {
	Source
	PutLimitOverride(ctx context.Context, o *store.LimitOverride) error
	DeleteLimitOverride(ctx context.Context, scope, subjectID string) error
	ListAPIKeys(ctx context.Context, tenantID string) ([]store.APIKey, error)
	UsageReport(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error)
}

// Policies says what applies to tenants and keys, as a Limiter does.
type Policies interface {
	// Policies is what applies to a tenant or a key (kind "tenant" or
	// "key"): the config's, the override, and the two combined.
	Policies(kind, id string) (config Policy, override Override, effective Policy)
	// Tenants lists the tenants the config gives a policy.
	Tenants() []string
}

// StoreError is a failed read or write of the store; Op says which
// ("reading spend").
type StoreError struct {
	Op  string
	Err error
}

func (e *StoreError) Error() string { return e.Op + ": " + e.Err.Error() }

func (e *StoreError) Unwrap() error { return e.Err }

// ChangeError refuses a change: its JSON (Field "") or one of its fields.
type ChangeError struct {
	Field string
	Err   error
}

func (e *ChangeError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + " " + e.Err.Error()
}

func (e *ChangeError) Unwrap() error { return e.Err }

// ErrUnknownKey refuses a change of a key that does not exist.
var ErrUnknownKey = errors.New("no key has this ID")

// View is a tenant's or a key's limits, budget and spend so far, as the
// admin API shows them.
type View struct {
	ID        string   `json:"id"`
	Config    Policy   `json:"config"`
	Override  Override `json:"override"`
	Effective Policy   `json:"effective"`
	Spend     Spend    `json:"spend"`
	// Budget is each cap's state: ok, soft (past the soft threshold) or
	// exhausted; absent caps are left out.
	Budget map[string]string `json:"budget_state"`
}

// Spend is the spend of the current UTC day and month, summed from the
// usage rows (the attempts that did not give the answers included).
type Spend struct {
	Day         string  `json:"day"`
	Month       string  `json:"month"`
	USDDay      float64 `json:"usd_day"`
	USDMonth    float64 `json:"usd_month"`
	TokensDay   int64   `json:"tokens_day"`
	TokensMonth int64   `json:"tokens_month"`
}

// TenantViews lists every tenant with a policy (pol's, or an override in
// st) or spend this month, by ID.
func TenantViews(ctx context.Context, st Source, pol Policies) ([]View, error) {
	now := time.Now().UTC()
	sums, err := monthSpend(ctx, st, now)
	if err != nil {
		return nil, err
	}
	ovs, err := st.ListLimitOverrides(ctx)
	if err != nil {
		return nil, &StoreError{"reading limit overrides", err}
	}
	ids := pol.Tenants()
	for _, o := range ovs {
		if o.Scope == store.ScopeTenant {
			ids = append(ids, o.SubjectID)
		}
	}
	for _, r := range sums {
		ids = append(ids, r.TenantID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	spend := spendOf(sums, now)
	out := make([]View, 0, len(ids))
	for _, id := range ids {
		out = append(out, view(pol, store.ScopeTenant, id, spend, now))
	}
	return out, nil
}

// ViewOf is one tenant's (kind "tenant") or key's ("key") view.
func ViewOf(ctx context.Context, st Source, pol Policies, kind, id string) (View, error) {
	now := time.Now().UTC()
	sums, err := monthSpend(ctx, st, now)
	if err != nil {
		return View{}, err
	}
	return view(pol, kind, id, spendOf(sums, now), now), nil
}

// monthSpend reads this month's spend, by tenant and key and day.
func monthSpend(ctx context.Context, st Source, now time.Time) ([]store.SpendSum, error) {
	sums, err := st.UsageSpend(ctx, time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return nil, &StoreError{"reading spend", err}
	}
	return sums, nil
}

func view(pol Policies, kind, id string, spend map[subject]*spent, now time.Time) View {
	cfg, ov, eff := pol.Policies(kind, id)
	v := View{ID: id, Config: cfg, Override: ov, Effective: eff, Budget: map[string]string{}}
	v.Spend.Day, v.Spend.Month = now.Format("2006-01-02"), now.Format("2006-01")
	if sp := spend[subject{kind, id}]; sp != nil {
		v.Spend.USDDay, v.Spend.USDMonth, v.Spend.TokensDay, v.Spend.TokensMonth = sp.dayUSD, sp.monthUSD, sp.dayTokens, sp.monthTokens
	}
	soft := eff.Budget.soft()
	state := func(name string, used, limit float64) {
		switch {
		case limit <= 0:
		case used >= limit:
			v.Budget[name] = "exhausted"
		case used >= limit*soft:
			v.Budget[name] = "soft"
		default:
			v.Budget[name] = "ok"
		}
	}
	state("usd_per_day", v.Spend.USDDay, eff.Budget.USDPerDay)
	state("usd_per_month", v.Spend.USDMonth, eff.Budget.USDPerMonth)
	state("tokens_per_day", float64(v.Spend.TokensDay), float64(eff.Budget.TokensPerDay))
	state("tokens_per_month", float64(v.Spend.TokensMonth), float64(eff.Budget.TokensPerMonth))
	return v
}

// Change is a change of a tenant's or key's override: the fields set
// replace the override's, the others stay.
type Change struct {
	Override
	// Reset drops every override first: the config's policy applies.
	Reset bool `json:"reset"`
}

// ParseChange decodes a change from one JSON object with no unknown
// field and nothing after it, and checks its fields; the error is a
// *ChangeError.
func ParseChange(raw []byte) (Change, error) {
	var c Change
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, &ChangeError{Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return c, &ChangeError{Err: errors.New("unexpected data after the JSON value")}
	}
	if field, why := c.Override.Check(); field != "" {
		return c, &ChangeError{Field: field, Err: errors.New(why)}
	}
	return c, nil
}

// CheckSubject reports whether an override may be set for id: any
// tenant, and only a key that exists (else ErrUnknownKey).
func CheckSubject(ctx context.Context, st AdminStore, scope, id string) error {
	if scope != store.ScopeKey {
		return nil
	}
	keys, err := st.ListAPIKeys(ctx, "")
	if err != nil {
		return &StoreError{"listing keys", err}
	}
	if !slices.ContainsFunc(keys, func(k store.APIKey) bool { return k.ID == id }) {
		return ErrUnknownKey
	}
	return nil
}

// SetOverride applies the change raw (JSON, see ParseChange) to the
// override of a tenant (scope store.ScopeTenant) or an existing key
// (store.ScopeKey, else ErrUnknownKey) in st, and returns the override
// now stored. An override left empty is deleted. Limiters see it at their
// next reload.
func SetOverride(ctx context.Context, st AdminStore, scope, id string, raw []byte) (Override, error) {
	if err := CheckSubject(ctx, st, scope, id); err != nil {
		return Override{}, err
	}
	c, err := ParseChange(raw)
	if err != nil {
		return Override{}, err
	}
	cur := Override{}
	if !c.Reset {
		ovs, err := st.ListLimitOverrides(ctx)
		if err != nil {
			return Override{}, &StoreError{"reading limit overrides", err}
		}
		for _, o := range ovs {
			if o.Scope == scope && o.SubjectID == id {
				if cur, err = ParseOverride(o.Settings); err != nil {
					cur = Override{} // what the limiter ignores is replaced
				}
			}
		}
	}
	next := cur.Merge(c.Override)
	if next == (Override{}) {
		if err := st.DeleteLimitOverride(ctx, scope, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return Override{}, &StoreError{"deleting a limit override", err}
		}
		return next, nil
	}
	settings, _ := json.Marshal(next)
	if err := st.PutLimitOverride(ctx, &store.LimitOverride{Scope: scope, SubjectID: id, Settings: settings, UpdatedAt: time.Now()}); err != nil {
		return Override{}, &StoreError{"writing a limit override", err}
	}
	return next, nil
}

// ParseWhen parses a YYYY-MM-DD day (UTC) or an RFC 3339 time; "" is the
// zero time.
func ParseWhen(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, fmt.Errorf("want YYYY-MM-DD or an RFC 3339 time, got %q", v)
	}
	return t, nil
}

// Usage reads the usage rows f selects, by tenant, key, model and UTC
// day (an empty list, not nil, when there are none).
func Usage(ctx context.Context, st AdminStore, f store.UsageFilter) ([]store.UsageRow, error) {
	rows, err := st.UsageReport(ctx, f)
	if err != nil {
		return nil, &StoreError{"reading usage", err}
	}
	if rows == nil {
		rows = []store.UsageRow{}
	}
	return rows, nil
}
