package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/wire/responses"
)

// TestAsItStands: the response object GET answers, from what a journal
// holds at each moment of a response's life.
func TestAsItStands(t *testing.T) {
	enc := responses.EventEncoder{ID: "resp_1", Model: "m", Background: true}
	var evs []journal.Event
	add := func(b []byte) {
		for len(b) > 0 {
			ev, rest, _ := strings.Cut(string(b), "\n\n")
			typ, data := splitEvent([]byte(ev))
			kind := journal.KindDelta
			if typ == "response.completed" || typ == "response.failed" {
				kind = journal.KindError
			}
			evs = append(evs, journal.Event{Seq: int64(len(evs)), Kind: kind, Data: data})
			b = []byte(rest)
		}
	}
	evs = append(evs, journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{"tenant":"t"}`)})
	add(enc.Start(nil))
	started := len(evs)
	add(enc.Chunk(nil, &chat.Chunk{Text: "Hi."}))
	add(enc.Chunk(nil, &chat.Chunk{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "c", Name: "f", Arguments: "{}"}}}))
	called := len(evs) // the message is done, the call is not
	add(enc.Finish(nil, chat.FinishToolCalls, &chat.Usage{InputTokens: 2, OutputTokens: 3}))

	type out struct {
		Status string            `json:"status"`
		Output []json.RawMessage `json:"output"`
		Error  *struct {
			Code string `json:"code"`
		} `json:"error"`
		Usage *struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
		Background bool `json:"background"`
	}
	for _, tt := range []struct {
		name    string
		snap    journal.Snapshot
		status  string
		outputs int
		errCode string
		usage   bool
	}{
		{"started", journal.Snapshot{Events: evs[:started]}, "in_progress", 0, "", false},
		{"a message done", journal.Snapshot{Events: evs[:called]}, "in_progress", 1, "", false},
		{"completed", journal.Snapshot{Events: evs, Ended: true}, "completed", 2, "", true},
		{"its server died", journal.Snapshot{Events: evs[:called], Lost: true}, "failed", 1, "server_error", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, status := asItStands(tt.snap)
			var o out
			if err := json.Unmarshal(obj, &o); err != nil {
				t.Fatalf("%v: %s", err, obj)
			}
			code := ""
			if o.Error != nil {
				code = o.Error.Code
			}
			got := []any{status, o.Status, len(o.Output), code, o.Usage != nil, o.Background}
			want := []any{tt.status, tt.status, tt.outputs, tt.errCode, tt.usage, true}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got):\n%s\n%s", d, obj)
			}
		})
	}
}

// TestEventType: the type of an event's data, written first by the
// encoder or anywhere by others.
func TestEventType(t *testing.T) {
	for data, want := range map[string]string{
		`{"type":"response.created","sequence_number":0}`: "response.created",
		`{"sequence_number":0,"type":"error"}`:            "error",
		`not json`:                                        "",
		`{"type":"`:                                       "",
	} {
		if got := eventType([]byte(data)); got != want {
			t.Errorf("eventType(%s) = %q, want %q", data, got, want)
		}
	}
}

// backgroundServer serves an alias "m" answering n words, gap apart.
func backgroundServer(t *testing.T, j journal.Journal, life context.Context, n int, gap time.Duration) (*httptest.Server, *metering.Memory) {
	t.Helper()
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: slow(n, gap)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	meter := metering.NewMemory(10)
	srv := httptest.NewUnstartedServer(New(Options{Routes: noLevers(r), Models: r, Meter: meter, Journal: j}))
	srv.Config.BaseContext = func(net.Listener) context.Context { return WithLifetime(life) }
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, meter
}

func postBody(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// TestBackgroundWithoutJournal: a server without a journal refuses
// background mode, and finds no response.
func TestBackgroundWithoutJournal(t *testing.T) {
	srv, _ := backgroundServer(t, nil, context.Background(), 3, time.Millisecond)
	code, v := postBody(t, srv.URL, `{"model":"m","input":"hi","background":true}`)
	if e, _ := v["error"].(map[string]any); code != 400 || e["param"] != "background" {
		t.Errorf("%d %v", code, v)
	}
	resp, err := http.Get(srv.URL + "/v1/responses/resp_x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET: %d", resp.StatusCode)
	}
}

// TestBackgroundEndsWithTheServer: a background response whose client is
// answered at once goes on after it, and ends with the server: failed,
// saying the server shut down, and metered interrupted.
func TestBackgroundEndsWithTheServer(t *testing.T) {
	j := journal.NewMemory(journal.Options{})
	defer j.Close()
	life, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	srv, meter := backgroundServer(t, j, life, 1000, 5*time.Millisecond)
	code, v := postBody(t, srv.URL, `{"model":"m","input":"hi","background":true}`)
	if code != 200 || v["status"] != "queued" {
		t.Fatalf("%d %v", code, v)
	}
	id := v["id"].(string)
	get := func() map[string]any {
		resp, err := http.Get(srv.URL + "/v1/responses/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return v
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if snap, _ := j.Snapshot(context.Background(), id); len(snap.Events) > 10 {
			break // some words are out
		}
		if time.Now().After(deadline) {
			t.Fatal("never in progress")
		}
	}
	if v := get(); v["status"] != "in_progress" {
		t.Fatalf("GET while it is produced: %v", v)
	}
	stop(chat.ErrShutdown)
	var rec metering.Record
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var ok bool
		if rec, ok = meter.Find(id); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not metered")
		}
	}
	if rec.Status != metering.StatusInterrupted || rec.Usage.OutputTokens == 0 {
		t.Errorf("metered %s, %d output tokens", rec.Status, rec.Usage.OutputTokens)
	}
	v = get()
	if e, _ := v["error"].(map[string]any); v["status"] != "failed" || e["code"] != "server_shutting_down" {
		t.Errorf("after the server's end: %v", v)
	}
}

// TestRetrieveParams: stream and starting_after from the query or a JSON
// body, the query first.
func TestRetrieveParams(t *testing.T) {
	s := New(Options{})
	for _, tt := range []struct {
		query, body string
		stream      bool
		after       int64
		bad         bool
	}{
		{"", "", false, -1, false},
		{"stream=true&starting_after=7", "", true, 7, false},
		{"starting_after=3", `{"stream":true}`, true, 3, false},
		{"stream=false", `{"stream":true,"starting_after":2}`, false, 2, false},
		{"starting_after=x", "", false, 0, true},
		{"starting_after=-5", "", false, 0, true},
		{"", `[1]`, false, 0, true},
	} {
		var body io.Reader = http.NoBody
		if tt.body != "" {
			body = strings.NewReader(tt.body)
		}
		r := httptest.NewRequest("GET", "/v1/responses/resp_1?"+tt.query, body)
		stream, after, err := s.retrieveParams(httptest.NewRecorder(), r)
		if (err != nil) != tt.bad || !tt.bad && (stream != tt.stream || after != tt.after) {
			t.Errorf("?%s %s: %v %d %v", tt.query, tt.body, stream, after, err)
		}
	}
}
