package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/firstword/firstword/internal/faultproxy"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// rowCounter counts the rows written to a test schema, by table and
// operation, with a trigger on every table: exact and at once, where
// pg_stat_user_tables lags by up to ten seconds.
type rowCounter struct {
	t    *testing.T
	conn *pgx.Conn
}

// countRows installs the counting triggers on every table of the schema
// url's search_path names (call it once the gateway has migrated it).
func countRows(t *testing.T, url string) *rowCounter {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, sql := range []string{
		`CREATE TABLE fw_row_writes (tbl text NOT NULL, op text NOT NULL)`,
		`DO $do$ BEGIN EXECUTE format($f$CREATE FUNCTION fw_count() RETURNS trigger LANGUAGE plpgsql AS $b$
			BEGIN INSERT INTO %I.fw_row_writes VALUES (TG_TABLE_NAME, TG_OP); RETURN NULL; END $b$$f$, current_schema()); END $do$`,
		`DO $do$ DECLARE r record; BEGIN
			FOR r IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'fw_row_writes' LOOP
				EXECUTE format('CREATE TRIGGER fw_count AFTER INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION fw_count()', r.tablename);
			END LOOP; END $do$`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("installing the row counter: %v", err)
		}
	}
	return &rowCounter{t: t, conn: conn}
}

// rowWrites is what a counter counted: by "op table" (e.g. "UPDATE
// messages"), and the inserts and updates in all.
type rowWrites struct {
	by               map[string]int
	inserts, updates int
}

func (w rowWrites) String() string {
	var parts []string
	for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
		for _, tbl := range []string{"conversations", "messages", "usage"} {
			if n := w.by[op+" "+tbl]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %s %d", strings.ToLower(op), tbl, n))
			}
		}
	}
	for k, n := range w.by {
		if _, tbl, _ := strings.Cut(k, " "); tbl != "conversations" && tbl != "messages" && tbl != "usage" {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(k), n))
		}
	}
	return fmt.Sprintf("%d inserts + %d updates (%s)", w.inserts, w.updates, strings.Join(parts, ", "))
}

// take returns what was counted since the last take, and starts again.
func (c *rowCounter) take() rowWrites {
	c.t.Helper()
	ctx := context.Background()
	rows, err := c.conn.Query(ctx, `WITH d AS (DELETE FROM fw_row_writes RETURNING tbl, op) SELECT op, tbl, count(*) FROM d GROUP BY op, tbl`)
	if err != nil {
		c.t.Fatal(err)
	}
	w := rowWrites{by: map[string]int{}}
	for rows.Next() {
		var op, tbl string
		var n int
		if err := rows.Scan(&op, &tbl, &n); err != nil {
			c.t.Fatal(err)
		}
		w.by[op+" "+tbl] += n
		switch op {
		case "INSERT":
			w.inserts += n
		case "UPDATE":
			w.updates += n
		}
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return w
}

// settle waits until the turn's usage row is written (the usage writer
// batches it after the last event) and a moment more for anything late,
// then takes the count.
func (c *rowCounter) settle() rowWrites {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := c.conn.QueryRow(context.Background(), `SELECT count(*) FROM fw_row_writes WHERE tbl = 'usage' AND op = 'INSERT'`).Scan(&n); err != nil {
			c.t.Fatal(err)
		}
		if n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	return c.take()
}

// rowsConfig is a gateway on PostgreSQL at the default settings but for
// the journal (and a model timeout that lets a 4 s answer end).
const rowsConfig = `
store: {driver: postgres, url: %q}
usage: {spill_path: %s}
resume: %s
providers:
  sim: {type: sim}
models:
  chat: {timeout: 60s, deployments: [{provider: sim, model: small}]}
`

// TestRowsPerTurn counts the PostgreSQL rows a /v1/chat turn writes, at
// the default settings: a 100-event answer of about half a second and
// one of about four seconds, as a conversation's first turn and as a
// later one. With the Redis journal healthy a turn writes at most 4
// rows and updates at most 2 (the journal holds the answer while it
// streams: its row is checkpointed only every few seconds); with the
// in-process journal the checkpoints are what a restart continues
// from, and stay (reported, not bounded).
func TestRowsPerTurn(t *testing.T) {
	redisURL := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if redisURL == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL not set: skipping the rows-per-turn count, which needs the Redis journal")
	}
	for _, j := range []struct{ name, resume string }{
		{"redis", fmt.Sprintf("{journal: redis, url: %q}", redisURL)},
		{"memory", "{journal: memory}"},
	} {
		t.Run(j.name, func(t *testing.T) {
			pg := pgSchema(t, "the rows-per-turn count")
			cfg := gatewaytest.MustParse(t, fmt.Sprintf(rowsConfig, pg, t.TempDir()+"/usage.spill", j.resume))
			gw := gatewaytest.Start(t, cfg)
			rows := countRows(t, pg)
			for _, turn := range []struct {
				name string
				gap  time.Duration
			}{
				{"0.5s", 5 * time.Millisecond},
				{"4s", 40 * time.Millisecond},
			} {
				directive := fmt.Sprintf("[sim ttft=20ms gap=%s tokens=100]", turn.gap)
				conv := ""
				for _, which := range []string{"first turn", "second turn"} {
					body := map[string]any{"message": "count my rows " + directive}
					if conv != "" {
						body["conversation_id"] = conv
					}
					rows.take()
					start := time.Now()
					r := chatOnce(t, gw.URL, "", body, 0)
					took := time.Since(start)
					if r.last.kind != "done" {
						t.Fatalf("%s %s: last event %v", turn.name, which, r.last)
					}
					conv = r.meta["conversation_id"].(string)
					got := rows.settle()
					t.Logf("%s journal, %s answer (%v, %d events), %s: %v", j.name, turn.name, took.Round(10*time.Millisecond), len(r.events), which, got)
					switch {
					case j.name == "redis" && (got.inserts > 4 || got.updates > 2):
						t.Errorf("%s answer, %s: %v; want at most 4 inserts and 2 updates", turn.name, which, got)
					case j.name == "memory" && turn.gap > 10*time.Millisecond && got.by["UPDATE messages"] < 5:
						// Checkpoints every half second: what a restart
						// continues from.
						t.Errorf("%s answer, %s: %v; want a checkpoint every half second", turn.name, which, got)
					}
				}
			}
		})
	}
}

// TestRowsJournalDown: when the Redis journal stops answering mid-answer,
// the answer's row is checkpointed again as without a shared journal
// (every half second while text flows), from half a lease after Redis's
// last answer: a replica that dies now leaves its row with the text
// delivered a moment before, and a replica that finds its lease lapsed
// finds its row being written (so does not take a live answer over).
// Once Redis is back, the row waits again; the answer ends complete.
func TestRowsJournalDown(t *testing.T) {
	redisURL := os.Getenv("FIRSTWORD_TEST_REDIS_URL")
	if redisURL == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL not set: skipping the rows written while the Redis journal is down")
	}
	pg := pgSchema(t, "the rows written while the Redis journal is down")
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Thaw(); p.Close() })
	u.Host = p.Addr()
	cfg := gatewaytest.MustParse(t, fmt.Sprintf(rowsConfig, pg, t.TempDir()+"/usage.spill", fmt.Sprintf("{journal: redis, url: %q}", u.String())))
	gw := gatewaytest.Start(t, cfg)
	rows := countRows(t, pg)
	lease := cfg.Resume.Lease

	// 250 deltas, 40 ms apart: 10 s. Redis stops answering after 25
	// (1 s in) and is back after 150 (6 s in).
	b, _ := json.Marshal(map[string]any{"message": "keep going [sim ttft=20ms gap=40ms tokens=250]"})
	req, _ := http.NewRequest("POST", gw.URL+"/v1/chat", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	var (
		msgID      string
		frozenAt   time.Time
		before     rowWrites
		during     rowWrites
		checkedRow bool
		texts      []chatEvent // the client's text after each delta, with its time
		text       string
	)
	r := readChat(t, req, "", func(deltas int, ev chatEvent) bool {
		switch ev.kind {
		case "meta":
			msgID, _ = ev.data["message_id"].(string)
		case "delta":
			text += ev.data["text"].(string)
			texts = append(texts, chatEvent{at: ev.at, raw: text})
		}
		switch {
		case ev.kind != "delta":
		case deltas == 25:
			before = rows.take()
			p.Freeze()
			frozenAt = time.Now()
		case deltas == 125:
			// 4 s into the outage: the row holds what the client had a
			// checkpoint interval (and the write) ago.
			var content string
			if err := rows.conn.QueryRow(context.Background(), `SELECT content FROM messages WHERE id = $1`, msgID).Scan(&content); err != nil {
				t.Errorf("reading the answer's row: %v", err)
				break
			}
			checkedRow = true
			var want string
			for _, tx := range texts {
				if time.Since(tx.at) < time.Second {
					break
				}
				want = tx.raw
			}
			if !strings.HasPrefix(text, content) || len(content) < len(want) {
				t.Errorf("4 s into the outage the row holds %d bytes; the client had %d a second before (%d now)", len(content), len(want), len(text))
			}
		case deltas == 150:
			during = rows.take()
			// Reset, then thawed: what the gateway sent into the freeze
			// is dropped, as after a real outage, rather than delivered
			// late (which the journal could take for another
			// producer's writes).
			p.Cut()
			p.Thaw()
		}
		return false
	})
	if r.last.kind != "done" || r.last.data["status"] != "complete" {
		t.Fatalf("the answer ended with %q %v, want done complete", r.last.kind, r.last.data)
	}
	after := rows.settle()
	if !checkedRow {
		t.Fatal("the row was not read during the outage")
	}
	t.Logf("before the outage (1 s): %v", before)
	t.Logf("during the outage (5 s from %v): %v", frozenAt.Format("15:04:05.000"), during)
	t.Logf("after it (4 s and the end): %v", after)
	// Checkpoints from half a lease into the outage, every half second.
	if want := int((5*time.Second-lease/2)/(500*time.Millisecond)) - 2; during.by["UPDATE messages"] < want {
		t.Errorf("during the outage: %v; want at least %d checkpoints", during, want)
	}
	if before.by["UPDATE messages"] > 0 {
		t.Errorf("before the outage: %v; want no checkpoint", before)
	}
	// After it (4 s): the final write, and a few checkpoints while the
	// journal catches up (its lease taken again at its next renewal),
	// not one every half second.
	if n := after.by["UPDATE messages"]; n > 5 {
		t.Errorf("after the outage: %v; want the final write and at most 4 checkpoints", after)
	}
	ans := storedAnswer(t, gw.URL, "", r.meta["conversation_id"].(string))
	if ans["status"] != "complete" || ans["content"] != r.text {
		t.Errorf("stored %v with %d bytes, want complete with the %d the client read", ans["status"], len(fmt.Sprint(ans["content"])), len(r.text))
	}
}
