package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/redistest"
)

// TestReplicasOnRedisTopologies (issue 35): two firstword replicas
// sharing one PostgreSQL schema and a Redis Cluster, or a Sentinel
// setup, of the test's own, for the response cache, the resume journal
// and the limits: an answer streamed on A resumes on B, a stop sent on B
// stops it on A, a tenant's limit is one limit across both, a
// deterministic answer cached by A is a hit on B, and an idempotent send
// dropped on A and retried on B gets the first send's answer. Then the
// master is killed while 50 answers stream: Sentinel promotes the
// replica (and, on a cluster with replicas, a shard fails over), and
// every client whose stream broke, or that had left and comes back,
// resumes and ends with the whole answer (see failoverUnderStreams).
// The replicas are real processes, as in TestReplicasResumeStopAndCrash:
// in this process, under the race detector, 50 streams would need more
// than two cores. Skipped when redis-server (or redis-cli, for a
// cluster) is not installed, or without FIRSTWORD_TEST_POSTGRES_URL.
func TestReplicasOnRedisTopologies(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		pg := pgSchema(t, "the Redis Cluster test (its replicas share a PostgreSQL store)")
		c := redistest.NewCluster(t, 3)
		a, b := topologyPair(t, pg, clusterYAML(c), 4)
		replicaChecks(t, a, b)
	})
	t.Run("sentinel", func(t *testing.T) {
		pg := pgSchema(t, "the Redis Sentinel test (its replicas share a PostgreSQL store)")
		st := redistest.NewSentinel(t)
		// The URL's form: redis://sentinel?master_name=mymaster.
		a, b := topologyPair(t, pg, fmt.Sprintf("url: %q, sentinel_master: %s", st.URL(), st.MasterName), 4)
		replicaChecks(t, a, b)
		t.Run("failover", func(t *testing.T) {
			failoverUnderStreams(t, a, b, func() string {
				old := st.KillMaster(t)
				return old + " -> " + st.WaitFailover(t, old)
			})
		})
	})
	t.Run("cluster failover", func(t *testing.T) {
		pg := pgSchema(t, "the Redis Cluster failover test (its replicas share a PostgreSQL store)")
		c := redistest.NewClusterWithReplicas(t)
		a, b := topologyPair(t, pg, clusterYAML(c), 1_000_000)
		// The master of control shard 0's slot: a third of the slots,
		// so of the answers' journals, and the stops and attachments
		// of the shards in them.
		const key = "firstword:journal:ctl:{0}"
		failoverUnderStreams(t, a, b, func() string {
			old := c.KillMasterOf(t, key)
			return old + " -> " + c.WaitFailover(t, key, old)
		})
	})
}

// clusterYAML names a cluster by its nodes (addrs, no url).
func clusterYAML(c *redistest.Cluster) string {
	return fmt.Sprintf("addrs: [%s], cluster: true", strings.Join(c.Addrs, ", "))
}

// topologyPair starts two real firstword processes, A and B, on the
// PostgreSQL schema pg, with the cache, the resume journal (lease
// 1500ms, grace 30s) and the limits on the Redis deployment redis (YAML
// flow-map fields), and a limit of rpm requests per minute on the local
// tenant.
func topologyPair(t *testing.T, pg, redis string, rpm int) (a, b *process) {
	t.Helper()
	dir := t.TempDir()
	start := func(name string) *process {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cfg := filepath.Join(dir, name+".yaml")
		os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %[1]s
store: {driver: postgres, url: %[2]q}
usage: {spill_path: %[3]s}
cache: {driver: redis, %[4]s}
resume: {journal: redis, %[4]s, grace: 30s, lease: 1500ms}
limits: {driver: redis, %[4]s, timeout: 500ms, refresh: 200ms}
tenants:
  local: {limits: {requests_per_minute: %[5]d}}
providers:
  sim: {type: sim}
models:
  chat: {timeout: 60s, deployments: [{provider: sim, model: small}]}
`, addr, pg, filepath.Join(dir, name+".spill"), redis, rpm)), 0o600)
		p := startProcess(t, cfg, addr)
		t.Cleanup(func() {
			p.cmd.Process.Signal(os.Interrupt)
			p.cmd.Wait()
			if t.Failed() {
				t.Logf("replica %s's log:\n%s", name, p.log.String())
			}
		})
		return p
	}
	return start("a"), start("b")
}

// replicaChecks runs, on replicas A and B whose local tenant may make 4
// requests a minute, the checks every Redis deployment must pass. The
// limit goes first, on counts nothing else has touched; it is then
// raised for the rest.
func replicaChecks(t *testing.T, a, b *process) {
	t.Run("limits", func(t *testing.T) {
		body := `{"model":"chat","messages":[{"role":"user","content":"hi [sim ttft=1ms tokens=2]"}]}`
		ok, refused := 0, 0
		for i := range 10 {
			url := []string{a.url, b.url}[i%2]
			switch code, resp := send(t, "POST", url+"/v1/chat/completions", "", body); code {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				refused++
			default:
				t.Fatalf("request %d: %d %s", i, code, resp)
			}
		}
		if ok != 4 || refused != 6 {
			t.Errorf("A and B admitted %d and refused %d of 10, want 4 and 6: one limit of 4 for both", ok, refused)
		}
		// Raise the limit for the checks that follow, and wait until both
		// replicas admit again (B reloads it within limits.refresh).
		if code, resp := send(t, "PUT", a.url+"/admin/v1/tenants/local", "", `{"requests_per_minute": 1000000}`); code != http.StatusOK {
			t.Fatalf("raising the limit: %d %s", code, resp)
		}
		for _, url := range []string{a.url, b.url} {
			deadline := time.Now().Add(5 * time.Second)
			for {
				code, resp := send(t, "POST", url+"/v1/chat/completions", "", body)
				if code == http.StatusOK {
					break
				}
				if code != http.StatusTooManyRequests || time.Now().After(deadline) {
					t.Fatalf("%s after the limit was raised: %d %s", url, code, resp)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	if t.Failed() {
		return
	}

	t.Run("resume", func(t *testing.T) {
		const story = "Resume me elsewhere. [sim ttft=5ms gap=10ms tokens=100]"
		first := chatOnce(t, a.url, "", map[string]any{"message": story}, 5)
		if first.meta == nil {
			t.Fatalf("no meta event from A: %d %s", first.status, first.body)
		}
		conv := first.meta["conversation_id"].(string)
		rest := resume(t, b.url, conv, first.last.id, nil)
		if rest.status != 200 || rest.last.kind != "done" || rest.last.data["status"] != "complete" {
			t.Fatalf("the resume on B: %d, ended with %q %v %s", rest.status, rest.last.kind, rest.last.data, rest.body)
		}
		checkContinuous(t, append(append([]chatEvent(nil), first.events...), rest.events...), 0)
		clean := chatOnce(t, b.url, "", map[string]any{"message": story}, 0)
		if got := first.text + rest.text; got != clean.text {
			t.Errorf("A's 5 deltas and B's rest read\n%q\nthe unbroken answer is\n%q", got, clean.text)
		}
		if ans := storedAnswer(t, b.url, "", conv); ans["status"] != "complete" || ans["content"] != clean.text {
			t.Errorf("stored %v %q, want complete with the whole answer", ans["status"], ans["content"])
		}
	})

	t.Run("stop", func(t *testing.T) {
		// A's client stays connected; the stop goes to B.
		var conv string
		var stopStatus int
		var took time.Duration
		res := chatOnceUntil(t, a.url, map[string]any{"message": "Stop me from elsewhere. [sim ttft=5ms gap=20ms tokens=500]"}, func(deltas int, ev chatEvent) bool {
			if ev.kind == "meta" {
				conv, _ = ev.data["conversation_id"].(string)
			}
			if ev.kind == "delta" && deltas == 10 {
				// The route answers once the answer is stored cancelled.
				sent := time.Now()
				code, body := send(t, "POST", b.url+"/v1/conversations/"+conv+"/stop", "", "")
				stopStatus, took = code, time.Since(sent)
				if code != 200 {
					t.Errorf("stop on B: %d %s", code, body)
					return true
				}
			}
			return false
		})
		if stopStatus != 200 {
			t.Fatalf("no stop sent (stream ended with %q %v)", res.last.kind, res.last.data)
		}
		if res.last.kind != "done" || res.last.data["status"] != "cancelled" {
			t.Fatalf("A's stream ended with %q %v, want done cancelled", res.last.kind, res.last.data)
		}
		if took > 3*time.Second {
			t.Errorf("the stop sent on B took %v to stop A's answer", took)
		}
		if ans := storedAnswer(t, b.url, "", conv); ans["status"] != "cancelled" || ans["content"] != res.text {
			t.Errorf("stored %v %q, want cancelled with the text sent, %q", ans["status"], ans["content"], res.text)
		}
		t.Logf("a stop sent on B stopped A's answer (stored cancelled) in %v", took.Round(time.Millisecond))
	})

	t.Run("cache", func(t *testing.T) {
		msg := fmt.Sprintf("What is a topology? %d [sim ttft=20ms gap=2ms tokens=12]", time.Now().UnixNano())
		first, _, r1 := completion(t, a.url, deterministic(msg, false))
		if r1.StatusCode != 200 || r1.Header.Get("X-Firstword-Cache") == "hit" {
			t.Fatalf("the first request on A: %d, cache %q", r1.StatusCode, r1.Header.Get("X-Firstword-Cache"))
		}
		started := func(url string) float64 {
			_, body := getBody(t, url+"/admin/sim")
			var stats map[string]map[string]float64
			json.Unmarshal([]byte(body), &stats)
			return stats["sim"]["started"]
		}
		before := started(b.url)
		// The cache is written after the answer ended, off its path.
		var hit bool
		for deadline := time.Now().Add(5 * time.Second); !hit && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			text, _, r := completion(t, b.url, deterministic(msg, false))
			if r.Header.Get("X-Firstword-Cache") == "hit" {
				hit = true
				if text != first {
					t.Errorf("B's hit = %q, want A's answer %q", text, first)
				}
			}
		}
		if !hit {
			t.Fatal("B never hit the answer A cached")
		}
		if after := started(b.url); after != before {
			t.Errorf("B's hit called its model (%v streams started, %v before)", after, before)
		}
	})

	t.Run("idempotency", func(t *testing.T) {
		long := map[string]any{"message": "Send me once. [sim ttft=5ms gap=10ms tokens=100]"}
		key := fmt.Sprintf("topology-%d", time.Now().UnixNano())
		cut := idemChat(t, a.url, key, long, 5)
		if cut.status != 200 || cut.meta == nil || cut.last.kind == "done" {
			t.Fatalf("the first send on A should have been dropped mid-answer: %d %q %s", cut.status, cut.last.kind, cut.body)
		}
		conv := cut.meta["conversation_id"].(string)
		retry := idemChat(t, b.url, key, long, 0)
		if retry.status != 200 || retry.headers.Get("Idempotent-Replayed") != "true" || retry.last.kind != "done" {
			t.Fatalf("the retry on B: %d %q, Idempotent-Replayed %q %s", retry.status, retry.last.kind, retry.headers.Get("Idempotent-Replayed"), retry.body)
		}
		if retry.meta["message_id"] != cut.meta["message_id"] {
			t.Errorf("the retry on B got message %v, the send on A made %v", retry.meta["message_id"], cut.meta["message_id"])
		}
		checkContinuous(t, retry.events, 0)
		if !strings.HasPrefix(retry.text, cut.text) {
			t.Errorf("the retry's text %q does not start with the dropped send's %q", retry.text, cut.text)
		}
		if ans := storedAnswer(t, b.url, "", conv); ans["status"] != "complete" || ans["content"] != retry.text {
			t.Errorf("stored %v %q, want complete with the retry's text %q", ans["status"], ans["content"], retry.text)
		}
		if n := messageCount(t, b.url, conv); n != 2 {
			t.Errorf("after a send and its retry the conversation has %d messages, want 2", n)
		}
		other := idemChat(t, b.url, key, map[string]any{"message": "Something else."}, 0)
		if other.status != 422 || !strings.Contains(other.body, `"idempotency_key_reused"`) {
			t.Errorf("the key with another body on B: %d %s; want 422 idempotency_key_reused", other.status, other.body)
		}
	})
}

// failoverStream is one of failoverUnderStreams' clients.
type failoverStream struct {
	i      int
	kind   string // live, follow or return
	conv   string
	lastID string // the last event id received
	text   string // the answer as received, rewinds applied
	done   map[string]any
	broke  int      // connections that ended with neither done nor the client leaving
	tries  int      // resume requests
	errs   []string // error events and refused resumes, in order
	fail   string   // why the client gave up
}

// apply adds one connection's events to s.
func (s *failoverStream) apply(evs []chatEvent) {
	for _, ev := range evs {
		if ev.id != "" {
			s.lastID = ev.id
		}
		switch ev.kind {
		case "meta":
			s.conv, _ = ev.data["conversation_id"].(string)
		case "delta":
			s.text += ev.data["text"].(string)
		case "rewind":
			if off, ok := ev.data["offset"].(float64); ok {
				if r := []rune(s.text); int(off) < len(r) {
					s.text = string(r[:int(off)])
				}
			}
		case "done":
			s.done = ev.data
		case "error":
			s.errs = append(s.errs, fmt.Sprintf("%v (%v)", ev.data["code"], ev.data["status"]))
		}
	}
}

// failoverUnderStreams starts 50 answers of about 4 s, alternately on A
// and B, and kills a Redis master (kill returns what failed over to
// what) about a second into them. A third of the clients read their
// stream on; a third drop it and follow the answer on the other replica
// (through the failover); a third drop it and come back once the
// failover is over. Every client whose connection broke resumes from
// its last event id, on either replica, every 200 ms, until it has the
// terminal event (45 s after the start at most). No answer may be lost:
// each client ends with done, complete, and the text it assembled is the
// stored answer, all 200 tokens of it, and the same as every other's
// (one prompt, one answer). A resume may say journal_unavailable
// meanwhile, never interrupted; and since both replicas live, no answer
// is continued by a replica that took it over (a producer that lost its
// lease in the failover is not another's).
func failoverUnderStreams(t *testing.T, a, b *process, kill func() string) {
	const n, tokens = 50, 200
	story := fmt.Sprintf("Survive the failover. [sim ttft=5ms gap=20ms tokens=%d]", tokens)
	urls := []string{a.url, b.url}
	streams := make([]*failoverStream, n)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var ready, finished sync.WaitGroup
	failedOver := make(chan struct{})
	var dropped atomic.Int64 // connections the clients dropped on purpose
	post := func(s *failoverStream, stopAt int) chatResult {
		body, _ := json.Marshal(map[string]any{"message": story})
		req, _ := http.NewRequestWithContext(ctx, "POST", urls[s.i%2]+"/v1/chat", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		signalled := false
		res, err := readChatErr(req, "", func(deltas int, ev chatEvent) bool {
			if !signalled && (stopAt > 0 && deltas == stopAt || stopAt == 0 && deltas == 10) {
				signalled = true
				ready.Done()
				return stopAt > 0
			}
			return false
		})
		if !signalled {
			ready.Done()
		}
		if err != nil {
			s.fail = "POST: " + err.Error()
		} else if res.status != 200 {
			s.fail = fmt.Sprintf("POST: %d %s", res.status, res.body)
		}
		return res
	}
	// resumeUntilDone resumes s from its last event id, on the other
	// replica first, then on each in turn, until it has the terminal
	// event.
	resumeUntilDone := func(s *failoverStream) {
		for attempt := 0; s.done == nil && s.fail == ""; attempt++ {
			if ctx.Err() != nil {
				s.fail = fmt.Sprintf("no terminal event after %d resumes", s.tries)
				return
			}
			if attempt > 0 {
				time.Sleep(200 * time.Millisecond)
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", urls[(s.i+1+attempt)%2]+"/v1/conversations/"+s.conv+"/stream", nil)
			req.Header.Set("Last-Event-ID", s.lastID)
			s.tries++
			res, err := readChatErr(req, "", func(int, chatEvent) bool { return false })
			switch {
			case err != nil:
				s.errs = append(s.errs, "resume: "+err.Error())
				continue
			case res.status == http.StatusNoContent:
				// Nothing after the cursor, and the answer has ended: the
				// terminal event has an id, so the cursor is before it.
				s.fail = "a resume found the answer ended with nothing after the cursor " + s.lastID
				return
			case res.status != 200:
				var e struct{ Error struct{ Code string } }
				if json.Unmarshal([]byte(res.body), &e) != nil || e.Error.Code == "" {
					e.Error.Code = strings.TrimSpace(res.body)
				}
				s.errs = append(s.errs, fmt.Sprintf("resume %d %s", res.status, e.Error.Code))
				continue
			}
			s.apply(res.events)
			if s.done == nil && ctx.Err() == nil {
				s.broke++
			}
		}
	}
	for i := range n {
		s := &failoverStream{i: i, kind: []string{"live", "follow", "return"}[i%3]}
		streams[i] = s
		ready.Add(1)
		finished.Add(1)
		go func() {
			defer finished.Done()
			stopAt := 0 // live: read on
			if s.kind != "live" {
				stopAt = 5 + i%11
			}
			res := post(s, stopAt)
			s.apply(res.events)
			if s.fail != "" {
				return
			}
			switch {
			case s.kind != "live":
				dropped.Add(1)
			case s.done == nil:
				s.broke++
			}
			if s.done != nil {
				return
			}
			if s.kind == "return" {
				select {
				case <-failedOver:
				case <-ctx.Done():
				}
			}
			resumeUntilDone(s)
		}()
	}
	ready.Wait()
	// The followers are attached (each reads for a few hundred ms).
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	what := kill()
	tookOver := time.Since(killed)
	close(failedOver)
	finished.Wait()
	ended := time.Since(killed)

	var reference string
	broke, brokeLive, resumed, tries, unavailable, lost := 0, 0, 0, 0, 0, 0
	var sample []string
	for _, s := range streams {
		if s.broke > 0 {
			broke++
			if s.kind == "live" {
				brokeLive++
			}
		}
		if s.tries > 0 {
			resumed++
		}
		tries += s.tries
		for _, e := range s.errs {
			if strings.Contains(e, "journal_unavailable") {
				unavailable++
				break
			}
		}
		if len(s.errs) > 0 && len(sample) < 5 {
			sample = append(sample, fmt.Sprintf("stream %d (%s): %s", s.i, s.kind, strings.Join(s.errs, "; ")))
		}
		if s.fail == "" && (s.done == nil || s.done["status"] != "complete") {
			s.fail = fmt.Sprintf("ended with %v", s.done)
		}
		if s.fail == "" && s.conv != "" {
			ans := storedAnswer(t, a.url, "", s.conv)
			switch {
			case ans["status"] != "complete":
				s.fail = fmt.Sprintf("stored %v", ans["status"])
			case ans["content"] != s.text:
				s.fail = fmt.Sprintf("the client assembled\n%q\nstored\n%q", s.text, ans["content"])
			case outputTokens(ans) != tokens:
				s.fail = fmt.Sprintf("stored %v output tokens, want the whole answer's %d", outputTokens(ans), tokens)
			case s.done["continued"] == true:
				// Both replicas lived: no answer is another's to continue.
				s.fail = "the answer was continued by another producer"
			}
		}
		for _, e := range s.errs {
			if s.fail == "" && strings.HasPrefix(e, "interrupted") {
				// The answer was stored complete: no replica died.
				s.fail = "a resume said the answer was interrupted"
			}
		}
		if s.fail == "" {
			if reference == "" {
				reference = s.text
			} else if s.text != reference {
				s.fail = fmt.Sprintf("the client assembled\n%q\nanother client of the same prompt\n%q", s.text, reference)
			}
		}
		if s.fail != "" {
			lost++
			t.Errorf("stream %d (%s, %s, %d resumes, errors %q): lost: %s", s.i, s.kind, s.conv, s.tries, s.errs, s.fail)
		}
	}
	t.Logf("failover %s in %v; every stream ended %v after the kill", what, tookOver.Round(time.Millisecond), ended.Round(time.Millisecond))
	t.Logf("%d streams: %d dropped by their clients, %d broke (%d of them read live), %d resumed (%d resume requests), %d saw journal_unavailable, %d lost",
		n, dropped.Load(), broke, brokeLive, resumed, tries, unavailable, lost)
	for _, s := range sample {
		t.Logf("  %s", s)
	}
	for name, p := range map[string]*process{"A": a, "B": b} {
		for msg, n := range warnings(p, killed) {
			t.Logf("replica %s logged %d× %s", name, n, msg)
		}
	}
}

// outputTokens is a stored answer's usage.output_tokens (-1: none).
func outputTokens(ans map[string]any) int {
	u, _ := ans["usage"].(map[string]any)
	if n, ok := u["output_tokens"].(float64); ok {
		return int(n)
	}
	return -1
}

// warnings counts the warnings and errors p logged since since, by
// message and error.
func warnings(p *process, since time.Time) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(p.log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || (rec["level"] != "WARN" && rec["level"] != "ERROR") {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["time"])); err == nil && at.Before(since) {
			continue
		}
		msg := fmt.Sprintf("%v: %v", rec["msg"], rec["err"])
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		out[msg]++
	}
	return out
}
