package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Issue 20: the fleet script (deploy/local/fleet) brings up three real
// replicas on one PostgreSQL schema and one Redis behind nginx, and these
// tests drive it through nginx the way users would: a rolling deploy and a
// kill -9 under 50 streaming conversations, the shared cache, and the
// metrics and budget summed over the replicas.

// fleetLease is the resume lease the fleet runs with: a killed replica's
// answers are interrupted within it (plus the sweep's second).
const fleetLease = 1500 * time.Millisecond

// fleetModels is the fleet's FLEET_MODELS: the simulated provider, with
// answers that take a few seconds when the test asks for it.
const fleetModels = `providers:
  sim: {type: sim}
models:
  chat: {timeout: 60s, deployments: [{provider: sim, model: small}]}
chat: {checkpoint_interval: 200ms}
`

// fleet is a running deploy/local/fleet.
type fleet struct {
	t        *testing.T
	script   string
	env      []string
	dir      string
	url      string   // nginx
	replicas []string // each replica's own URL, 1..3 at 0..2
}

// startFleet runs "deploy/local/fleet up" on free ports with a schema of
// its own, skipping without nginx, PostgreSQL, Redis or the tools the
// script needs, and "fleet down" at the end of the test.
func startFleet(t *testing.T, redisURL string) *fleet {
	t.Helper()
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			t.Skip("skipped: nginx is not installed (apt-get install -y nginx-light; .ci/run installs it)")
		}
	}
	for _, tool := range []string{"bash", "psql", "redis-cli", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: the fleet script needs %s, which is not installed", tool)
		}
	}
	pg, err := neturl.Parse(pgSchema(t, "the fleet tests"))
	if err != nil {
		t.Fatal(err)
	}
	q := pg.Query()
	schema := q.Get("search_path")
	q.Del("search_path")
	pg.RawQuery = q.Encode()

	dir := t.TempDir()
	models := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(models, []byte(fleetModels), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 4)
	f := &fleet{t: t, script: "../../deploy/local/fleet", dir: filepath.Join(dir, "state")}
	f.env = append(os.Environ(),
		"FLEET_DIR="+f.dir,
		"FLEET_PORT="+strconv.Itoa(port),
		"FLEET_BIN="+binary(t),
		"FLEET_POSTGRES_URL="+pg.String(),
		"FLEET_SCHEMA="+schema,
		"FLEET_REDIS_URL="+redisURL,
		"FLEET_MODELS="+models,
		"FLEET_SHUTDOWN_DELAY=1s",
		"FLEET_SHUTDOWN_TIMEOUT=30s",
		"FLEET_LEASE="+fleetLease.String(),
		"FLEET_HEARTBEAT=2s",
	)
	out, err := f.run("up")
	t.Cleanup(func() {
		defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		if _, err := f.run("down"); err != nil {
			t.Errorf("fleet down: %v", err)
		}
		if t.Failed() {
			f.logs()
		}
	})
	if err != nil {
		t.Fatalf("fleet up: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f.url = lines[len(lines)-1]
	if f.url != fmt.Sprintf("http://127.0.0.1:%d", port) {
		t.Fatalf("fleet up's last line is %q, want the URL", f.url)
	}
	for n := 1; n <= 3; n++ {
		f.replicas = append(f.replicas, fmt.Sprintf("http://127.0.0.1:%d", port+n))
	}
	return f
}

// freePorts finds n consecutive free loopback ports and returns the
// first. They are below Linux's ephemeral range (32768 and up), where the
// ports other tests' listeners on :0 get are not, so none of those takes
// one between this check and the fleet's start.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		base := 20000 + mathrand.IntN(12000)
		lns := []net.Listener{}
		for i := 0; i < n; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				break
			}
			lns = append(lns, l)
		}
		for _, l := range lns {
			l.Close()
		}
		if len(lns) == n {
			return base
		}
	}
	t.Fatal("no free consecutive ports")
	return 0
}

// run runs the fleet script with args; its stdout is the answer, its
// stderr goes to the test log when the test fails.
func (f *fleet) run(args ...string) (string, error) {
	return f.runEnv(f.env, args...)
}

// runEnv runs the fleet script with args in the environment env.
func (f *fleet) runEnv(env []string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{f.script}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), err
}

// dirOnly is the environment with FLEET_DIR the only fleet setting, and
// more, if any: the commands after up read the rest from what up kept.
func (f *fleet) dirOnly(more ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "FLEET_") {
			env = append(env, e)
		}
	}
	return append(append(env, "FLEET_DIR="+f.dir), more...)
}

// pid is replica n's process id (1-based).
func (f *fleet) pid(n int) int {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("replica%d.pid", n)))
	if err != nil {
		f.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		f.t.Fatal(err)
	}
	return pid
}

func (f *fleet) logs() {
	b, _ := os.ReadFile(filepath.Join(f.dir, "nginx-error.log"))
	var odd []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.Contains(line, "Connection refused") && !strings.Contains(line, "temporarily disabled") && !strings.Contains(line, "while reading upstream") {
			odd = append(odd, line)
		}
	}
	f.t.Logf("nginx's errors other than refused connections and streams cut by a kill:\n%s", strings.Join(odd[:min(len(odd), 30)], "\n"))
	for _, name := range []string{"replica1.log", "replica2.log", "replica3.log", "nginx-error.log"} {
		b, _ := os.ReadFile(filepath.Join(f.dir, name))
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		f.t.Logf("%s (end):\n%s", name, b)
	}
}

// nginxStatuses counts the statuses in nginx's access log after its
// first skip lines, and returns the number of lines.
func (f *fleet) nginxStatuses(skip int) (map[int]int, int) {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "nginx-access.log"))
	if err != nil {
		f.t.Fatal(err)
	}
	counts := map[int]int{}
	re := regexp.MustCompile(`" (\d{3}) `)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for _, line := range lines[min(skip, len(lines)):] {
		if m := re.FindStringSubmatch(line); m != nil {
			code, _ := strconv.Atoi(m[1])
			counts[code]++
		}
	}
	return counts, len(lines)
}

// listenerCloses is what the replicas logged, in their logs' order, as
// they closed their listeners (gateway.quiesce).
func (f *fleet) listenerCloses() []string {
	var lines []string
	for n := 1; n <= 3; n++ {
		b, _ := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("replica%d.log", n)))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `msg="shutting down: no connection is waiting to be served"`) || strings.Contains(line, `msg="shutting down with connections not served yet"`) {
				lines = append(lines, fmt.Sprintf("replica %d: %s", n, line))
			}
		}
	}
	return lines
}

// refusals counts nginx's connect() failures: requests that met a
// replica's closed port and went to the next one.
func (f *fleet) refusals() int {
	b, _ := os.ReadFile(filepath.Join(f.dir, "nginx-error.log"))
	return strings.Count(string(b), "Connection refused")
}

// turn is one /v1/chat turn as a client saw it over all its connections.
type turn struct {
	message     string
	conv        string
	events      []chatEvent // every event received, over every connection
	text        string      // the deltas' text
	last        chatEvent   // the terminal event (done or error), if any
	connections int
	rewound     int // rewind events
	statuses    []int
	failed      []string // each request that got no response or a 5xx, each stream that broke
	ended       time.Time
	err         error
}

// fleetClient is a client that resumes from its last event id whenever
// its connection breaks, as a browser's EventSource does.
type fleetClient struct {
	http *http.Client
	url  string
}

// Its connections are kept alive and reused request after request, as
// browsers and SDKs do, and it sends no Idempotency-Key: a POST that
// fails on a reused connection (the front door closed it as the request
// went out) is not sent again, since Go's transport resends only
// idempotent requests. A front door that closes its clients' idle
// connections during a deploy (an nginx reload does) shows up here as
// an error.
func newFleetClient(t *testing.T, url string) *fleetClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &fleetClient{url: url, http: &http.Client{Transport: tr}}
}

// chat posts a turn and follows it to its terminal event, resuming
// through the same URL when a connection ends before it.
func (c *fleetClient) chat(message string) turn {
	tr := turn{message: message}
	body, _ := json.Marshal(map[string]any{"message": message})
	req, _ := http.NewRequest("POST", c.url+"/v1/chat", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for attempt := 0; ; attempt++ {
		done, err := c.follow(&tr, req)
		if done {
			return tr
		}
		if tr.conv == "" {
			tr.err = fmt.Errorf("no conversation id before the connection ended: %v", err)
			return tr
		}
		if attempt == 20 {
			tr.err = fmt.Errorf("no terminal event after %d connections: %v", tr.connections, err)
			return tr
		}
		time.Sleep(100 * time.Millisecond)
		req, _ = http.NewRequest("GET", c.url+"/v1/conversations/"+tr.conv+"/stream", nil)
		if n := len(tr.events); n > 0 {
			for i := n - 1; i >= 0; i-- {
				if tr.events[i].id != "" {
					req.Header.Set("Last-Event-ID", tr.events[i].id)
					break
				}
			}
		}
	}
}

// follow reads one connection's events into tr; done reports a terminal
// event (or a status that ends the turn).
func (c *fleetClient) follow(tr *turn, req *http.Request) (done bool, err error) {
	tr.connections++
	resp, err := c.http.Do(req)
	if err != nil {
		tr.failed = append(tr.failed, fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err))
		return false, err
	}
	defer resp.Body.Close()
	tr.statuses = append(tr.statuses, resp.StatusCode)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			tr.err = fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
			tr.failed = append(tr.failed, tr.err.Error())
			return true, nil
		}
		return false, fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	r := bufio.NewReader(resp.Body)
	var block []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			tr.failed = append(tr.failed, fmt.Sprintf("%s %s: the stream broke: %v", req.Method, req.URL.Path, err))
			return false, err
		}
		line = strings.TrimRight(line, "\n")
		if line != "" {
			block = append(block, line)
			continue
		}
		ev := chatEvent{at: time.Now(), raw: strings.Join(block, "\n")}
		block = block[:0]
		for _, l := range strings.Split(ev.raw, "\n") {
			switch {
			case strings.HasPrefix(l, "id: "):
				ev.id = l[4:]
			case strings.HasPrefix(l, "event: "):
				ev.kind = l[7:]
			case strings.HasPrefix(l, "data: "):
				json.Unmarshal([]byte(l[6:]), &ev.data)
			}
		}
		switch ev.kind {
		case "":
			continue
		case "meta":
			tr.conv, _ = ev.data["conversation_id"].(string)
		case "delta":
			tr.text += ev.data["text"].(string)
		case "rewind":
			// The text from offset (characters) on was never saved:
			// what follows replaces it.
			if off, ok := ev.data["offset"].(float64); ok {
				if r := []rune(tr.text); int(off) < len(r) {
					tr.text = string(r[:int(off)])
				}
			}
			tr.rewound++
		case "error":
			if ev.data["code"] == "journal_unavailable" {
				continue // the server's: resume again
			}
		}
		tr.events = append(tr.events, ev)
		if ev.kind == "done" || ev.kind == "error" {
			tr.last, tr.ended = ev, time.Now()
			return true, nil
		}
	}
}

// continuity reports the first gap or duplicate in the ids of evs: within
// a generation (<message_id>:<n>, then <message_id>:<g>:<n> after each
// take-over of the answer) the numbers go up by one; a new generation
// starts anywhere after the old one.
func continuity(evs []chatEvent) error {
	gen, next := 0, 0
	for _, ev := range evs {
		if ev.id == "" {
			continue
		}
		parts := strings.Split(ev.id, ":")
		n, err := strconv.Atoi(parts[len(parts)-1])
		g := 0
		if len(parts) == 3 {
			g, _ = strconv.Atoi(parts[1])
		}
		switch {
		case err != nil || g < gen || (g == gen && n != next):
			return fmt.Errorf("event id %q where number %d of generation %d was due", ev.id, next, gen)
		case g > gen && n < next:
			return fmt.Errorf("event id %q starts generation %d before the last of generation %d", ev.id, g, gen)
		}
		gen, next = g, n+1
	}
	return nil
}

// stored is the conversation's messages as the fleet stored them, once
// its answer is no longer streaming.
func (c *fleetClient) stored(conv string) (user, answer map[string]any, err error) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := c.http.Get(c.url + "/v1/conversations/" + conv)
		if err != nil {
			return nil, nil, err
		}
		var got struct{ Messages []map[string]any }
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, nil, fmt.Errorf("GET conversation: %d", resp.StatusCode)
		}
		if n := len(got.Messages); n >= 2 && got.Messages[n-1]["status"] != "streaming" {
			return got.Messages[n-2], got.Messages[n-1], nil
		}
	}
	return nil, nil, fmt.Errorf("the answer of %s is still streaming", conv)
}

// TestFleetSaysWhatIsMissing: without nginx the fleet script starts
// nothing, names what it needs and exits 1.
func TestFleetSaysWhatIsMissing(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("skipped: no bash")
	}
	dir := t.TempDir()
	f := &fleet{t: t, script: "../../deploy/local/fleet", dir: dir}
	f.env = append(os.Environ(), "FLEET_DIR="+dir, "FLEET_NGINX="+filepath.Join(dir, "no-nginx"), "FLEET_BIN="+filepath.Join(dir, "no-binary"))
	out, err := f.run("up")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("fleet up without nginx: %v, want exit status 1", err)
	}
	if !strings.Contains(err.Error(), "fleet: missing: nginx (Debian: apt-get install nginx-light)") {
		t.Errorf("fleet up without nginx said %q", err)
	}
	if out != "" {
		t.Errorf("fleet up without nginx printed %q on stdout", out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("fleet up without nginx left %d files in its state directory", len(entries))
	}
}

func TestFleet(t *testing.T) {
	redisURL := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if redisURL == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL not set: skipping the fleet tests")
	}
	f := startFleet(t, redisURL)
	t.Run("status", func(t *testing.T) { fleetStatus(t, f) })
	t.Run("shared cache", func(t *testing.T) { fleetSharedCache(t, f) })
	t.Run("metrics add up", func(t *testing.T) { fleetMetrics(t, f) })
	t.Run("rolling deploy", func(t *testing.T) { fleetRollingDeploy(t, f) })
	t.Run("kill -9", func(t *testing.T) { fleetKill(t, f) })
}

// fleetStatus: "fleet status" names every replica ready and ends with
// the URL, given FLEET_DIR only (up kept the rest); a restart given
// another FLEET_PORT than up was refuses, saying why, and leaves the
// fleet as it was.
func fleetStatus(t *testing.T, f *fleet) {
	out, err := f.runEnv(f.dirOnly(), "status")
	if err != nil {
		t.Fatalf("fleet status: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[len(lines)-1] != f.url {
		t.Errorf("fleet status's last line is %q, want %q", lines[len(lines)-1], f.url)
	}
	for n := 1; n <= 3; n++ {
		want := fmt.Sprintf("replica %d %s pid %d ready", n, strings.TrimPrefix(f.replicas[n-1], "http://"), f.pid(n))
		if !strings.Contains(out, want) {
			t.Errorf("fleet status does not say %q:\n%s", want, out)
		}
	}
	port, _ := strconv.Atoi(f.url[strings.LastIndexByte(f.url, ':')+1:])
	pid := f.pid(1)
	out, err = f.runEnv(f.dirOnly(fmt.Sprintf("FLEET_PORT=%d", port+10)), "restart", "1")
	want := fmt.Sprintf("fleet: FLEET_PORT is %d here, but the fleet in %s was brought up with %d", port+10, f.dir, port)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(err.Error(), want) {
		t.Errorf("fleet restart with another FLEET_PORT: %v, want exit status 1 and %q", err, want)
	}
	if f.pid(1) != pid {
		t.Errorf("the refused restart restarted replica 1")
	}
	if out, err := f.runEnv(f.dirOnly(), "status"); err != nil {
		t.Errorf("fleet status after the refused restart: %v\n%s", err, out)
	}
}

// fleetSharedCache: a deterministic completion cached through replica 1
// is a hit through replica 2 (whose model is not called) and through nginx.
func fleetSharedCache(t *testing.T, f *fleet) {
	msg := fmt.Sprintf("What is a fleet? %d [sim ttft=20ms gap=2ms tokens=12]", time.Now().UnixNano())
	first, _, r1 := completion(t, f.replicas[0], deterministic(msg, false))
	if r1.Header.Get("X-Firstword-Cache") == "hit" {
		t.Fatalf("the first request was a cache hit")
	}
	started := func(url string) float64 {
		_, body := getBody(t, url+"/admin/sim")
		var stats map[string]map[string]float64
		json.Unmarshal([]byte(body), &stats)
		return stats["sim"]["started"]
	}
	before := started(f.replicas[1])
	// The cache is written after the answer ended, off its path.
	var hit bool
	for deadline := time.Now().Add(5 * time.Second); !hit && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		text, _, r := completion(t, f.replicas[1], deterministic(msg, false))
		if r.Header.Get("X-Firstword-Cache") == "hit" {
			hit = true
			if text != first {
				t.Errorf("replica 2's hit = %q, want replica 1's answer %q", text, first)
			}
		}
	}
	if !hit {
		t.Fatal("replica 2 never hit the answer replica 1 cached")
	}
	if after := started(f.replicas[1]); after != before {
		t.Errorf("replica 2's hit called its model (%v streams started, %v before)", after, before)
	}
	if text, _, r := completion(t, f.url, deterministic(msg, false)); r.Header.Get("X-Firstword-Cache") != "hit" || text != first {
		t.Errorf("through nginx: cache %q, text %q, want a hit with %q", r.Header.Get("X-Firstword-Cache"), text, first)
	}
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape sums a counter's samples (every label set) on one replica.
func scrape(t *testing.T, url, metric string) float64 {
	t.Helper()
	code, body := getBody(t, url+"/metrics")
	if code != 200 {
		t.Fatalf("%s/metrics: %d", url, code)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, metric+"{") || strings.HasPrefix(line, metric+" ") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%s: %q", metric, line)
			}
			sum += v
		}
	}
	return sum
}

// budgetRequests is the number of requests in a replica's live budget.
func budgetRequests(t *testing.T, url, surface string) float64 {
	t.Helper()
	code, body := getBody(t, url+"/v1/budget?surface="+surface)
	var b struct{ Requests float64 }
	if code != 200 || json.Unmarshal([]byte(body), &b) != nil {
		t.Fatalf("%s/v1/budget: %d %s", url, code, body)
	}
	return b.Requests
}

// fleetMetrics: requests sent through nginx are counted once each, on
// the replica that served them: the sums over the replicas' /metrics and
// live budgets equal what was sent, and each done event's stages fit in
// its time to complete.
func fleetMetrics(t *testing.T, f *fleet) {
	const chats, completions = 12, 18
	type counts struct{ requests, ttfw, budgetChat, budgetCompletions [3]float64 }
	read := func() (c counts) {
		for i, url := range f.replicas {
			c.requests[i] = scrape(t, url, "firstword_requests_total")
			c.ttfw[i] = scrape(t, url, "firstword_ttfw_seconds_count")
			c.budgetChat[i] = budgetRequests(t, url, "chat")
			c.budgetCompletions[i] = budgetRequests(t, url, "openai")
		}
		return c
	}
	before := read()
	client := newFleetClient(t, f.url)
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := range chats {
		wg.Go(func() {
			tr := client.chat(fmt.Sprintf("count me %d [sim ttft=20ms gap=10ms tokens=10]", i))
			if tr.err != nil || tr.last.kind != "done" {
				t.Errorf("chat %d: %v, ended %q %v", i, tr.err, tr.last.kind, tr.last.data)
				failures.Add(1)
				return
			}
			timings, _ := tr.last.data["timings"].(map[string]any)
			ttc, _ := timings["ttc_ms"].(float64)
			stages, _ := timings["stages"].([]any)
			if ttc <= 0 || len(stages) == 0 {
				t.Errorf("chat %d: done has no timings: %v", i, tr.last.data)
			}
			for _, s := range stages {
				st := s.(map[string]any)
				if end, _ := st["end_ms"].(float64); end > ttc+0.001 {
					t.Errorf("chat %d: stage %v ends at %v ms, after the time to complete %v ms", i, st["name"], end, ttc)
				}
			}
		})
	}
	for i := range completions {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"chat","messages":[{"role":"user","content":"count me too %d [sim ttft=20ms gap=5ms tokens=5]"}]}`, i)
			resp, err := client.http.Post(f.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("completion %d: %v", i, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("completion %d: status %d", i, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if failures.Load() > 0 {
		t.FailNow()
	}
	// The budget and the metrics are recorded as each request ends, just
	// after its last byte: give them a moment.
	var after counts
	sum := func(a, b [3]float64) (s float64) {
		for i := range a {
			s += b[i] - a[i]
		}
		return s
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if after = read(); sum(before.requests, after.requests) >= chats+completions {
			break
		}
	}
	if got := sum(before.requests, after.requests); got != chats+completions {
		t.Errorf("firstword_requests_total summed over the replicas grew by %v, want %d", got, chats+completions)
	}
	if got := sum(before.ttfw, after.ttfw); got != chats+completions {
		t.Errorf("firstword_ttfw_seconds_count summed over the replicas grew by %v, want %d", got, chats+completions)
	}
	if got := sum(before.budgetChat, after.budgetChat); got != chats {
		t.Errorf("the replicas' chat budgets counted %v more requests, want %d", got, chats)
	}
	if got := sum(before.budgetCompletions, after.budgetCompletions); got != completions {
		t.Errorf("the replicas' openai budgets counted %v more requests, want %d", got, completions)
	}
	served := 0
	for i := range f.replicas {
		if after.requests[i] > before.requests[i] {
			served++
		}
	}
	if served < 2 {
		t.Errorf("nginx sent every request to one replica: %v -> %v", before.requests, after.requests)
	}
	t.Logf("requests per replica: %v -> %v", before.requests, after.requests)
}

// load runs clients concurrent conversations through the fleet, each
// turn after turn until stop is closed (at most maxTurns each), and
// returns every turn. Each client keeps its connections alive and reuses
// them turn after turn.
func load(f *fleet, clients, maxTurns int, directive string, stop <-chan struct{}) []turn {
	var mu sync.Mutex
	var turns []turn
	var wg sync.WaitGroup
	for i := range clients {
		client := newFleetClient(f.t, f.url) // its own connections, as a browser has
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 20 * time.Millisecond)
			for j := range maxTurns {
				tr := client.chat(fmt.Sprintf("client %d turn %d %s", i, j, directive))
				mu.Lock()
				turns = append(turns, tr)
				mu.Unlock()
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	wg.Wait()
	return turns
}

// fleetRollingDeploy (issue 35): 50 conversations stream through nginx
// while "fleet roll" runs twice: each replica in turn gets SIGTERM,
// drains and is restarted. The clients keep their connections to nginx
// alive and reuse them, and send no Idempotency-Key, so a POST that
// meets a connection closing under it is lost to them. No request of any
// client fails, and nothing of any stream breaks: every turn ends
// complete on its first connection, with the ids of one continuous
// answer, the stored answer is exactly the text the client showed, and
// no line of nginx's access log is a 5xx.
func fleetRollingDeploy(t *testing.T, f *fleet) {
	pids := [][]int{{f.pid(1), f.pid(2), f.pid(3)}}
	_, logged := f.nginxStatuses(0)
	refused := f.refusals()
	closes := f.listenerCloses()
	stop := make(chan struct{})
	rolled := make(chan error, 1)
	go func() {
		defer close(stop)
		time.Sleep(1500 * time.Millisecond)
		// The second roll is given FLEET_DIR only.
		for _, env := range [][]string{f.env, f.dirOnly()} {
			out, err := f.runEnv(env, "roll")
			if err == nil && strings.TrimSpace(out) != f.url {
				err = fmt.Errorf("fleet roll printed %q, want the URL", out)
			}
			if err != nil {
				rolled <- err
				return
			}
			var now []int
			for n := 1; n <= 3; n++ {
				b, _ := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("replica%d.pid", n)))
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				now = append(now, pid)
			}
			pids = append(pids, now)
		}
		rolled <- nil
	}()
	start := time.Now()
	// About 2.5 s an answer: each replica's drain has streams to finish.
	turns := load(f, 50, 40, "[sim ttft=50ms gap=40ms tokens=60]", stop)
	if err := <-rolled; err != nil {
		t.Fatalf("fleet roll: %v", err)
	}
	for r := 1; r < len(pids); r++ {
		for n := 1; n <= 3; n++ {
			if pids[r][n-1] == pids[r-1][n-1] {
				t.Errorf("roll %d did not restart replica %d (pid %d)", r, n, pids[r][n-1])
			}
		}
	}
	client := newFleetClient(t, f.url)
	failed, failedTurns, resumed := 0, 0, 0
	for _, tr := range turns {
		if len(tr.failed) > 0 {
			failed += len(tr.failed)
			failedTurns++
			t.Errorf("%q: %s", tr.message, strings.Join(tr.failed, "; "))
		}
		if tr.err != nil {
			t.Errorf("%q: %v (statuses %v)", tr.message, tr.err, tr.statuses)
			continue
		}
		if tr.last.kind != "done" || tr.last.data["status"] != "complete" {
			t.Errorf("%q ended %q %v, want done complete", tr.message, tr.last.kind, tr.last.data)
			continue
		}
		if err := continuity(tr.events); err != nil {
			t.Errorf("%q: %v", tr.message, err)
		}
		if tr.connections > 1 {
			resumed++
		}
		_, ans, err := client.stored(tr.conv)
		if err != nil {
			t.Errorf("%q: %v", tr.message, err)
		} else if ans["status"] != "complete" || ans["content"] != tr.text {
			t.Errorf("%q stored %v %q, want complete with the text shown %q", tr.message, ans["status"], ans["content"], tr.text)
		}
	}
	statuses, _ := f.nginxStatuses(logged)
	for code, n := range statuses {
		if code >= 500 {
			t.Errorf("nginx answered %d %d times", code, n)
		}
	}
	// Each replica stopped completing new connections before it closed
	// its listener (Linux; elsewhere the listener just closes).
	var drains []string
	filtered := 0
	for _, d := range f.listenerCloses() {
		if !slices.Contains(closes, d) {
			drains = append(drains, d)
			if strings.Contains(d, "refusing_new=true") {
				filtered++
			}
		}
	}
	if len(drains) != 6 || (runtime.GOOS == "linux" && filtered != 6) {
		t.Errorf("the replicas logged %d listener closes, %d of them after refusing new connections, want 6 and 6:\n%s", len(drains), filtered, strings.Join(drains, "\n"))
	}
	t.Logf("two rolling deploys under 50 keep-alive clients: %d turns in %v; %d failed requests in %d turns; %d turns resumed over another connection; nginx statuses %v; %d connections refused and sent to the next replica; %d listener closes, %d after refusing new connections",
		len(turns), time.Since(start).Round(time.Millisecond), failed, failedTurns, resumed, statuses, f.refusals()-refused, len(drains), filtered)
}

// fleetKill (issues 19, 33): replica 2 is killed (SIGKILL) under 50
// streaming conversations. Its clients' connections break; they resume
// through nginx on the survivors, one of which takes each killed answer
// over and continues it under the same message id: every turn ends done,
// complete, and the killed ones read as the unbroken answer does (the
// same question asked again in a new conversation), continued, with a
// rewind where the client had shown text the dead replica never
// journaled; each is stored complete with exactly the text shown; every
// user message is stored; new turns after the kill go to the survivors
// without an error.
func fleetKill(t *testing.T, f *fleet) {
	victim := f.pid(2)
	_, logged := f.nginxStatuses(0)
	var killedAt time.Time
	stop := make(chan struct{})
	close(stop) // one turn each
	killed := make(chan struct{})
	go func() {
		time.Sleep(2 * time.Second)
		killedAt = time.Now()
		syscall.Kill(victim, syscall.SIGKILL)
		close(killed)
	}()
	// About 4 s an answer: the kill lands in the middle of every one.
	const directive = "[sim ttft=50ms gap=50ms tokens=80]"
	turns := load(f, 50, 1, directive, stop)
	<-killed

	// New turns after the kill: nginx finds replica 2's port closed and
	// sends them to the survivors.
	after := load(f, 10, 1, "[sim ttft=10ms gap=5ms tokens=5]", stop)
	for _, tr := range after {
		if tr.err != nil || tr.last.kind != "done" || tr.last.data["status"] != "complete" || tr.connections != 1 {
			t.Errorf("a new turn after the kill: %v, ended %q %v over %d connections", tr.err, tr.last.kind, tr.last.data, tr.connections)
		}
	}

	client := newFleetClient(t, f.url)
	var continued []turn
	rewound := 0
	var gap time.Duration // from the kill to a continued answer's first new event, at most
	for _, tr := range turns {
		if tr.err != nil {
			t.Errorf("%q: %v (statuses %v)", tr.message, tr.err, tr.statuses)
			continue
		}
		if err := continuity(tr.events); err != nil {
			t.Errorf("%q: %v", tr.message, err)
		}
		user, ans, err := client.stored(tr.conv)
		if err != nil {
			t.Errorf("%q: %v", tr.message, err)
			continue
		}
		if user["role"] != "user" || user["content"] != tr.message {
			t.Errorf("%q: the user's message is stored as %v %q", tr.message, user["role"], user["content"])
		}
		if tr.last.kind != "done" || tr.last.data["status"] != "complete" {
			t.Errorf("%q ended %q %v, want done complete", tr.message, tr.last.kind, tr.last.data)
			continue
		}
		if ans["status"] != "complete" || ans["content"] != tr.text {
			t.Errorf("%q stored %v %q, want complete with the text shown %q", tr.message, ans["status"], ans["content"], tr.text)
		}
		if tr.last.data["continued"] == true {
			continued = append(continued, tr)
			rewound += min(tr.rewound, 1)
			if tr.connections < 2 {
				t.Errorf("%q: continued on its first connection", tr.message)
			}
			for _, ev := range tr.events {
				if strings.Count(ev.id, ":") == 2 {
					gap = max(gap, ev.at.Sub(killedAt))
					break
				}
			}
		}
	}
	if len(continued) == 0 {
		t.Error("no turn was on the killed replica")
	}
	if gap > fleetLease+5*time.Second {
		t.Errorf("a killed answer went on %v after the kill; the lease is %v", gap, fleetLease)
	}
	// The unbroken answers of the continued ones, asked again at once.
	var wg sync.WaitGroup
	clean := make([]turn, len(continued))
	for i, tr := range continued {
		wg.Go(func() { clean[i] = client.chat(tr.message) })
	}
	wg.Wait()
	for i, tr := range continued {
		if clean[i].text == "" || tr.text != clean[i].text {
			t.Errorf("%q continued reads\n%q\nthe unbroken answer\n%q", tr.message, tr.text, clean[i].text)
		}
	}
	statuses, _ := f.nginxStatuses(logged)
	for code, n := range statuses {
		if code >= 500 {
			t.Errorf("nginx answered %d %d times", code, n)
		}
	}
	t.Logf("kill -9: %d turns, %d continued elsewhere (%d of them rewound, the last %v after the kill); %d new turns after it; nginx statuses %v; %d connections refused", len(turns), len(continued), rewound, gap.Round(time.Millisecond), len(after), statuses, f.refusals())
}
