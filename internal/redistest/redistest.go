// Package redistest starts Redis topologies of a test's own: a standalone
// server, a Redis Cluster (with or without replicas) and a Sentinel setup,
// each from redis-server processes on free loopback ports with their files
// in the test's temporary directory. Everything started is killed when the
// test ends; each server's log is printed if the test failed. A test is
// skipped when redis-server (or, for a cluster, redis-cli) is not
// installed. It is test support: nothing in the gateway imports it.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// wait bounds every wait for a topology to form or fail over.
const wait = 15 * time.Second

// Server is one redis-server process.
type Server struct {
	Addr string // "127.0.0.1:port"

	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	stopped atomic.Bool
	log     string
}

// Kill sends SIGKILL and waits for the process to exit. A server already
// gone is left as it is.
func (s *Server) Kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.stopped.Store(false)
}

// Stop freezes the process (SIGSTOP): connections stay open, nothing is
// answered.
func (s *Server) Stop() {
	s.cmd.Process.Signal(syscall.SIGSTOP)
	s.stopped.Store(true)
}

// Cont resumes a stopped process (SIGCONT).
func (s *Server) Cont() {
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.stopped.Store(false)
}

// up reports whether the process runs and is not stopped.
func (s *Server) up() bool {
	select {
	case <-s.done:
		return false
	default:
		return !s.stopped.Load()
	}
}

// Standalone starts one redis-server and returns its URL
// ("redis://127.0.0.1:port/0").
func Standalone(t testing.TB) (url string, s *Server) {
	t.Helper()
	need(t, "redis-server", "a Redis of its own")
	s = spawn(t, t.TempDir(), "redis", 1, func(p []int) []string { return dataArgs(p[0]) })
	return "redis://" + s.Addr + "/0", s
}

// dataArgs are a data server's options: no persistence, and a full
// resynchronisation of a replica that starts at once.
func dataArgs(port int) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--repl-diskless-sync-delay", "0"}
}

// spawn starts redis-server with the arguments args gives for nports free
// ports (the first is the client port), logging to a file in dir, and
// waits until it answers. A server that exits first (a port taken
// meanwhile) is started again on other ports, twice at most.
func spawn(t testing.TB, dir, role string, nports int, args func(ports []int) []string) *Server {
	t.Helper()
	path := need(t, "redis-server", "a Redis")
	for try := 1; ; try++ {
		ports := freePorts(t, nports)
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(ports[0]), done: make(chan struct{}),
			log: filepath.Join(dir, fmt.Sprintf("%s-%d.log", role, ports[0]))}
		s.cmd = exec.Command(path, append(args(ports), "--daemonize", "no", "--dir", dir, "--logfile", s.log)...)
		s.cmd.Dir = dir
		s.cmd.SysProcAttr = procAttr()
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("starting redis-server (%s): %v", role, err)
		}
		go func() { s.cmd.Wait(); close(s.done) }()
		t.Cleanup(func() {
			s.Cont()
			s.Kill()
			if t.Failed() {
				t.Logf("redis %s %s, log %s:\n%s", role, s.Addr, s.log, tail(s.log))
			}
		})
		deadline := time.Now().Add(wait)
		for {
			// Its own process answers, not another that took the port.
			if info, err := do(s.Addr, "INFO", "server"); err == nil && field(info, "process_id") == strconv.Itoa(s.cmd.Process.Pid) {
				return s
			}
			if !s.up() {
				if try < 3 {
					break
				}
				t.Fatalf("redis %s on %s exited: %s", role, s.Addr, tail(s.log))
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis %s on %s did not answer within %v", role, s.Addr, wait)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// need returns the path of the program bin, and skips the test if it is
// not installed.
func need(t testing.TB, bin, what string) string {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Skipf("%s not installed: skipping the test that starts %s", bin, what)
	}
	return path
}

// freePorts returns n distinct loopback ports nothing listens on just now.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// tail is the end of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const max = 8 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// Cluster is a Redis Cluster of the test's own. Its nodes time out after
// cluster-node-timeout 1000 ms: a killed master is flagged failing, and a
// replica takes its slots over, within a few seconds.
type Cluster struct {
	Addrs []string  // every node's "host:port"
	Nodes []*Server // Nodes[i] listens on Addrs[i]
}

// NewCluster starts n master nodes (3 at least) sharing the 16384 slots,
// created with redis-cli --cluster create, and waits until every node
// reports cluster_state:ok.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return newCluster(t, n, 0)
}

// NewClusterWithReplicas starts three masters with one replica each, so
// that a shard can fail over (see KillMasterOf), and waits until every
// node reports cluster_state:ok and every replica is in sync.
func NewClusterWithReplicas(t testing.TB) *Cluster {
	t.Helper()
	return newCluster(t, 6, 1)
}

func newCluster(t testing.TB, n, replicas int) *Cluster {
	t.Helper()
	need(t, "redis-server", "a Redis Cluster")
	cli := need(t, "redis-cli", "a Redis Cluster")
	dir := t.TempDir()
	c := &Cluster{}
	for range n {
		s := spawn(t, dir, "cluster-node", 2, func(p []int) []string {
			return append(dataArgs(p[0]), "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(p[1]),
				"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", p[0])),
				"--cluster-node-timeout", "1000")
		})
		c.Addrs = append(c.Addrs, s.Addr)
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	waitFor(t, "the cluster's every node in cluster_state:ok", func() (bool, string) {
		for _, s := range c.Nodes {
			info, err := do(s.Addr, "CLUSTER", "INFO")
			if err != nil {
				return false, s.Addr + ": " + err.Error()
			}
			if field(info, "cluster_state") != "ok" || field(info, "cluster_known_nodes") != strconv.Itoa(n) {
				return false, s.Addr + ":\n" + fmt.Sprint(info)
			}
			repl, err := do(s.Addr, "INFO", "replication")
			if err != nil {
				return false, s.Addr + ": " + err.Error()
			}
			if field(repl, "role") == "slave" && field(repl, "master_link_status") != "up" {
				return false, s.Addr + " (replica):\n" + fmt.Sprint(repl)
			}
		}
		return true, ""
	})
	return c
}

// URL is the cluster's URL as go-redis's ParseClusterURL reads it:
// "redis://first?addr=second&addr=third...".
func (c *Cluster) URL() string {
	u := "redis://" + c.Addrs[0]
	for i, a := range c.Addrs[1:] {
		if i == 0 {
			u += "?"
		} else {
			u += "&"
		}
		u += "addr=" + a
	}
	return u
}

// Kill sends SIGKILL to node i.
func (c *Cluster) Kill(i int) { c.Nodes[i].Kill() }

// Stop freezes node i (SIGSTOP).
func (c *Cluster) Stop(i int) { c.Nodes[i].Stop() }

// Cont resumes node i (SIGCONT).
func (c *Cluster) Cont(i int) { c.Nodes[i].Cont() }

// MasterOf returns the address of the master serving key's slot, as a
// running node sees it.
func (c *Cluster) MasterOf(t testing.TB, key string) string {
	t.Helper()
	var errs []string
	for _, s := range c.Nodes {
		if !s.up() {
			continue
		}
		addr, err := c.owner(s, key)
		if err == nil {
			return addr
		}
		errs = append(errs, s.Addr+": "+err.Error())
	}
	t.Fatalf("the master of %q: %s", key, strings.Join(errs, "; "))
	return ""
}

// owner asks node s which master serves key's slot.
func (c *Cluster) owner(s *Server, key string) (string, error) {
	slot, err := do(s.Addr, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return "", err
	}
	nodes, err := do(s.Addr, "CLUSTER", "NODES")
	if err != nil {
		return "", err
	}
	// A line: id addr@busport[,hostname] flags master-id ping pong epoch link slot-ranges...
	for _, line := range strings.Split(fmt.Sprint(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !slices.Contains(strings.Split(f[2], ","), "master") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 == nil && err2 == nil && a <= slot.(int64) && slot.(int64) <= b {
				addr, _, _ := strings.Cut(f[1], "@")
				return addr, nil
			}
		}
	}
	return "", fmt.Errorf("no master serves slot %v:\n%s", slot, nodes)
}

// KillMasterOf sends SIGKILL to the master serving key's slot and returns
// its address. With replicas, its replica takes the slot over (see
// WaitFailover); without, the cluster is down once the master is flagged
// failing.
func (c *Cluster) KillMasterOf(t testing.TB, key string) string {
	t.Helper()
	addr := c.MasterOf(t, key)
	i := slices.Index(c.Addrs, addr)
	if i < 0 {
		t.Fatalf("the master %s is none of the cluster's nodes %v", addr, c.Addrs)
	}
	c.Nodes[i].Kill()
	return addr
}

// WaitFailover waits until every running node reports cluster_state:ok
// and the same master, not old, for key's slot, and returns that master's
// address.
func (c *Cluster) WaitFailover(t testing.TB, key, old string) string {
	t.Helper()
	var master string
	waitFor(t, "a new master for "+strconv.Quote(key), func() (bool, string) {
		master = ""
		for _, s := range c.Nodes {
			if !s.up() {
				continue
			}
			info, err := do(s.Addr, "CLUSTER", "INFO")
			if err != nil {
				return false, s.Addr + ": " + err.Error()
			}
			if field(info, "cluster_state") != "ok" {
				return false, s.Addr + ": " + fmt.Sprint(info)
			}
			addr, err := c.owner(s, key)
			if err != nil {
				return false, s.Addr + ": " + err.Error()
			}
			if addr == old || (master != "" && addr != master) {
				return false, fmt.Sprintf("%s sees %s as the master", s.Addr, addr)
			}
			master = addr
		}
		return master != "", "no node runs"
	})
	return master
}

// Sentinel is one master, one replica and one sentinel monitoring them.
// The sentinel finds the master down after 1 s and promotes the replica
// within a few seconds.
type Sentinel struct {
	MasterName    string    // "mymaster"
	SentinelAddrs []string  // the sentinels' "host:port"
	Servers       []*Server // the master as started, then its replica
	Sentinels     []*Server // Sentinels[i] listens on SentinelAddrs[i]
}

// NewSentinel starts a master, its replica (in sync before the sentinel
// starts) and a sentinel started as redis-server FILE --sentinel, and
// waits until the sentinel sees both up.
func NewSentinel(t testing.TB) *Sentinel {
	t.Helper()
	need(t, "redis-server", "a Redis Sentinel setup")
	dir := t.TempDir()
	st := &Sentinel{MasterName: "mymaster"}
	master := spawn(t, dir, "master", 1, func(p []int) []string { return dataArgs(p[0]) })
	_, mport, _ := net.SplitHostPort(master.Addr)
	replica := spawn(t, dir, "replica", 1, func(p []int) []string {
		return append(dataArgs(p[0]), "--replicaof", "127.0.0.1", mport)
	})
	st.Servers = []*Server{master, replica}
	waitFor(t, "the replica in sync", func() (bool, string) {
		repl, err := do(replica.Addr, "INFO", "replication")
		return err == nil && field(repl, "master_link_status") == "up", fmt.Sprint(repl, err)
	})
	s := spawn(t, dir, "sentinel", 1, func(p []int) []string {
		file := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", p[0]))
		conf := fmt.Sprintf(`port %d
bind 127.0.0.1
sentinel monitor %[2]s 127.0.0.1 %[3]s 1
sentinel down-after-milliseconds %[2]s 1000
sentinel failover-timeout %[2]s 5000
sentinel parallel-syncs %[2]s 1
`, p[0], st.MasterName, mport)
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{file, "--sentinel"}
	})
	st.SentinelAddrs = []string{s.Addr}
	st.Sentinels = []*Server{s}
	// The sentinel learns of the replica from the master's INFO; a failover
	// needs it known and up.
	waitFor(t, "the sentinel seeing the master and its replica up", func() (bool, string) {
		m, err := do(s.Addr, "SENTINEL", "MASTER", st.MasterName)
		if err != nil || pairs(m)["flags"] != "master" {
			return false, fmt.Sprint(m, err)
		}
		rs, err := do(s.Addr, "SENTINEL", "REPLICAS", st.MasterName)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rs.([]any) {
			p := pairs(r)
			if p["ip"]+":"+p["port"] == replica.Addr && p["flags"] == "slave" && p["master-link-status"] == "ok" {
				return true, ""
			}
		}
		return false, fmt.Sprint(rs)
	})
	return st
}

// URL is the setup's URL as go-redis's ParseFailoverURL reads it:
// "redis://sentinel?master_name=mymaster".
func (st *Sentinel) URL() string {
	u := "redis://" + st.SentinelAddrs[0] + "?master_name=" + st.MasterName
	for _, a := range st.SentinelAddrs[1:] {
		u += "&addr=" + a
	}
	return u
}

// MasterAddr is the master's address as the sentinel reports it
// (SENTINEL get-master-addr-by-name).
func (st *Sentinel) MasterAddr(t testing.TB) string {
	t.Helper()
	r, err := do(st.SentinelAddrs[0], "SENTINEL", "get-master-addr-by-name", st.MasterName)
	a, ok := r.([]any)
	if err != nil || !ok || len(a) != 2 {
		t.Fatalf("SENTINEL get-master-addr-by-name: %v %v", r, err)
	}
	return net.JoinHostPort(a[0].(string), a[1].(string))
}

// KillMaster sends SIGKILL to the current master and returns its address.
func (st *Sentinel) KillMaster(t testing.TB) string {
	t.Helper()
	addr := st.MasterAddr(t)
	for _, s := range st.Servers {
		if s.Addr == addr {
			s.Kill()
			return addr
		}
	}
	t.Fatalf("the master %s is none of the setup's servers", addr)
	return ""
}

// WaitFailover waits until the sentinel reports a master other than old
// and that server answers as a master, and returns its address.
func (st *Sentinel) WaitFailover(t testing.TB, old string) string {
	t.Helper()
	var addr string
	waitFor(t, "the sentinel's failover from "+old, func() (bool, string) {
		addr = st.MasterAddr(t)
		if addr == old {
			return false, "the master is still " + old
		}
		role, err := do(addr, "ROLE")
		if r, ok := role.([]any); err != nil || !ok || r[0] != "master" {
			return false, fmt.Sprintf("%s's role: %v %v", addr, role, err)
		}
		return true, ""
	})
	return addr
}

// waitFor polls cond until it holds, for wait at most, and fails the test
// with what cond last said otherwise.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not after %v; last: %s", what, wait, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// field is a "name:value" line's value in an INFO-like reply.
func field(reply any, name string) string {
	s, _ := reply.(string)
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// pairs reads a flat [name, value, ...] reply (SENTINEL MASTER, REPLICAS).
func pairs(reply any) map[string]string {
	m := map[string]string{}
	a, _ := reply.([]any)
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		v, _ := a[i+1].(string)
		m[k] = v
	}
	return m
}
