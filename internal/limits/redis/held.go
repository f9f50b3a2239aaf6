package redis

import (
	"time"

	"github.com/firstword/firstword/internal/limits"
)

// What a replica holds of the shared counts. A rate's grant is cost units
// Redis counted as used (the key's GCRA time moved on by them) that this
// replica hands out to its requests; it takes as many as its requests
// used in the last horizon, and takes more, in the background, when half
// are gone, so that a busy key's admissions wait for nothing. An open
// stream's slot is a member of the key's sorted set; when its stream ends
// it stays with this replica for the next one. What is not used within
// keepFor goes back. Redis so never grants more than a limit across
// replicas; what a replica holds unused is, until then, not the others'.
// Near a limit (the grant is at most a quarter of what Redis says is
// left) nothing is taken ahead, and admissions ask Redis each time.

const (
	// horizon is how far ahead a rate's grant reaches.
	horizon = 100 * time.Millisecond
	// keepFor is how long units or slots unused stay with a replica.
	keepFor = 250 * time.Millisecond
)

type held struct {
	id       string
	seq      uint64
	grants   map[string]*grant
	pools    map[string][]slot     // free slots by key, the last freed last
	inUse    map[string][]heldSlot // by the limiter's lease
	openHere map[string]int        // slots in use by key
}

func newHeld() held {
	return held{id: newReplicaID(), grants: map[string]*grant{}, pools: map[string][]slot{},
		inUse: map[string][]heldSlot{}, openHere: map[string]int{}}
}

type grant struct {
	check     limits.Check // the key's limit and period
	units     int          // held, not yet used
	remaining int          // Redis's count left at its last answer (held units are not in it)
	resetAt   time.Time    // when the count is full again, likewise
	granted   time.Time    // the last grant: units held longer go back
	// Units used in the current horizon (since window) and the last.
	window             time.Time
	inWindow, lastUsed int
	refilling          bool
	quietUntil         time.Time // a refill was refused: none before
}

// note counts cost units asked of the key now, taken here or not.
func (g *grant) note(now time.Time, cost int) {
	switch d := now.Sub(g.window); {
	case d >= 2*horizon:
		g.lastUsed, g.inWindow, g.window = 0, 0, now
	case d >= horizon:
		g.lastUsed, g.inWindow, g.window = g.inWindow, 0, now
	}
	g.inWindow += cost
}

// target is how many units to hold: what a horizon of traffic uses, at
// most a quarter of what is left.
func (g *grant) target() int { return min(max(g.inWindow, g.lastUsed), g.remaining/4) }

type slot struct {
	member  string
	expires time.Time // when Redis lets it lapse unless renewed
	idle    time.Time // since when it is free
}

type heldSlot struct {
	key string
	slot
}

// taken is what an admission took of what the replica holds, and which
// of its checks need Redis.
type taken struct {
	remote []int
	rates  []limits.Check
	slots  []heldSlot
}

// takeLocal admits what the replica holds covers, filling res for those
// checks. Call with mu held.
func (r *Counts) takeLocal(now time.Time, checks []limits.Check, lease string, res []limits.Result) taken {
	var t taken
	for i, c := range checks {
		if c.Period == 0 {
			if r.openHere[c.Key] >= c.Limit {
				t.remote = append(t.remote, i)
				continue
			}
			if s, ok := r.pop(now, c.Key); ok {
				t.slots = append(t.slots, heldSlot{c.Key, s})
				res[i] = limits.Result{Allowed: true, Remaining: max(c.Limit-r.openHere[c.Key]-1, 0)}
				continue
			}
			t.remote = append(t.remote, i)
			continue
		}
		g := r.grants[c.Key]
		if g == nil {
			g = &grant{window: now}
			r.grants[c.Key] = g
		}
		g.check = c
		g.note(now, c.Cost)
		if g.units < c.Cost {
			t.remote = append(t.remote, i)
			continue
		}
		// Redis's remaining and reset already count the units held.
		g.units -= c.Cost
		t.rates = append(t.rates, c)
		res[i] = limits.Result{Allowed: true, Remaining: g.remaining, ResetAfter: max(g.resetAt.Sub(now), 0)}
	}
	if len(t.remote) == 0 {
		r.hold(lease, t.slots)
	}
	return t
}

// pop takes a free slot of key whose lease has at least half its length
// left; older ones go back to Redis. Call with mu held.
func (r *Counts) pop(now time.Time, key string) (slot, bool) {
	p := r.pools[key]
	for len(p) > 0 {
		s := p[len(p)-1]
		p = p[:len(p)-1]
		if s.expires.Sub(now) >= r.lease/2 {
			r.pools[key] = p
			return s, true
		}
		r.background(op{kind: 'r', checks: []limits.Check{{Key: key}}, lease: s.member})
	}
	delete(r.pools, key)
	return slot{}, false
}

// hold records slots as used by lease's request. Call with mu held.
func (r *Counts) hold(lease string, slots []heldSlot) {
	if len(slots) == 0 {
		return
	}
	r.inUse[lease] = append(r.inUse[lease], slots...)
	for _, s := range slots {
		r.openHere[s.key]++
	}
}

// undo gives back what an admission Redis refused, or that failed, took
// of what the replica holds.
func (r *Counts) undo(t taken) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.undoLocked(t)
}

func (r *Counts) undoLocked(t taken) {
	for _, c := range t.rates {
		if g := r.grants[c.Key]; g != nil {
			g.units += c.Cost
		}
	}
	for _, s := range t.slots {
		r.pools[s.key] = append(r.pools[s.key], s.slot)
	}
}

// ahead is how many units beyond its cost an admission that goes to
// Redis takes for the requests after it. Call with mu held.
func (r *Counts) ahead(c limits.Check) int {
	if c.Period == 0 {
		return 0
	}
	g := r.grants[c.Key]
	return max(g.target()-g.units, 0)
}

// tookRemote records what Redis granted an admission. Call with mu held.
func (r *Counts) tookRemote(now time.Time, o op, gr []granted, t taken, lease string) {
	slots := t.slots
	for k, c := range o.checks {
		if c.Period == 0 {
			slots = append(slots, heldSlot{c.Key, slot{member: o.lease, expires: now.Add(r.lease)}})
			continue
		}
		if g := r.grants[c.Key]; g != nil {
			r.granted(now, g, gr[k])
		}
	}
	r.hold(lease, slots)
}

// granted adds what Redis answered to a grant.
func (r *Counts) granted(now time.Time, g *grant, a granted) {
	g.units += a.Granted
	g.remaining = a.Remaining
	g.resetAt = now.Add(a.ResetAfter)
	g.granted = now
}

// refill takes more units ahead, in the background, for the rates of an
// admission that left a grant under half its target. Call with mu held.
func (r *Counts) refill(now time.Time, checks []limits.Check) {
	for _, c := range checks {
		g := r.grants[c.Key]
		if c.Period == 0 || g == nil || g.refilling || now.Before(g.quietUntil) {
			continue
		}
		if t := g.target(); t > 0 && g.units < (t+1)/2 {
			g.refilling = true
			rc := g.check
			rc.Cost = t - g.units
			r.background(op{kind: 'g', checks: []limits.Check{rc}})
		}
	}
}

// refilled takes a refill's answer. Call with mu held.
func (r *Counts) refilled(now time.Time, c limits.Check, a granted, err error) {
	g := r.grants[c.Key]
	if g == nil {
		// Given back meanwhile (Close): so are these.
		if err == nil && a.Granted > 0 {
			r.background(op{kind: 'j', checks: []limits.Check{c}, delta: -a.Granted})
		}
		return
	}
	g.refilling = false
	switch {
	case err != nil:
		g.quietUntil = now.Add(horizon)
	case a.Allowed:
		r.granted(now, g, a)
	default:
		g.remaining = a.Remaining
		g.quietUntil = now.Add(max(a.RetryAfter, horizon))
	}
}

// settle takes a settlement's positive delta (more used than reserved)
// from a grant, and returns what it does not cover, for Redis. A refund
// always goes to Redis: the units were counted when reserved, maybe long
// ago, and only Redis knows how much of that count is left. Call with mu
// held.
func (r *Counts) settle(c limits.Check, delta int) int {
	g := r.grants[c.Key]
	if g == nil || delta < 0 {
		return delta
	}
	if units := g.units - delta; units >= 0 {
		g.units = units
		return 0
	}
	excess := delta - g.units
	g.units = 0
	return excess
}

// release keeps lease's slots for the next requests. Call with mu held.
func (r *Counts) release(now time.Time, lease string) {
	for _, s := range r.inUse[lease] {
		r.openHere[s.key]--
		if r.openHere[s.key] <= 0 {
			delete(r.openHere, s.key)
		}
		s.idle = now
		r.pools[s.key] = append(r.pools[s.key], s.slot)
	}
	delete(r.inUse, lease)
}

// giveBack returns to Redis the units and free slots unused since
// keepFor before now; with now zero, everything held. Call with mu held.
func (r *Counts) giveBack(now time.Time) {
	all := now.IsZero()
	for key, g := range r.grants {
		if g.units > 0 && (all || now.Sub(g.granted) > keepFor) {
			r.background(op{kind: 'j', checks: []limits.Check{g.check}, delta: -g.units})
			g.units = 0
		}
		// A refill answered after Close finds no grant and gives its
		// units back (refilled).
		if g.units == 0 && (all || !g.refilling && now.Sub(g.window) > 10*keepFor) {
			delete(r.grants, key)
		}
	}
	for key, p := range r.pools {
		keep := p[:0]
		for _, s := range p {
			if all || now.Sub(s.idle) > keepFor {
				r.background(op{kind: 'r', checks: []limits.Check{{Key: key}}, lease: s.member})
				continue
			}
			keep = append(keep, s)
		}
		if len(keep) == 0 {
			delete(r.pools, key)
		} else {
			r.pools[key] = keep
		}
	}
	if all {
		for lease, hs := range r.inUse {
			for _, s := range hs {
				r.background(op{kind: 'r', checks: []limits.Check{{Key: s.key}}, lease: s.member})
			}
			delete(r.inUse, lease)
		}
		clear(r.openHere)
	}
}

// tidy gives back what lies unused, every half keepFor, until Close.
func (r *Counts) tidy() {
	defer close(r.tidied)
	t := time.NewTicker(keepFor / 2)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			r.giveBack(r.now())
			r.mu.Unlock()
		}
	}
}

// heldSlots lists every slot held, in use or free, as parallel key and
// member lists. Call with mu held.
func (r *Counts) heldSlots() (keys, members []string) {
	for _, hs := range r.inUse {
		for _, s := range hs {
			keys, members = append(keys, s.key), append(members, s.member)
		}
	}
	for key, p := range r.pools {
		for _, s := range p {
			keys, members = append(keys, key), append(members, s.member)
		}
	}
	return keys, members
}

// renewed sets the slots' of members lease ends. Call with mu held.
func (r *Counts) renewed(members []string, expires time.Time) {
	set := make(map[string]bool, len(members))
	for _, m := range members {
		set[m] = true
	}
	for _, hs := range r.inUse {
		for i := range hs {
			if set[hs[i].member] {
				hs[i].expires = expires
			}
		}
	}
	for _, p := range r.pools {
		for i := range p {
			if set[p[i].member] {
				p[i].expires = expires
			}
		}
	}
}

// adopt keeps what Redis granted an admission whose caller gave up: its
// units and slot are held unused, and go back with the rest. Call with mu
// held.
func (r *Counts) adopt(now time.Time, o op, res []granted) {
	for _, a := range res {
		if !a.Allowed {
			return // Redis took nothing
		}
	}
	for k, c := range o.checks {
		if c.Period == 0 {
			r.pools[c.Key] = append(r.pools[c.Key], slot{member: o.lease, expires: now.Add(r.lease), idle: now})
			continue
		}
		g := r.grants[c.Key]
		if g == nil {
			g = &grant{check: c, window: now}
			r.grants[c.Key] = g
		}
		g.units += c.Cost + res[k].Granted
		g.granted = now
	}
}
