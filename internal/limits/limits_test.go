package limits

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/store"
)

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(t *testing.T, opt Options) (*Limiter, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	opt.Refresh = time.Hour
	l := New(context.Background(), opt)
	t.Cleanup(l.Close)
	l.now = c.now
	l.local.now = c.now
	return l, c
}

func reason(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	if err != nil {
		return err.Error()
	}
	return "admitted"
}

func TestRequestsPerPeriod(t *testing.T) {
	l, c := newTest(t, Options{Tenants: map[string]Policy{"acme": {Limits: Rates{RequestsPerMinute: 3}}}})
	var got []string
	var remaining []int
	for range 4 {
		tk, err := l.Admit(context.Background(), Request{Tenant: "acme"})
		got = append(got, reason(err))
		if tk != nil {
			remaining = append(remaining, tk.Requests.Remaining)
		}
	}
	if diff := cmp.Diff([]string{"admitted", "admitted", "admitted", "requests"}, got); diff != "" {
		t.Errorf("admissions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, 1, 0}, remaining); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}
	_, err := l.Admit(context.Background(), Request{Tenant: "acme"})
	var r *Refusal
	if !errors.As(err, &r) || r.RetryAfter <= 0 || r.RetryAfter > 20*time.Second {
		t.Fatalf("refusal %+v, want a Retry-After of at most one emission interval (20s)", err)
	}
	c.t = c.t.Add(r.RetryAfter)
	if _, err := l.Admit(context.Background(), Request{Tenant: "acme"}); err != nil {
		t.Errorf("after Retry-After: %v, want admitted", err)
	}
	if tk, err := l.Admit(context.Background(), Request{Tenant: "other"}); tk != nil || err != nil {
		t.Errorf("a tenant with no policy: %v %v, want nothing", tk, err)
	}
}

// TestAllOrNothing: a refusal by one check takes nothing from the others.
func TestAllOrNothing(t *testing.T) {
	l, _ := newTest(t, Options{Tenants: map[string]Policy{"acme": {Limits: Rates{RequestsPerMinute: 10, TokensPerMinute: 100}}}})
	ctx := context.Background()
	if _, err := l.Admit(ctx, Request{Tenant: "acme", Tokens: 90}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Admit(ctx, Request{Tenant: "acme", Tokens: 50}); reason(err) != "tokens" {
		t.Fatalf("over the tokens: %v", err)
	}
	tk, err := l.Admit(ctx, Request{Tenant: "acme", Tokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if tk.Requests.Remaining != 8 || tk.Tokens.Remaining != 0 {
		t.Errorf("remaining requests %d tokens %d, want 8 and 0: the refused request took nothing", tk.Requests.Remaining, tk.Tokens.Remaining)
	}
}

// TestTokensSettle: the final usage replaces the reservation.
func TestTokensSettle(t *testing.T) {
	l, _ := newTest(t, Options{Tenants: map[string]Policy{"acme": {Limits: Rates{TokensPerMinute: 100}}}})
	ctx := context.Background()
	tk, err := l.Admit(ctx, Request{ID: "r1", Tenant: "acme", Tokens: 80})
	if err != nil {
		t.Fatal(err)
	}
	l.Metered("r1", "acme", "", time.Now(), 0, 20) // used 20 of the 80
	tk.Close()
	if _, err := l.Admit(ctx, Request{Tenant: "acme", Tokens: 80}); err != nil {
		t.Errorf("after settling 80 down to 20, 80 more: %v, want admitted", err)
	}
}

func TestConcurrency(t *testing.T) {
	l, _ := newTest(t, Options{Tenants: map[string]Policy{"acme": {Limits: Rates{ConcurrentStreams: 1}}}})
	ctx := context.Background()
	a, err := l.Admit(ctx, Request{ID: "a", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Admit(ctx, Request{ID: "b", Tenant: "acme"}); reason(err) != "concurrency" {
		t.Fatalf("a second stream: %v", err)
	}
	a.Close()
	a.Close() // twice frees one slot
	b, err := l.Admit(ctx, Request{ID: "b", Tenant: "acme"})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	if _, err := l.Admit(ctx, Request{ID: "c", Tenant: "acme"}); reason(err) != "concurrency" {
		t.Errorf("a double Close freed two slots: %v", err)
	}
	l.Metered("b", "acme", "", time.Now(), 0, 0) // metering frees it too
	if _, err := l.Admit(ctx, Request{ID: "c", Tenant: "acme"}); err != nil {
		t.Errorf("after b was metered: %v", err)
	}
	b.Close()
}

// fakeSource is a store's overrides and spend.
type fakeSource struct {
	ovs        []store.LimitOverride
	spend      []store.SpendSum
	spendReads int
	err        error // the store is down
}

func (f *fakeSource) ListLimitOverrides(context.Context) ([]store.LimitOverride, error) {
	return f.ovs, f.err
}
func (f *fakeSource) UsageSpend(context.Context, time.Time) ([]store.SpendSum, error) {
	f.spendReads++
	return f.spend, f.err
}

// TestNoBudgetNoSpendQuery: with no budget anywhere, reloads read the
// overrides only; one set through the admin API starts the spend reads.
func TestNoBudgetNoSpendQuery(t *testing.T) {
	src := &fakeSource{}
	l, _ := newTest(t, Options{Source: src, Tenants: map[string]Policy{"acme": {Limits: Rates{RequestsPerMinute: 5}}}})
	l.Reload(context.Background())
	if src.spendReads != 0 {
		t.Errorf("%d spend reads with no budget, want 0", src.spendReads)
	}
	src.ovs = []store.LimitOverride{{Scope: store.ScopeTenant, SubjectID: "acme", Settings: []byte(`{"tokens_per_day": 10}`)}}
	l.Reload(context.Background())
	if src.spendReads != 1 {
		t.Errorf("%d spend reads with a budget, want 1", src.spendReads)
	}
}

func TestBudgetsAndOverrides(t *testing.T) {
	src := &fakeSource{
		ovs: []store.LimitOverride{{Scope: store.ScopeKey, SubjectID: "k1", Settings: []byte(`{"usd_per_day": 1}`)}},
		spend: []store.SpendSum{
			{TenantID: "acme", KeyID: "k1", Day: "2026-12-01", Cost: 0.5, Tokens: 500},
			{TenantID: "acme", KeyID: "k2", Day: "2026-11-30", Cost: 5, Tokens: 5000}, // last month
		},
	}
	l, _ := newTest(t, Options{Source: src, Tenants: map[string]Policy{"acme": {Budget: Budget{TokensPerMonth: 1000}}}})
	l.now = func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }
	l.Reload(context.Background())
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		key  string
		want string
	}{
		{"k1 within both", "k1", "admitted"},
		{"k2 has no override", "k2", "admitted"},
	} {
		if _, err := l.Admit(ctx, Request{Tenant: "acme", Key: tc.key}); reason(err) != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, reason(err), tc.want)
		}
	}
	// 0.5 USD more on k1: its day's 1 USD is spent; the tenant's 1000
	// tokens are not yet.
	l.Metered("x", "acme", "k1", l.now(), 0.5, 100)
	if _, err := l.Admit(ctx, Request{Tenant: "acme", Key: "k1"}); reason(err) != "budget" {
		t.Errorf("k1 past its day: %s, want budget", reason(err))
	}
	if _, err := l.Admit(ctx, Request{Tenant: "acme", Key: "k2"}); err != nil {
		t.Errorf("k2: %v, want admitted", err)
	}
	l.Metered("y", "acme", "k2", l.now(), 0, 250) // 850 of 1000: past the soft 0.8
	if _, err := l.Admit(ctx, Request{Tenant: "acme", Key: "k2"}); err != nil {
		t.Errorf("the tenant past its soft threshold: %v, want admitted", err)
	}
	if s := l.Stats(); s.SoftCrossed != 1 {
		t.Errorf("soft thresholds crossed: %d, want 1", s.SoftCrossed)
	}
	l.Metered("z", "acme", "k2", l.now(), 0, 150)
	if _, err := l.Admit(ctx, Request{Tenant: "acme", Key: "k2"}); reason(err) != "budget" {
		t.Errorf("the tenant past its month's tokens: %s, want budget", reason(err))
	}
	if s := l.Stats(); s.Refused["budget"] != 2 || s.SoftCrossed != 1 {
		t.Errorf("stats %+v, want 2 budget refusals and the soft threshold logged once", s)
	}
}

// TestHugeLimitNoPanic: a limit above the period in nanoseconds (which
// config and the admin API refuse, but a stored override could hold)
// admits and settles without dividing by zero.
func TestHugeLimitNoPanic(t *testing.T) {
	l, _ := newTest(t, Options{Tenants: map[string]Policy{"acme": {Limits: Rates{RequestsPerMinute: 1 << 62, TokensPerMinute: 1 << 62}}}})
	for range 3 {
		tk, err := l.Admit(context.Background(), Request{Tenant: "acme", Tokens: 100})
		if err != nil || tk == nil {
			t.Fatalf("admit: %v %v", tk, err)
		}
		tk.settle(10)
		tk.Close()
	}
}

// TestFailedReloadsKeepSpend: while the store is down, reloads fail and
// the replica's own spend since the last good read stays counted: budgets
// are still enforced after any number of failed reloads.
func TestFailedReloadsKeepSpend(t *testing.T) {
	src := &fakeSource{}
	l, _ := newTest(t, Options{Source: src, Tenants: map[string]Policy{"acme": {Budget: Budget{TokensPerDay: 1000}}}})
	ctx := context.Background()
	l.Reload(ctx)
	l.Metered("a", "acme", "", l.now(), 0, 900)
	src.err = errors.New("store down")
	for range 3 {
		l.Reload(ctx)
	}
	l.Metered("b", "acme", "", l.now(), 0, 200)
	if _, err := l.Admit(ctx, Request{Tenant: "acme"}); reason(err) != "budget" {
		t.Fatalf("1100 of 1000 tokens spent, 3 failed reloads: %s, want budget", reason(err))
	}
	if s := l.Stats(); s.ReloadErrors != 3 {
		t.Errorf("reload errors: %d, want 3", s.ReloadErrors)
	}
	// The store is back and has the rows: still refused, from its sums.
	src.err = nil
	src.spend = []store.SpendSum{{TenantID: "acme", Day: "2026-12-01", Tokens: 1100}}
	l.Reload(ctx)
	l.Reload(ctx)
	if _, err := l.Admit(ctx, Request{Tenant: "acme"}); reason(err) != "budget" {
		t.Errorf("after the store came back: %s, want budget", reason(err))
	}
}

// grantingShared admits every check until down, then fails every call, as
// a Redis that stops answering does: it is the other replicas' counts that
// it would have refused on, which this replica cannot see.
type grantingShared struct{ down bool }

func (g *grantingShared) Admit(ctx context.Context, checks []Check, lease string) ([]Result, error) {
	if g.down {
		return nil, errors.New("shared counts unreachable")
	}
	res := make([]Result, len(checks))
	for i := range res {
		res[i] = Result{Allowed: true}
	}
	return res, nil
}
func (g *grantingShared) Adjust(context.Context, Check, int) error         { return nil }
func (g *grantingShared) Release(context.Context, []string, string) error  { return nil }
func (g *grantingShared) Renew(context.Context, map[string][]string) error { return nil }

// TestSwitchToLocalCountsWhatWasGranted (issue 34): when the shared counts
// fail, the replica counts alone, starting from what the shared counts
// granted it in the current window: it never admits more than one limit
// by itself (requests, tokens, open streams), where before it took a
// fresh full burst.
func TestSwitchToLocalCountsWhatWasGranted(t *testing.T) {
	sh := &grantingShared{}
	l, _ := newTest(t, Options{Shared: sh, Tenants: map[string]Policy{"acme": {Limits: Rates{RequestsPerMinute: 60, TokensPerMinute: 3000, ConcurrentStreams: 3}}}})
	ctx := context.Background()
	var open []*Ticket
	admit := func() bool {
		tk, err := l.Admit(ctx, Request{Tenant: "acme", Tokens: 100})
		if err == nil && len(open) < 3 {
			open = append(open, tk) // the first three stay open
		} else if err == nil {
			tk.settle(100)
			tk.Close()
		}
		return err == nil
	}
	admitted := 0
	for range 20 {
		if admit() {
			admitted++
		}
	}
	if admitted != 20 {
		t.Fatalf("the shared counts admitted %d of 20", admitted)
	}
	sh.down = true
	for range 100 {
		if admit() {
			admitted++
		}
	}
	// 3 open streams were granted: no more while they are open.
	if admitted != 20 {
		t.Errorf("%d admitted after the switch with 3 streams open (limit 3), want none", admitted-20)
	}
	for _, tk := range open[:2] {
		tk.settle(100)
		tk.Close()
	}
	open = open[:1]
	for range 100 {
		if admit() {
			admitted++
		}
	}
	// 30 of the 3000 tokens a minute (100 each) were used by the 20 plus
	// the two closed; 60 requests a minute: at most 60 in all.
	if admitted > 30 {
		t.Errorf("%d admitted in the minute, shared and local together; the replica's limit is 30 requests of 100 tokens (3000 tokens)", admitted)
	}
}

// TestBudgetStaysSpent (issue 34): a budget found spent stays refused for
// the rest of its period, even when a later read of the sums shows less
// (rows on their way to the store, or the replica's own spend rotated
// out), until the cap is raised.
func TestBudgetStaysSpent(t *testing.T) {
	src := &fakeSource{spend: []store.SpendSum{{TenantID: "acme", Day: "2026-12-01", Tokens: 700}}}
	l, _ := newTest(t, Options{Source: src, Tenants: map[string]Policy{"acme": {Budget: Budget{TokensPerDay: 600}}}})
	ctx := context.Background()
	l.Reload(ctx)
	if _, err := l.Admit(ctx, Request{Tenant: "acme"}); reason(err) != "budget" {
		t.Fatalf("700 of 600 tokens: %s, want budget", reason(err))
	}
	src.spend = []store.SpendSum{{TenantID: "acme", Day: "2026-12-01", Tokens: 500}}
	for range 3 {
		l.Reload(ctx)
		if _, err := l.Admit(ctx, Request{Tenant: "acme"}); reason(err) != "budget" {
			t.Fatalf("a later read shows less: %s, want budget still", reason(err))
		}
	}
	// A raised cap is a new decision.
	src.ovs = []store.LimitOverride{{Scope: store.ScopeTenant, SubjectID: "acme", Settings: []byte(`{"tokens_per_day": 1000}`)}}
	l.Reload(ctx)
	if _, err := l.Admit(ctx, Request{Tenant: "acme"}); err != nil {
		t.Errorf("after the cap was raised to 1000: %v, want admitted", err)
	}
}
