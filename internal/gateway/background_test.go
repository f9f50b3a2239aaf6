package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
)

// backgroundConfig serves quick answers with a long timeout; %s is the
// resume section (the journal).
const backgroundConfig = `
heartbeat: 200ms
auth: {cache_ttl: 50ms}
providers:
  sim: {type: sim}
models:
  fast:
    timeout: 60s
    deployments: [{provider: sim, model: small}]
%s
`

// backgroundJournals are the journals background mode is tested on:
// memory always, Redis when FIRSTWORD_TEST_REDIS_URL is set.
func backgroundJournals(t *testing.T) map[string]string {
	j := map[string]string{"memory": "resume: {journal: memory}"}
	if os.Getenv("FIRSTWORD_TEST_REDIS_URL") != "" {
		j["redis"] = "resume: {journal: redis, url_env: FIRSTWORD_TEST_REDIS_URL}"
	} else {
		t.Log("FIRSTWORD_TEST_REDIS_URL is not set: background mode on the Redis journal is not tested")
	}
	return j
}

func backgroundGateway(t *testing.T, resume string) *gatewaytest.Gateway {
	return gatewaytest.Start(t, gatewaytest.MustParseEnv(t, strings.Replace(backgroundConfig, "%s", resume, 1)))
}

// sdkClientKey is sdkClient with an API key.
func sdkClientKey(base, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// TestOpenAISDKBackground drives background mode with the official OpenAI
// Go SDK, on each journal: a streamed background response broken off
// mid-answer and resumed with starting_after, a polled one, a cancelled
// one, and another tenant's key, which finds none of them.
func TestOpenAISDKBackground(t *testing.T) {
	for name, resume := range backgroundJournals(t) {
		t.Run(name, func(t *testing.T) {
			gw := backgroundGateway(t, resume)
			acme := newKey(t, gw.Store(), "acme", "", false)
			globex := newKey(t, gw.Store(), "globex", "", false)
			time.Sleep(100 * time.Millisecond) // past auth.cache_ttl: keys are required now
			client, other := sdkClientKey(gw.URL, acme), sdkClientKey(gw.URL, globex)
			t.Run("resume", func(t *testing.T) {
				// 48 events: created, in_progress, the item and its
				// part added, 40 deltas, three .done, completed.
				for _, breakAt := range []int64{0, 1, 4, 20, 46} {
					resumeAfter(t, gw, client, breakAt)
				}
			})
			t.Run("poll", func(t *testing.T) { pollUntilDone(t, client) })
			t.Run("cancel", func(t *testing.T) { cancelLong(t, gw, client) })
			t.Run("another tenant", func(t *testing.T) { anotherTenant(t, client, other) })
		})
	}
}

// collect reads a Responses event stream to its end, checking that the
// sequence numbers run on from after+1 with no gap or duplicate; it stops
// after the event numbered stopAt (-1: at the end).
func collect(t *testing.T, stream interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
	Close() error
}, after, stopAt int64) (evs []responses.ResponseStreamEventUnion) {
	t.Helper()
	defer stream.Close()
	for stream.Next() {
		ev := stream.Current()
		if want := after + 1 + int64(len(evs)); ev.SequenceNumber != want {
			t.Fatalf("event %q has sequence_number %d, want %d (a gap or a duplicate)", ev.Type, ev.SequenceNumber, want)
		}
		evs = append(evs, ev)
		if ev.SequenceNumber == stopAt {
			return evs
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

func deltas(evs []responses.ResponseStreamEventUnion) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == "response.output_text.delta" {
			b.WriteString(ev.Delta)
		}
	}
	return b.String()
}

// resumeAfter creates a streamed background response, breaks off after
// the event numbered breakAt and resumes after it: the two streams'
// events run on with no gap or duplicate, their text is the completed
// response's output text, which GET /v1/responses/{id} answers too, and
// the upstream was never cancelled.
func resumeAfter(t *testing.T, gw *gatewaytest.Gateway, client openai.Client, breakAt int64) {
	ctx := context.Background()
	cancelled := gw.Sim("sim").Stats().Cancelled
	first := collect(t, client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "fast", Input: input("Tell me a story. [sim ttft=5ms gap=2ms tokens=40]"), Background: openai.Bool(true),
	}), -1, breakAt)
	if len(first) == 0 || first[0].Type != "response.created" || first[0].Response.Status != "queued" || !first[0].Response.Background {
		t.Fatalf("first event: %+v", first)
	}
	id := first[0].Response.ID
	rest := collect(t, client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(breakAt)}), breakAt, -1)
	if len(rest) == 0 || rest[len(rest)-1].Type != "response.completed" {
		t.Fatalf("break at %d: the resumed stream ended with %+v", breakAt, rest)
	}
	final := rest[len(rest)-1].Response
	if got := deltas(first) + deltas(rest); got != outputText(&final) || got == "" {
		t.Errorf("break at %d: streamed %q, completed with %q", breakAt, got, outputText(&final))
	}
	r, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || outputText(r) != outputText(&final) || r.Usage.OutputTokens != 40 || !r.Background {
		t.Errorf("break at %d: GET answered %s", breakAt, r.RawJSON())
	}
	if n := gw.Sim("sim").Stats().Cancelled; n != cancelled {
		t.Errorf("break at %d: the upstream was cancelled when the client broke off", breakAt)
	}
	// The whole stream again, from its start (no starting_after).
	all := collect(t, client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), -1, -1)
	if deltas(all) != outputText(&final) || len(all) != len(first)+len(rest) {
		t.Errorf("break at %d: a replay from the start has %d events, %q", breakAt, len(all), deltas(all))
	}
}

// pollUntilDone creates a background response without streaming: it is
// answered at once, queued, and polling it sees it complete.
func pollUntilDone(t *testing.T, client openai.Client) {
	ctx := context.Background()
	start := time.Now()
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "fast", Input: input("Go on. [sim ttft=200ms gap=5ms tokens=30]"), Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "queued" || !r.Background || len(r.Output) != 0 {
		t.Fatalf("create answered %s", r.RawJSON())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("create took %v: it should answer before the upstream's first token", d)
	}
	seen := map[responses.ResponseStatus]bool{}
	for deadline := time.Now().Add(20 * time.Second); r.Status == "queued" || r.Status == "in_progress"; {
		if time.Now().After(deadline) {
			t.Fatalf("still %s", r.Status)
		}
		time.Sleep(20 * time.Millisecond)
		if r, err = client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil {
			t.Fatal(err)
		}
		seen[r.Status] = true
	}
	if r.Status != "completed" || outputText(r) == "" || r.Usage.OutputTokens != 30 {
		t.Errorf("final: %s", r.RawJSON())
	}
	if !seen["in_progress"] {
		t.Errorf("polling never saw it in_progress (saw %v)", seen)
	}
}

// cancelLong cancels a long background response while a client streams
// it: the cancel answers it cancelled, the stream ends with OpenAI's
// response.failed carrying status cancelled, the upstream is cancelled,
// metering records what was produced, and cancelling again answers the
// same.
func cancelLong(t *testing.T, gw *gatewaytest.Gateway, client openai.Client) {
	ctx := context.Background()
	cancelled := gw.Sim("sim").Stats().Cancelled
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "fast", Input: input("Go on and on. [sim ttft=5ms gap=5ms tokens=5000]"), Background: openai.Bool(true),
	})
	var id string
	var r *responses.Response
	evs := 0
	for stream.Next() {
		ev := stream.Current()
		evs++
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		if ev.Type == "response.output_text.delta" && r == nil && ev.SequenceNumber >= 10 {
			var err error
			if r, err = client.Responses.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Type == "response.failed" {
			if ev.Response.Status != "cancelled" || len(ev.Response.Output) != 0 {
				t.Errorf("the stream's last event: %s", ev.RawJSON())
			}
			break
		}
	}
	stream.Close()
	if r == nil || r.Status != "cancelled" || r.ID != id {
		t.Fatalf("cancel answered %+v", r)
	}
	if r.Usage.OutputTokens == 0 || r.Usage.OutputTokens >= 5000 {
		t.Errorf("usage %+v, want what was produced before the cancel", r.Usage)
	}
	if n := gw.Sim("sim").Stats().Cancelled; n != cancelled+1 {
		t.Errorf("sim cancelled %d streams, want the one", n-cancelled)
	}
	again, err := client.Responses.Cancel(ctx, id)
	if err != nil || again.Status != "cancelled" {
		t.Errorf("a second cancel: %v, %v", again, err)
	}
	got, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.Status != "cancelled" {
		t.Errorf("GET after the cancel: %v, %v", got, err)
	}
	var rec metering.Record
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var ok bool
		if rec, ok = gw.Meter().Find(id); ok {
			break
		}
	}
	if rec.Status != metering.StatusCancelled || int64(rec.Usage.OutputTokens) != r.Usage.OutputTokens {
		t.Errorf("metered %s with %d output tokens, want cancelled with %d", rec.Status, rec.Usage.OutputTokens, r.Usage.OutputTokens)
	}
}

// anotherTenant: another tenant's key finds none of a tenant's
// background responses, by any route.
func anotherTenant(t *testing.T, client, other openai.Client) {
	ctx := context.Background()
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "fast", Input: input("secret [sim ttft=5ms gap=5ms tokens=200]"), Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	is404 := func(what string, err error) {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Errorf("%s with another tenant's key: %v, want 404", what, err)
		}
	}
	_, err = other.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	is404("GET", err)
	s := other.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{})
	for s.Next() {
		t.Errorf("another tenant's stream has an event: %s", s.Current().RawJSON())
	}
	is404("GET ?stream=true", s.Err())
	_, err = other.Responses.Cancel(ctx, r.ID)
	is404("cancel", err)
	// The owner still has it, running.
	if got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || got.Status == "cancelled" {
		t.Errorf("the owner's GET: %v, %v", got, err)
	}
	if _, err := client.Responses.Cancel(ctx, r.ID); err != nil {
		t.Error(err)
	}
}

// TestBackgroundAcrossReplicas: two gateways share the Redis journal: a
// background response created on A is resumed, read and cancelled on B.
func TestBackgroundAcrossReplicas(t *testing.T) {
	if os.Getenv("FIRSTWORD_TEST_REDIS_URL") == "" {
		t.Skip("FIRSTWORD_TEST_REDIS_URL is not set: background mode across replicas needs the Redis journal")
	}
	resume := "resume: {journal: redis, url_env: FIRSTWORD_TEST_REDIS_URL}"
	a, b := backgroundGateway(t, resume), backgroundGateway(t, resume)
	ca, cb := sdkClient(a.URL), sdkClient(b.URL)
	ctx := context.Background()
	first := collect(t, ca.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "fast", Input: input("Go on. [sim ttft=5ms gap=5ms tokens=3000]"), Background: openai.Bool(true),
	}), -1, 8)
	id := first[0].Response.ID
	more := collect(t, cb.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(8)}), 8, 20)
	if len(more) != 12 {
		t.Fatalf("resumed on B: %d events", len(more))
	}
	if r, err := cb.Responses.Get(ctx, id, responses.ResponseGetParams{}); err != nil || r.Status != "in_progress" {
		t.Fatalf("GET on B: %v, %v", r, err)
	}
	r, err := cb.Responses.Cancel(ctx, id)
	if err != nil || r.Status != "cancelled" {
		t.Fatalf("cancel on B: %v, %v", r, err)
	}
	if a.Sim("sim").Stats().Cancelled != 1 {
		t.Errorf("A's upstream was not cancelled: %+v", a.Sim("sim").Stats())
	}
	rest := collect(t, cb.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(20)}), 20, -1)
	if last := rest[len(rest)-1]; last.Type != "response.failed" || last.Response.Status != "cancelled" {
		t.Errorf("B's resumed stream ended with %s", last.RawJSON())
	}
}

// TestBackgroundHTTP: the edge cases, over plain HTTP.
func TestBackgroundHTTP(t *testing.T) {
	gw := backgroundGateway(t, "resume: {journal: memory}")
	post := func(body string) (int, map[string]any) {
		t.Helper()
		code, b := send(t, "POST", gw.URL+"/v1/responses", "", body)
		var v map[string]any
		json.Unmarshal([]byte(b), &v)
		return code, v
	}
	errOf := func(v map[string]any) map[string]any { e, _ := v["error"].(map[string]any); return e }

	t.Run("store false", func(t *testing.T) {
		code, v := post(`{"model":"fast","input":"hi","background":true,"store":false}`)
		if code != 400 || errOf(v)["param"] != "background" || !strings.Contains(errOf(v)["message"].(string), "store=true") {
			t.Errorf("%d %v", code, v)
		}
	})
	t.Run("unknown ids", func(t *testing.T) {
		for _, path := range []string{"/v1/responses/resp_nope", "/v1/responses/resp_nope?stream=true", "/v1/responses/msg_abc"} {
			if code, body := send(t, "GET", gw.URL+path, "", ""); code != 404 || !strings.Contains(body, "not found") {
				t.Errorf("GET %s: %d %s", path, code, body)
			}
		}
		if code, _ := send(t, "POST", gw.URL+"/v1/responses/resp_nope/cancel", "", ""); code != 404 {
			t.Errorf("cancel of an unknown id: %d", code)
		}
	})
	t.Run("not in the background", func(t *testing.T) {
		// firstword keeps no other responses: they cannot be read back
		// or cancelled.
		code, v := post(`{"model":"fast","input":"hi [sim ttft=1ms gap=1ms tokens=3]"}`)
		if code != 200 || v["status"] != "completed" || v["background"] != nil {
			t.Fatalf("%d %v", code, v)
		}
		id := v["id"].(string)
		if code, _ := send(t, "GET", gw.URL+"/v1/responses/"+id, "", ""); code != 404 {
			t.Errorf("GET of a foreground response: %d", code)
		}
		if code, _ := send(t, "POST", gw.URL+"/v1/responses/"+id+"/cancel", "", ""); code != 404 {
			t.Errorf("cancel of a foreground response: %d", code)
		}
	})
	t.Run("finished", func(t *testing.T) {
		code, v := post(`{"model":"fast","input":"hi [sim ttft=1ms gap=1ms tokens=3]","background":true}`)
		if code != 200 || v["status"] != "queued" {
			t.Fatalf("%d %v", code, v)
		}
		id := v["id"].(string)
		waitStatus(t, gw.URL, id, "completed")
		code, body := send(t, "POST", gw.URL+"/v1/responses/"+id+"/cancel", "", "")
		if code != 400 || !strings.Contains(body, "Cannot cancel a completed response.") {
			t.Errorf("cancel of a completed response: %d %s", code, body)
		}
		// A cursor at or past the end: an empty stream.
		for _, after := range []string{"200", "1000000"} {
			resp := getStream(t, gw.URL+"/v1/responses/"+id+"?stream=true&starting_after="+after)
			if evs := gatewaytest.ReadEvents(resp.Body); resp.StatusCode != 200 || len(evs) != 0 {
				t.Errorf("starting_after=%s: %d, %d events", after, resp.StatusCode, len(evs))
			}
			resp.Body.Close()
		}
		for _, q := range []string{"stream=true&starting_after=abc", "stream=true&starting_after=-2", "stream=maybe"} {
			if code, _ := send(t, "GET", gw.URL+"/v1/responses/"+id+"?"+q, "", ""); code != 400 {
				t.Errorf("%s: %d, want 400", q, code)
			}
		}
		// The query's stream, as OpenAI documents it, is the whole
		// stream, with OpenAI's framing and no ids.
		resp := getStream(t, gw.URL+"/v1/responses/"+id+"?stream=true")
		evs := gatewaytest.ReadEvents(resp.Body)
		resp.Body.Close()
		if len(evs) < 4 || evs[0].Name != "response.created" || evs[len(evs)-1].Name != "response.completed" {
			t.Errorf("replay: %+v", evs)
		}
	})
	t.Run("client drops before the first token", func(t *testing.T) {
		// The connection is closed right after response.created: the
		// answer goes on, and a replay from the start has all of it.
		resp := gatewaytest.PostPath(t, gw.URL, "/v1/responses", `{"model":"fast","input":"hi [sim ttft=300ms gap=1ms tokens=20]","background":true,"stream":true}`)
		br := bufio.NewReader(resp.Body)
		head, _ := br.ReadString('\n')
		data, _ := br.ReadString('\n')
		resp.Body.Close()
		var created struct {
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if head != "event: response.created\n" || json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &created) != nil {
			t.Fatalf("the stream began with %q %q", head, data)
		}
		id := created.Response.ID
		waitStatus(t, gw.URL, id, "completed")
		resp = getStream(t, gw.URL+"/v1/responses/"+id+"?stream=true")
		var text strings.Builder
		for _, ev := range gatewaytest.ReadEvents(resp.Body) {
			if ev.Name == "response.output_text.delta" {
				var d struct{ Delta string }
				json.Unmarshal([]byte(ev.Data), &d)
				text.WriteString(d.Delta)
			}
		}
		resp.Body.Close()
		_, v := gatewaytest.GetJSON(t, gw.URL+"/v1/responses/"+id, "")
		out := v["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
		if text.String() == "" || text.String() != out {
			t.Errorf("replayed %q, output %q", text.String(), out)
		}
	})
}

// waitStatus polls GET /v1/responses/{id} until it has status.
func waitStatus(t *testing.T, url, id, status string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		code, v := gatewaytest.GetJSON(t, url+"/v1/responses/"+id, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %v", id, code, v)
		}
		if v["status"] == status {
			return v
		}
	}
	t.Fatalf("%s never became %s", id, status)
	return nil
}

func getStream(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
