package limits

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// Shared is a backend every replica counts in (Redis). Admit takes every
// check or none, in one round trip; a concurrency check takes a slot
// leased to lease, which lapses unless renewed (Renew) or frees it
// (Release).
type Shared interface {
	Admit(ctx context.Context, checks []Check, lease string) ([]Result, error)
	// Adjust moves a rate's count by delta cost units (settling a
	// reservation).
	Adjust(ctx context.Context, c Check, delta int) error
	// Release frees lease's slots under keys.
	//
	// Adjust and Release may take effect after they return, provided it
	// is before any later Admit of the same Shared; a Shared that defers
	// them counts their late failures in a LateErrors() uint64 method.
	Release(ctx context.Context, keys []string, lease string) error
	// Renew extends leases (key → lease IDs) by a lease's length.
	Renew(ctx context.Context, leases map[string][]string) error
}

// Source is where limits set through the admin API and past spend are
// read from: the store.
type Source interface {
	ListLimitOverrides(ctx context.Context) ([]store.LimitOverride, error)
	UsageSpend(ctx context.Context, since time.Time) ([]store.SpendSum, error)
}

// Options configures a Limiter.
type Options struct {
	// Tenants are the config's policies, by tenant ID.
	Tenants map[string]Policy
	// Source gives the admin API's overrides and the spend so far (nil:
	// the config's policies, and spend counted since start).
	Source Source
	// Shared counts for every replica (nil: in process).
	Shared Shared
	// Timeout bounds a Shared call at admission (default 50ms); Cooldown
	// is how long Shared is skipped after it failed (default 5s).
	Timeout, Cooldown time.Duration
	// Refresh is how often Source is read (default 1s).
	Refresh time.Duration
	// Lease is how long a Shared concurrency slot lives unless renewed
	// (default 30s).
	Lease time.Duration
	// Period is the rates' window (default 1m).
	Period time.Duration
	Log    *slog.Logger
}

// Limiter decides admission. Its methods are safe for concurrent use.
type Limiter struct {
	opt   Options
	local *local
	now   func() time.Time

	snap    atomic.Pointer[snapshot]
	tickets sync.Map // request ID → *Ticket, until metered or closed

	mu         sync.Mutex
	skipUntil  time.Time           // Shared failed: use local until then
	leases     map[string][]string // held Shared slots: lease → keys
	spend      map[subject]*spent  // this replica's spend since the last reload
	spendPrev  map[subject]*spent  // ... and in the reload before
	softLogged map[string]bool     // subject+period whose soft threshold was logged
	spentCaps  map[string]bool     // subject+unit+period+cap found spent (see budget)

	stats   statCounters
	stop    chan struct{}
	stopped sync.WaitGroup
}

// subject is a tenant or a key.
type subject struct{ kind, id string }

func (s subject) String() string { return s.kind + ":" + s.id }

// spent is spend in the current UTC day and month.
type spent struct {
	day, month             string
	dayUSD, monthUSD       float64
	dayTokens, monthTokens int64
}

func (s *spent) add(day, month string, usd float64, tokens int64) {
	if s.month != month {
		s.month, s.monthUSD, s.monthTokens = month, 0, 0
	}
	if s.day != day {
		s.day, s.dayUSD, s.dayTokens = day, 0, 0
	}
	s.dayUSD += usd
	s.monthUSD += usd
	s.dayTokens += tokens
	s.monthTokens += tokens
}

func (s *spent) sum(o *spent) {
	if o == nil {
		return
	}
	if o.day == s.day {
		s.dayUSD += o.dayUSD
		s.dayTokens += o.dayTokens
	}
	if o.month == s.month {
		s.monthUSD += o.monthUSD
		s.monthTokens += o.monthTokens
	}
}

// snapshot is what the last reload found: the policies in force and the
// spend in the store.
type snapshot struct {
	tenants   map[string]Policy
	keys      map[string]Policy
	overrides map[subject]Override
	spend     map[subject]*spent
	loaded    time.Time
}

// New returns a Limiter and starts its reloads; Close stops them.
func New(ctx context.Context, opt Options) *Limiter {
	if opt.Timeout <= 0 {
		opt.Timeout = 50 * time.Millisecond
	}
	if opt.Cooldown <= 0 {
		opt.Cooldown = 5 * time.Second
	}
	if opt.Refresh <= 0 {
		opt.Refresh = time.Second
	}
	if opt.Lease <= 0 {
		opt.Lease = 30 * time.Second
	}
	if opt.Period <= 0 {
		opt.Period = time.Minute
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	l := &Limiter{opt: opt, now: time.Now, leases: map[string][]string{}, spend: map[subject]*spent{},
		softLogged: map[string]bool{}, spentCaps: map[string]bool{}, stop: make(chan struct{})}
	l.stats.refused = newRefusedCounters()
	l.local = newLocal(l.now)
	l.install(nil, nil)
	if opt.Source != nil {
		l.reload(ctx)
	}
	l.stopped.Add(1)
	go l.loop()
	return l
}

// Close stops the reloads and the lease renewals.
func (l *Limiter) Close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.stopped.Wait()
}

func (l *Limiter) loop() {
	defer l.stopped.Done()
	reload := time.NewTicker(l.opt.Refresh)
	defer reload.Stop()
	renew := time.NewTicker(l.opt.Lease / 3)
	defer renew.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-reload.C:
			if l.opt.Source != nil {
				l.reload(context.Background())
			}
		case <-renew.C:
			l.renew()
		}
	}
}

// Reload reads the overrides and the spend from the source now (the
// admin API calls it after a change, so that this replica applies it at
// once; the others do within a refresh).
func (l *Limiter) Reload(ctx context.Context) {
	if l.opt.Source != nil {
		l.reload(ctx)
	}
}

func (l *Limiter) reload(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := l.now().UTC()
	ovs, err := l.opt.Source.ListLimitOverrides(ctx)
	if err != nil {
		l.stats.reloadErrors.Add(1)
		l.opt.Log.Warn("limits: reading the overrides failed; the last ones stay in force", "err", err)
		return
	}
	if !l.anyBudget(ovs) {
		// Nothing is capped: the month's sums are not read every second.
		l.install(ovs, map[subject]*spent{})
		l.rotateSpend()
		return
	}
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	sums, err := l.opt.Source.UsageSpend(ctx, month)
	if err != nil {
		l.stats.reloadErrors.Add(1)
		l.opt.Log.Warn("limits: reading the spend failed; the last sums stay in force", "err", err)
		return
	}
	l.install(ovs, spendOf(sums, now))
	l.rotateSpend()
}

// rotateSpend runs after a reload installed what it read: the spend this
// replica recorded before the read is in the store's sums now, but what it
// recorded during the read may not be, so it is kept one reload more
// (counted twice until then, which errs on refusing early, never on
// spending over). A failed read rotates nothing: the replica's own spend
// since the last good read stays counted while the store is down.
func (l *Limiter) rotateSpend() {
	l.mu.Lock()
	l.spendPrev, l.spend = l.spend, map[subject]*spent{}
	l.mu.Unlock()
}

// anyBudget reports whether the config or ovs cap any spend.
func (l *Limiter) anyBudget(ovs []store.LimitOverride) bool {
	for _, p := range l.opt.Tenants {
		if p.budgeted() {
			return true
		}
	}
	for _, o := range ovs {
		if ov, err := ParseOverride(o.Settings); err == nil && ov.Apply(Policy{}).budgeted() {
			return true
		}
	}
	return false
}

// spendOf sums rows by tenant and key for the current UTC day and month.
func spendOf(sums []store.SpendSum, now time.Time) map[subject]*spent {
	day, month := now.Format("2006-01-02"), now.Format("2006-01")
	out := map[subject]*spent{}
	add := func(s subject, r store.SpendSum) {
		sp := out[s]
		if sp == nil {
			sp = &spent{day: day, month: month}
			out[s] = sp
		}
		if len(r.Day) < 7 || r.Day[:7] != month {
			return
		}
		sp.monthUSD += r.Cost
		sp.monthTokens += r.Tokens
		if r.Day == day {
			sp.dayUSD += r.Cost
			sp.dayTokens += r.Tokens
		}
	}
	for _, r := range sums {
		add(subject{"tenant", r.TenantID}, r)
		if r.KeyID != "" {
			add(subject{"key", r.KeyID}, r)
		}
	}
	return out
}

// install makes the config's policies with ovs applied, and spend, the
// ones in force.
func (l *Limiter) install(ovs []store.LimitOverride, spend map[subject]*spent) {
	s := policiesOf(l.opt.Tenants, ovs, l.opt.Log)
	s.spend, s.loaded = spend, l.now()
	if s.spend == nil {
		s.spend = map[subject]*spent{}
		if old := l.snap.Load(); old != nil {
			s.spend = old.spend
		}
	}
	l.snap.Store(s)
}

// policiesOf is what applies to each tenant and key: the config's
// policies with the stored overrides applied (one that does not parse is
// logged and ignored).
func policiesOf(config map[string]Policy, ovs []store.LimitOverride, log *slog.Logger) *snapshot {
	s := &snapshot{tenants: map[string]Policy{}, keys: map[string]Policy{}, overrides: map[subject]Override{}}
	for id, p := range config {
		if !p.empty() {
			s.tenants[id] = p
		}
	}
	for _, o := range ovs {
		ov, err := ParseOverride(o.Settings)
		if err != nil {
			log.Warn("limits: a stored override does not parse; ignored", "scope", o.Scope, "id", o.SubjectID, "err", err)
			continue
		}
		switch o.Scope {
		case store.ScopeTenant:
			s.overrides[subject{"tenant", o.SubjectID}] = ov
			if p := ov.Apply(config[o.SubjectID]); !p.empty() {
				s.tenants[o.SubjectID] = p
			} else {
				delete(s.tenants, o.SubjectID)
			}
		case store.ScopeKey:
			s.overrides[subject{"key", o.SubjectID}] = ov
			if p := ov.Apply(Policy{}); !p.empty() {
				s.keys[o.SubjectID] = p
			}
		}
	}
	return s
}

// Request is what admission knows of a request.
type Request struct {
	ID     string
	Tenant string
	Key    string // "" for local mode
	// Tokens is the estimate reserved against tokens per minute: the
	// prompt's plus max_tokens.
	Tokens int
}

// Window is one rate's state after admission, for OpenAI's
// x-ratelimit-* headers.
type Window struct {
	Limit, Remaining int
	Reset            time.Duration // until the count is full again
}

// Refusal is a request admission turned away.
type Refusal struct {
	// Reason is requests, tokens, concurrency or budget.
	Reason  string
	Subject string // tenant or key
	// RetryAfter is when the same request may pass (0 for budget: not
	// before the period ends, which the client cannot act on).
	RetryAfter time.Duration
	Message    string
	Requests   *Window
	Tokens     *Window
}

func (r *Refusal) Error() string { return r.Message }

// Ticket is an admitted request's hold on its counts: its concurrency
// slot until Close or its metering, and its token reservation until the
// final usage settles it. A nil Ticket is a request nothing limits.
type Ticket struct {
	l        *Limiter
	id       string
	tenant   string
	key      string
	reserved int
	tokens   []Check // the token rates it reserved against
	slots    []string
	shared   bool   // counted in Shared (else local)
	lease    string // its Shared slots' lease
	waited   time.Duration
	once     sync.Once
	settled  atomic.Bool
	Requests *Window // the tightest requests-per-minute window, if any
	Tokens   *Window // the tightest tokens-per-minute window, if any
}

// Took is how long admission took.
func (t *Ticket) Took() time.Duration {
	if t == nil {
		return 0
	}
	return t.waited
}

// Admit decides whether q may start now. It returns a nil Ticket and nil
// error when nothing limits q's tenant or key, a *Refusal when a limit or
// budget refuses it, and otherwise a Ticket to Close when the request is
// over (metering it also releases it).
func (l *Limiter) Admit(ctx context.Context, q Request) (*Ticket, error) {
	s := l.snap.Load()
	tp, tok := s.tenants[q.Tenant]
	var kp Policy
	kok := false
	if q.Key != "" {
		kp, kok = s.keys[q.Key]
	}
	if !tok && !kok {
		return nil, nil
	}
	start := l.now()
	subjects := make([]subject, 0, 2)
	policies := make([]Policy, 0, 2)
	if tok {
		subjects, policies = append(subjects, subject{"tenant", q.Tenant}), append(policies, tp)
	}
	if kok {
		subjects, policies = append(subjects, subject{"key", q.Key}), append(policies, kp)
	}
	for i, p := range policies {
		if err := l.budget(s, subjects[i], p.Budget, start); err != nil {
			l.stats.refused[reasonBudget].Add(1)
			return nil, err
		}
	}
	var checks []Check
	var kinds []string
	for i, p := range policies {
		sub := subjects[i].String()
		if p.Limits.RequestsPerMinute > 0 {
			checks = append(checks, Check{Key: "rpm:" + sub, Tag: q.Tenant, Limit: p.Limits.RequestsPerMinute, Period: l.opt.Period, Cost: 1})
			kinds = append(kinds, reasonRequests)
		}
		if p.Limits.TokensPerMinute > 0 {
			cost := min(max(q.Tokens, 1), p.Limits.TokensPerMinute)
			checks = append(checks, Check{Key: "tpm:" + sub, Tag: q.Tenant, Limit: p.Limits.TokensPerMinute, Period: l.opt.Period, Cost: cost})
			kinds = append(kinds, reasonTokens)
		}
		if p.Limits.ConcurrentStreams > 0 {
			checks = append(checks, Check{Key: "open:" + sub, Tag: q.Tenant, Limit: p.Limits.ConcurrentStreams})
			kinds = append(kinds, reasonConcurrency)
		}
	}
	t := &Ticket{l: l, id: q.ID, tenant: q.Tenant, key: q.Key}
	if len(checks) == 0 {
		t.waited = l.now().Sub(start)
		return t, nil // a budget alone
	}
	res, shared := l.admit(ctx, checks, t)
	for i, c := range checks {
		w := &Window{Limit: c.Limit, Remaining: res[i].Remaining, Reset: res[i].ResetAfter}
		switch kinds[i] {
		case reasonRequests:
			t.Requests = tighter(t.Requests, w)
		case reasonTokens:
			t.Tokens = tighter(t.Tokens, w)
		}
	}
	for i, r := range res {
		if r.Allowed {
			continue
		}
		l.stats.refused[kinds[i]].Add(1)
		sub := subjects[0]
		if len(subjects) == 2 && checks[i].Key[len(checks[i].Key)-len(subjects[1].String()):] == subjects[1].String() {
			sub = subjects[1]
		}
		return nil, &Refusal{Reason: kinds[i], Subject: sub.kind, RetryAfter: max(r.RetryAfter, time.Millisecond),
			Message: refusalMessage(kinds[i], sub.kind, checks[i].Limit, l.opt.Period), Requests: t.Requests, Tokens: t.Tokens}
	}
	t.shared = shared
	for i, c := range checks {
		switch kinds[i] {
		case reasonTokens:
			t.tokens = append(t.tokens, c)
			t.reserved = c.Cost
		case reasonConcurrency:
			t.slots = append(t.slots, c.Key)
		}
	}
	if len(t.tokens) > 0 || len(t.slots) > 0 {
		if q.ID != "" {
			l.tickets.Store(q.ID, t)
		}
	}
	t.waited = l.now().Sub(start)
	return t, nil
}

const (
	reasonRequests    = "requests"
	reasonTokens      = "tokens"
	reasonConcurrency = "concurrency"
	reasonBudget      = "budget"
)

func refusalMessage(reason, who string, limit int, period time.Duration) string {
	per := "minute"
	if period != time.Minute {
		per = period.String()
	}
	switch reason {
	case reasonRequests:
		return fmt.Sprintf("Rate limit reached for this %s: %d requests per %s. Retry after the time in Retry-After.", who, limit, per)
	case reasonTokens:
		return fmt.Sprintf("Rate limit reached for this %s: %d tokens per %s. Retry after the time in Retry-After, or ask for fewer max_tokens.", who, limit, per)
	}
	return fmt.Sprintf("Too many open requests for this %s: at most %d at once. Retry when one ends.", who, limit)
}

// tighter returns the window with fewer remaining.
func tighter(a, b *Window) *Window {
	if a == nil || b.Remaining < a.Remaining {
		return b
	}
	return a
}

// admit runs checks in Shared or, while it fails, locally.
func (l *Limiter) admit(ctx context.Context, checks []Check, t *Ticket) ([]Result, bool) {
	if l.opt.Shared != nil {
		now := l.now()
		l.mu.Lock()
		skip := now.Before(l.skipUntil)
		l.mu.Unlock()
		if !skip {
			lease := ""
			for _, c := range checks {
				if c.concurrency() {
					lease = newLease()
					break
				}
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opt.Timeout)
			res, err := l.opt.Shared.Admit(sctx, checks, lease)
			cancel()
			if err == nil {
				if allowed(res) {
					l.local.note(checks)
				}
				if lease != "" && allowed(res) {
					t.lease = lease
					l.mu.Lock()
					for _, c := range checks {
						if c.concurrency() {
							l.leases[lease] = append(l.leases[lease], c.Key)
						}
					}
					l.mu.Unlock()
				}
				return res, true
			}
			l.sharedFailed(err)
		} else {
			l.stats.degraded.Add(1)
		}
	}
	return l.local.admit(checks), false
}

func allowed(res []Result) bool {
	for _, r := range res {
		if !r.Allowed {
			return false
		}
	}
	return true
}

// sharedFailed switches to local counts for the cooldown, logging the
// switch once.
func (l *Limiter) sharedFailed(err error) {
	l.stats.sharedErrors.Add(1)
	l.stats.degraded.Add(1)
	now := l.now()
	l.mu.Lock()
	log := !now.Before(l.skipUntil)
	l.skipUntil = now.Add(l.opt.Cooldown)
	l.mu.Unlock()
	if log {
		l.opt.Log.Warn("limits: the shared counts failed; this replica counts alone for the cooldown (limits apply per replica)",
			"err", err, "cooldown", l.opt.Cooldown.String())
	}
}

var leaseSeq atomic.Uint64

// newLease returns a lease ID unique across replicas.
func newLease() string {
	return strconv.FormatInt(time.Now().UnixNano(), 36) + "." + strconv.FormatUint(leaseSeq.Add(1), 36) + "." + strconv.FormatUint(uint64(randUint32()), 36)
}

// Close releases t's concurrency slots (if metering has not already) and
// forgets it; a later metering still counts the spend.
func (t *Ticket) Close() {
	if t == nil {
		return
	}
	t.release()
	t.l.tickets.Delete(t.id)
}

func (t *Ticket) release() {
	t.once.Do(func() {
		if len(t.slots) == 0 {
			return
		}
		l := t.l
		// A shared ticket's slots are counted locally too (see note).
		for _, k := range t.slots {
			l.local.release(k)
		}
		if !t.shared {
			return
		}
		l.mu.Lock()
		delete(l.leases, t.lease)
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), l.opt.Timeout*4)
		defer cancel()
		if err := l.opt.Shared.Release(ctx, t.slots, t.lease); err != nil {
			l.stats.sharedErrors.Add(1) // the lease expires on its own
		}
	})
}

// settle moves t's token reservation to the tokens the request used.
func (t *Ticket) settle(tokens int) {
	if t == nil || !t.settled.CompareAndSwap(false, true) {
		return
	}
	delta := tokens - t.reserved
	if delta == 0 {
		return
	}
	l := t.l
	for _, c := range t.tokens {
		// Local counts shadow the shared ones (see note).
		l.local.adjust(c, delta)
		if t.shared {
			ctx, cancel := context.WithTimeout(context.Background(), l.opt.Timeout*4)
			if err := l.opt.Shared.Adjust(ctx, c, delta); err != nil {
				l.stats.sharedErrors.Add(1)
			}
			cancel()
		}
	}
}

// Metered takes a request's final usage: it settles its token
// reservation, frees its slots and adds its spend. Spend is USD from the
// price table and tokens in and out, the attempts that did not give the
// answer included.
func (l *Limiter) Metered(requestID, tenant, key string, at time.Time, usd float64, tokens int64) {
	if v, ok := l.tickets.LoadAndDelete(requestID); ok {
		t := v.(*Ticket)
		t.settle(int(tokens))
		t.release()
	}
	if usd == 0 && tokens == 0 {
		return
	}
	at = at.UTC()
	day, month := at.Format("2006-01-02"), at.Format("2006-01")
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range []subject{{"tenant", tenant}, {"key", key}} {
		if s.id == "" {
			continue
		}
		sp := l.spend[s]
		if sp == nil {
			sp = &spent{}
			l.spend[s] = sp
		}
		sp.add(day, month, usd, tokens)
	}
}

// spendNow is s's spend: the store's at the last reload plus this
// replica's since.
func (l *Limiter) spendNow(snap *snapshot, s subject, now time.Time) spent {
	now = now.UTC()
	cur := spent{day: now.Format("2006-01-02"), month: now.Format("2006-01")}
	cur.sum(snap.spend[s])
	l.mu.Lock()
	cur.sum(l.spend[s])
	cur.sum(l.spendPrev[s])
	l.mu.Unlock()
	return cur
}

// budget refuses a subject whose budget is spent, and notes one past its
// soft threshold.
func (l *Limiter) budget(snap *snapshot, s subject, b Budget, now time.Time) error {
	if !b.capped() {
		return nil
	}
	sp := l.spendNow(snap, s, now)
	type cap struct {
		period string
		used   float64
		limit  float64
		unit   string
	}
	caps := []cap{
		{"day", sp.dayUSD, b.USDPerDay, "USD"},
		{"month", sp.monthUSD, b.USDPerMonth, "USD"},
		{"day", float64(sp.dayTokens), float64(b.TokensPerDay), "tokens"},
		{"month", float64(sp.monthTokens), float64(b.TokensPerMonth), "tokens"},
	}
	for _, c := range caps {
		if c.limit <= 0 {
			continue
		}
		period := sp.day
		if c.period == "month" {
			period = sp.month
		}
		// Spend never falls within a period: a cap found spent stays spent
		// until the period ends or the cap is raised, whatever a later read
		// of the sums shows (rows still on their way to the store).
		spentKey := s.String() + "|" + c.unit + "|" + period + "|" + trim(c.limit)
		l.mu.Lock()
		if c.used >= c.limit && !l.spentCaps[spentKey] {
			if len(l.spentCaps) > 100000 {
				clear(l.spentCaps)
			}
			l.spentCaps[spentKey] = true
		}
		spent := l.spentCaps[spentKey]
		l.mu.Unlock()
		if spent {
			return &Refusal{Reason: reasonBudget, Subject: s.kind,
				Message: fmt.Sprintf("This %s's budget of %s %s per %s is spent. It resets at the start of the next UTC %s; an operator can raise it.", s.kind, trim(c.limit), c.unit, c.period, c.period)}
		}
		if c.used >= c.limit*b.soft() {
			k := s.String() + "|" + c.unit + "|" + period
			l.mu.Lock()
			first := !l.softLogged[k]
			if first {
				if len(l.softLogged) > 100000 {
					clear(l.softLogged)
				}
				l.softLogged[k] = true
			}
			l.mu.Unlock()
			if first {
				l.stats.soft.Add(1)
				l.opt.Log.Warn("limits: budget past its soft threshold", "scope", s.kind, "id", s.id, "period", period,
					"unit", c.unit, "spent", c.used, "cap", c.limit, "soft_threshold", b.soft())
			}
		}
	}
	return nil
}

func trim(f float64) string {
	if f == math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// renew extends the Shared leases this replica holds.
func (l *Limiter) renew() {
	if l.opt.Shared == nil {
		return
	}
	l.mu.Lock()
	byKey := map[string][]string{}
	for lease, keys := range l.leases {
		for _, k := range keys {
			byKey[k] = append(byKey[k], lease)
		}
	}
	l.mu.Unlock()
	if len(byKey) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opt.Lease/3)
	defer cancel()
	if err := l.opt.Shared.Renew(ctx, byKey); err != nil {
		l.stats.sharedErrors.Add(1)
		l.opt.Log.Warn("limits: renewing the open streams' leases failed", "err", err)
	}
}

// Policies says what applies to a tenant (kind "tenant") or a key
// ("key"): the config's policy, the admin API's override, and the two
// combined, as of the last reload.
func (l *Limiter) Policies(kind, id string) (config Policy, override Override, effective Policy) {
	return l.snap.Load().policies(l.opt.Tenants, kind, id)
}

// Tenants lists the tenants with a policy in the config.
func (l *Limiter) Tenants() []string { return slices.Collect(maps.Keys(l.opt.Tenants)) }

func (s *snapshot) policies(config map[string]Policy, kind, id string) (c Policy, override Override, effective Policy) {
	if kind == "tenant" {
		c = config[id]
		effective = s.tenants[id]
	} else {
		effective = s.keys[id]
	}
	return c, s.overrides[subject{kind, id}], effective
}

// Stored is Policies as one read of the store gives them: overrides
// alone, no config (firstword tenants on the store).
type Stored struct{ s *snapshot }

// NewStored returns the policies the overrides ovs make, without a config.
func NewStored(ovs []store.LimitOverride) Stored {
	return Stored{policiesOf(nil, ovs, slog.New(slog.DiscardHandler))}
}

// Policies implements Policies.
func (p Stored) Policies(kind, id string) (config Policy, override Override, effective Policy) {
	return p.s.policies(nil, kind, id)
}

// Tenants implements Policies: no tenant has a policy from a config.
func (p Stored) Tenants() []string { return nil }
