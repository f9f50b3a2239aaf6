package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestFleetSizing measures the figures docs/operations.md sizes a fleet
// with, on the local fleet with a Redis of its own (so that the machine's
// other clients do not count): CPU per request, memory per open stream,
// Redis commands and bytes per answer, PostgreSQL rows written per
// request. It is a measurement, not a check: it runs only with
// FIRSTWORD_FLEET_SIZING=1 and reports in the test log.
//
//	FIRSTWORD_FLEET_SIZING=1 go test -run TestFleetSizing -v ./internal/gateway/
func TestFleetSizing(t *testing.T) {
	if os.Getenv("FIRSTWORD_FLEET_SIZING") == "" {
		t.Skip("a measurement: set FIRSTWORD_FLEET_SIZING=1 to run it")
	}
	redisURL, _ := ownRedis(t)
	f := startFleet(t, redisURL)
	pids := []int{f.pid(1), f.pid(2), f.pid(3)}
	const turns, concurrency, tokens = 300, 20, 100
	directive := fmt.Sprintf("[sim ttft=20ms gap=10ms tokens=%d]", tokens)

	// Warm up: connections, pools, first allocations.
	sizingLoad(t, f, 40, concurrency, directive)
	time.Sleep(12 * time.Second) // PostgreSQL publishes a backend's counters when it has been idle 10 s
	cpu0, redis0, mem0, pg0 := cpuTicks(t, pids), redisStats(t, f), redisMemory(t, f), pgRows(t, f)
	start := time.Now()
	sizingLoad(t, f, turns, concurrency, directive)
	took := time.Since(start)
	time.Sleep(12 * time.Second)
	cpu1, redis1, mem1, pg1 := cpuTicks(t, pids), redisStats(t, f), redisMemory(t, f), pgRows(t, f)

	t.Logf("%d /v1/chat turns of %d tokens, %d at a time, through nginx in %v", turns, tokens, concurrency, took.Round(time.Millisecond))
	t.Logf("CPU per request (3 replicas, user+system): %.2f ms", float64(cpu1-cpu0)*10/turns)
	var calls []string
	total := 0.0
	usec := float64(redis1["usec"]-redis0["usec"]) / turns
	delete(redis1, "usec")
	for cmd, n := range redis1 {
		if d := n - redis0[cmd]; d > 0 {
			calls = append(calls, fmt.Sprintf("%s %.2f", cmd, float64(d)/turns))
			total += float64(d) / turns
		}
	}
	slices.Sort(calls)
	t.Logf("Redis commands per request: %.1f (%s), %.0f µs of Redis's time", total, strings.Join(calls, ", "), usec)
	events := tokens + 2
	t.Logf("Redis memory per retained answer journal: %.0f bytes (%.0f bytes per event, %d events)", float64(mem1-mem0)/turns, float64(mem1-mem0)/turns/float64(events), events)
	for _, k := range []string{"n_tup_ins", "n_tup_upd", "n_tup_del", "idx_scan", "seq_scan"} {
		t.Logf("PostgreSQL %s per request: %.2f", k, float64(pg1[k]-pg0[k])/turns)
	}

	// Memory per open stream: N slow answers open at once.
	const open = 200
	rss0 := rssKiB(t, pids)
	var wg sync.WaitGroup
	client := newFleetClient(t, f.url)
	for i := range open {
		wg.Go(func() { client.chat(fmt.Sprintf("open stream %d [sim ttft=10ms gap=500ms tokens=16]", i)) })
	}
	time.Sleep(4 * time.Second)
	rss1 := rssKiB(t, pids)
	wg.Wait()
	t.Logf("RSS with %d open streams: %d KiB -> %d KiB: %.1f KiB per open stream", open, rss0, rss1, float64(rss1-rss0)/open)
}

func sizingLoad(t *testing.T, f *fleet, turns, concurrency int, directive string) {
	client := newFleetClient(t, f.url)
	work := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range work {
				if tr := client.chat(fmt.Sprintf("size me %d %s", i, directive)); tr.err != nil || tr.last.kind != "done" {
					t.Errorf("turn %d: %v %q %v", i, tr.err, tr.last.kind, tr.last.data)
				}
			}
		})
	}
	for i := range turns {
		work <- i
	}
	close(work)
	wg.Wait()
}

// redisInfo runs INFO section on the fleet's Redis.
func redisInfo(t *testing.T, f *fleet, section string) string {
	t.Helper()
	var url string
	for _, e := range f.env {
		if v, ok := strings.CutPrefix(e, "FLEET_REDIS_URL="); ok {
			url = v
		}
	}
	out, err := exec.Command("redis-cli", "-u", url, "INFO", section).Output()
	if err != nil {
		t.Fatalf("redis-cli INFO %s: %v", section, err)
	}
	return string(out)
}

// redisStats is each command's call count (INFO commandstats), and
// under "usec" the microseconds Redis spent in all of them.
func redisStats(t *testing.T, f *fleet) map[string]int64 {
	stats := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(redisInfo(t, f, "commandstats")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || name == "info" {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		stats[name] = n
		if _, usec, ok := strings.Cut(rest, ",usec="); ok {
			us, _ := strconv.ParseInt(usec[:strings.IndexByte(usec, ',')], 10, 64)
			stats["usec"] += us
		}
	}
	return stats
}

func redisMemory(t *testing.T, f *fleet) int64 {
	for _, line := range strings.Split(redisInfo(t, f, "memory"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// pgRows sums the fleet schema's table counters (pg_stat_user_tables).
func pgRows(t *testing.T, f *fleet) map[string]int64 {
	t.Helper()
	var url, schema string
	for _, e := range f.env {
		if v, ok := strings.CutPrefix(e, "FLEET_POSTGRES_URL="); ok {
			url = v
		}
		if v, ok := strings.CutPrefix(e, "FLEET_SCHEMA="); ok {
			schema = v
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	got := map[string]int64{}
	var ins, upd, del, idx, seq int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins),0)::bigint, coalesce(sum(n_tup_upd),0)::bigint, coalesce(sum(n_tup_del),0)::bigint,
		coalesce(sum(idx_scan),0)::bigint, coalesce(sum(seq_scan),0)::bigint FROM pg_stat_user_tables WHERE schemaname = $1`, schema).Scan(&ins, &upd, &del, &idx, &seq)
	if err != nil {
		t.Fatal(err)
	}
	got["n_tup_ins"], got["n_tup_upd"], got["n_tup_del"], got["idx_scan"], got["seq_scan"] = ins, upd, del, idx, seq
	return got
}

// cpuTicks sums the processes' user and system time in clock ticks
// (fields 14 and 15 of /proc/PID/stat; 100 a second on Linux).
func cpuTicks(t *testing.T, pids []int) int64 {
	t.Helper()
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		sum += utime + stime
	}
	return sum
}

// rssKiB sums the processes' resident memory (VmRSS).
func rssKiB(t *testing.T, pids []int) int64 {
	t.Helper()
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				sum += n
			}
		}
	}
	return sum
}
