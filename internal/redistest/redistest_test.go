package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// eventually retries f for 15 s at most until it returns nil.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 15s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestStandalone(t *testing.T) {
	url, s := Standalone(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries, opt.DialerRetries, opt.ReadTimeout = -1, 1, 300*time.Millisecond
	c := redis.NewClient(opt)
	defer c.Close()
	if err := c.Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := c.Get(ctx(t), "k").Err(); err == nil {
		t.Fatal("a stopped server answered")
	}
	s.Cont()
	if v, err := c.Get(ctx(t), "k").Result(); err != nil || v != "v" {
		t.Fatalf("after Cont: %q %v", v, err)
	}
	s.Kill()
	if err := c.Get(ctx(t), "k").Err(); err == nil {
		t.Fatal("a killed server answered")
	}
}

// TestCluster: a cluster client writes keys on every shard and reads them
// back one by one; a script over one hash tag runs, one over two tags is
// refused (CROSSSLOT); sharded pub/sub delivers.
func TestCluster(t *testing.T) {
	c := NewCluster(t, 3)
	if len(c.Addrs) != 3 {
		t.Fatalf("addrs %v", c.Addrs)
	}
	opt, err := redis.ParseClusterURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(opt.Addrs) != 3 {
		t.Fatalf("%s parsed as %v", c.URL(), opt.Addrs)
	}
	rc := redis.NewClusterClient(opt)
	defer rc.Close()
	ctx := ctx(t)

	const n = 100
	for i := range n {
		if err := rc.Set(ctx, fmt.Sprint("key", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	masters := map[string]int64{}
	for _, a := range c.Addrs {
		node := redis.NewClient(&redis.Options{Addr: a})
		size, err := node.DBSize(ctx).Result()
		node.Close()
		if err != nil {
			t.Fatal(err)
		}
		masters[a] = size
	}
	for a, size := range masters {
		if size == 0 {
			t.Errorf("no key on %s: %v", a, masters)
		}
	}
	for i := range n {
		if v, err := rc.Get(ctx, fmt.Sprint("key", i)).Int(); err != nil || v != i {
			t.Fatalf("key%d: %v %v", i, v, err)
		}
	}

	script := redis.NewScript(`redis.call("SET", KEYS[1], ARGV[1]); redis.call("SET", KEYS[2], ARGV[1]); return redis.call("GET", KEYS[2])`)
	if v, err := script.Run(ctx, rc, []string{"{a}:one", "{a}:two"}, "x").Text(); err != nil || v != "x" {
		t.Fatalf("one tag: %q %v", v, err)
	}
	err = script.Run(ctx, rc, []string{"{a}:one", "{b}:two"}, "x").Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT Keys in request don't hash to the same slot") {
		t.Fatalf("two tags: %v, want CROSSSLOT", err)
	}

	sub := rc.SSubscribe(ctx, "{a}:events")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	if err := rc.SPublish(ctx, "{a}:events", "hello").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sub.Channel():
		if m.Channel != "{a}:events" || m.Payload != "hello" {
			t.Fatalf("received %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no sharded message")
	}

	c.Kill(0)
	if c.Nodes[0].up() {
		t.Fatal("node 0 still up after Kill")
	}
}

// TestClusterFailover: the master of a key's slot is killed; its replica
// takes over with the key, and the cluster client reads and writes it
// again.
func TestClusterFailover(t *testing.T) {
	c := NewClusterWithReplicas(t)
	opt, err := redis.ParseClusterURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClusterClient(opt)
	defer rc.Close()
	ctx := ctx(t)
	const key = "{answer}:journal"
	if err := rc.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	master := c.MasterOf(t, key)
	direct := redis.NewClient(&redis.Options{Addr: master})
	defer direct.Close()
	if n, err := direct.Do(ctx, "WAIT", 1, 2000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d replicas, %v", n, err)
	}

	start := time.Now()
	old := c.KillMasterOf(t, key)
	if old != master {
		t.Fatalf("killed %s, the master was %s", old, master)
	}
	now := c.WaitFailover(t, key, old)
	t.Logf("%s took over from %s in %v", now, old, time.Since(start).Round(time.Millisecond))
	if now == old {
		t.Fatal("no new master")
	}
	// go-redis reloads the slot map on MOVED, not on a dead master's
	// refused connections (only every ClusterStateReloadInterval, 60 s by
	// default): a client must ask for it.
	eventually(t, "reading the key after the failover", func() error {
		v, err := rc.Get(ctx, key).Result()
		if err != nil {
			rc.ReloadState(ctx)
		} else if v != "before" {
			return fmt.Errorf("read %q", v)
		}
		return err
	})
	eventually(t, "writing the key after the failover", func() error { return rc.Set(ctx, key, "after", 0).Err() })
	if got := c.MasterOf(t, key); got != now {
		t.Fatalf("the master is %s, WaitFailover said %s", got, now)
	}
}

// TestSentinel: a failover client writes; the master is killed; the
// sentinel promotes the replica, which has the write, and the client
// writes again.
func TestSentinel(t *testing.T) {
	st := NewSentinel(t)
	opt, err := redis.ParseFailoverURL(st.URL())
	if err != nil {
		t.Fatal(err)
	}
	if opt.MasterName != "mymaster" || len(opt.SentinelAddrs) != 1 {
		t.Fatalf("%s parsed as %+v", st.URL(), opt)
	}
	rc := redis.NewFailoverClient(opt)
	defer rc.Close()
	ctx := ctx(t)
	if err := rc.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rc.Do(ctx, "WAIT", 1, 2000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d replicas, %v", n, err)
	}
	master := st.MasterAddr(t)
	if master != st.Servers[0].Addr {
		t.Fatalf("the sentinel says %s, the master is %s", master, st.Servers[0].Addr)
	}

	start := time.Now()
	old := st.KillMaster(t)
	now := st.WaitFailover(t, old)
	took := time.Since(start)
	t.Logf("%s took over from %s in %v", now, old, took.Round(time.Millisecond))
	if now != st.Servers[1].Addr {
		t.Fatalf("the new master is %s, the replica %s", now, st.Servers[1].Addr)
	}
	if took > 10*time.Second {
		t.Errorf("the failover took %v", took)
	}
	eventually(t, "writing after the failover", func() error { return rc.Set(ctx, "k2", "after", 0).Err() })
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Fatalf("k after the failover: %q %v", v, err)
	}
	direct := redis.NewClient(&redis.Options{Addr: now})
	defer direct.Close()
	if v, err := direct.Get(ctx, "k2").Result(); err != nil || v != "after" {
		t.Fatalf("k2 on the new master: %q %v", v, err)
	}
}
