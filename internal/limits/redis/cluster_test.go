package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstword/firstword/internal/limits"
	"github.com/firstword/firstword/internal/redisconn"
	"github.com/firstword/firstword/internal/redistest"
)

// TestOnACluster: two replicas' Counts on a Redis Cluster of the test's
// own, admitting for twelve tenants at once (so that one batch holds
// many tenants, in many slots), each admission checking a tenant's and
// a key's rates and open streams. No call fails (a script that spanned
// slots would, CROSSSLOT), no tenant gets more than its limits, each
// tenant's counts sit in one slot, and renewals and releases reach Redis.
func TestOnACluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	server := redisconn.Server{URL: cl.URL(), Cluster: true}
	prefix := fmt.Sprintf("fwtest:limits:cluster:%d:", time.Now().UnixNano())
	var cs []*Counts
	for range 2 {
		c, err := Open(server, prefix, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	ctx := context.Background()
	const tenants, rate, streams = 12, 40, 3
	checks := func(tenant int) []limits.Check {
		tag := fmt.Sprintf("tenant-%d", tenant)
		return []limits.Check{
			{Key: "rpm:tenant:" + tag, Tag: tag, Limit: rate, Period: time.Hour, Cost: 1},
			{Key: "rpm:key:k-" + tag, Tag: tag, Limit: rate * 2, Period: time.Hour, Cost: 1},
			{Key: "open:tenant:" + tag, Tag: tag, Limit: streams},
		}
	}
	var allowed [tenants]atomic.Int64
	var open [tenants]atomic.Int64
	var wg sync.WaitGroup
	for r, c := range cs {
		for g := range 4 {
			wg.Go(func() {
				for i := range 300 {
					tenant := (i + g + r) % tenants
					lease := fmt.Sprintf("r%d-g%d-%d", r, g, i)
					res, err := c.Admit(ctx, checks(tenant), lease)
					if err != nil {
						t.Errorf("admit: %v", err)
						return
					}
					ok := res[0].Allowed && res[1].Allowed && res[2].Allowed
					if !ok {
						continue
					}
					allowed[tenant].Add(1)
					if n := open[tenant].Add(1); n > streams {
						t.Errorf("tenant %d: %d streams open at once, over its limit of %d", tenant, n, streams)
					}
					time.Sleep(time.Millisecond)
					open[tenant].Add(-1)
					if err := c.Release(ctx, []string{checks(tenant)[2].Key}, lease); err != nil {
						t.Errorf("release: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	for tenant := range tenants {
		if got := allowed[tenant].Load(); got == 0 || got > rate+1 {
			t.Errorf("tenant %d: %d admitted by two replicas, want 1 to %d", tenant, got, rate+1)
		}
	}
	for _, c := range cs {
		if err := c.Renew(ctx, nil); err != nil {
			t.Errorf("renew: %v", err)
		}
		if n := c.LateErrors(); n != 0 {
			t.Errorf("%d settlements or releases failed", n)
		}
	}

	// Every key of a tenant is in one slot.
	rc, err := redisconn.Open(server, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	slots := map[string]int64{}
	var mu sync.Mutex // ForEachMaster calls at once
	err = rc.(*goredis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
		keys, err := node.Keys(ctx, prefix+"*").Result()
		for _, k := range keys {
			tag := k[strings.IndexByte(k, '{')+1 : strings.IndexByte(k, '}')]
			slot, err := node.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			if s, ok := slots[tag]; ok && s != slot {
				t.Errorf("tenant %s's keys are in slots %d and %d", tag, s, slot)
			}
			slots[tag] = slot
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != tenants {
		t.Errorf("keys of %d tenants in Redis, want %d", len(slots), tenants)
	}
	distinct := map[int64]bool{}
	for _, s := range slots {
		distinct[s] = true
	}
	if len(distinct) < 2 {
		t.Errorf("all tenants in one slot (%v): the test does not span slots", slots)
	}
}
