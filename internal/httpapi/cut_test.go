package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/router"
)

// stallModel sends "Hello" and " world", then nothing until its request
// ends.
func stallModel(ctx context.Context, _ *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		for _, text := range []string{"Hello", " world"} {
			if !yield(chat.Chunk{Text: text}, nil) {
				return
			}
		}
		<-ctx.Done()
		yield(chat.Chunk{}, ctx.Err())
	}
}

// TestCutEndings: an answer the request's deadline cuts after its first
// text ends on every surface with that surface's error form, never as a
// success: Chat Completions with an error event (code timeout) and no
// finish, usage chunk or [DONE]; Responses with response.failed (a
// timeout, the text sent in its output); Messages with a timeout_error
// event. Not streamed, it is a 504 in the API's error shape. The request
// is metered as timed out, with estimated usage.
func TestCutEndings(t *testing.T) {
	srv, meter := cutServer(t, nil)

	const msg = `"messages":[{"role":"user","content":"hi"}]`
	for _, tt := range []struct {
		name, path, body string
		check            func(t *testing.T, status int, body string)
	}{
		{"chat completions, streamed", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},` + msg + `}`,
			func(t *testing.T, status int, body string) {
				inOrderOf(t, body, `"content":"Hello"`, `"content":" world"`, `data: {"error":`)
				last := lastData(body)
				if status != 200 || !strings.Contains(last, `"code":"timeout"`) || !strings.Contains(last, `"type":"timeout_error"`) {
					t.Errorf("status %d, last event %s; want the timeout error event", status, last)
				}
				if strings.Contains(body, "[DONE]") || strings.Contains(body, `"finish_reason":"`) || strings.Contains(body, `"usage":{`) {
					t.Errorf("a cut stream ends with a finish, usage or [DONE]:\n%s", body)
				}
			}},
		{"chat completions", "/v1/chat/completions", `{"model":"m",` + msg + `}`,
			func(t *testing.T, status int, body string) {
				if status != http.StatusGatewayTimeout || !strings.Contains(body, `"code":"timeout"`) || !strings.Contains(body, `"type":"timeout_error"`) {
					t.Errorf("%d %s; want 504, code timeout", status, body)
				}
			}},
		{"responses, streamed", "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`,
			func(t *testing.T, status int, body string) {
				inOrderOf(t, body, `"delta":"Hello"`, "event: response.failed\n")
				var ev struct {
					Response struct {
						Status string
						Error  struct{ Code string }
						Output []struct {
							Content []struct{ Text string }
						}
					}
				}
				if err := json.Unmarshal([]byte(lastData(body)), &ev); err != nil {
					t.Fatal(err)
				}
				resp := ev.Response
				if status != 200 || resp.Status != "failed" || resp.Error.Code != "timeout" || len(resp.Output) != 1 || len(resp.Output[0].Content) != 1 || resp.Output[0].Content[0].Text != "Hello world" {
					t.Errorf("status %d, last event %s; want response.failed (timeout) holding the text sent", status, lastData(body))
				}
				if strings.Contains(body, "response.incomplete") || strings.Contains(body, "response.completed") {
					t.Errorf("a cut response ends as a success:\n%s", body)
				}
			}},
		{"responses", "/v1/responses", `{"model":"m","input":"hi"}`,
			func(t *testing.T, status int, body string) {
				if status != http.StatusGatewayTimeout || !strings.Contains(body, `"code":"timeout"`) {
					t.Errorf("%d %s; want 504, code timeout", status, body)
				}
			}},
		{"messages, streamed", "/v1/messages", `{"model":"m","max_tokens":100,"stream":true,` + msg + `}`,
			func(t *testing.T, status int, body string) {
				inOrderOf(t, body, `"text":"Hello"`, "event: error\n", `"type":"timeout_error"`)
				if status != 200 || strings.Contains(body, "message_stop") || strings.Contains(body, "stop_reason\":\"") {
					t.Errorf("status %d: a cut message ends as a success:\n%s", status, body)
				}
			}},
		{"messages", "/v1/messages", `{"model":"m","max_tokens":100,` + msg + `}`,
			func(t *testing.T, status int, body string) {
				if status != http.StatusGatewayTimeout || !strings.Contains(body, `"type":"timeout_error"`) {
					t.Errorf("%d %s; want 504, timeout_error", status, body)
				}
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			tt.check(t, res.StatusCode, string(b))
			rec := meteredAs(t, meter, res.Header.Get("X-Request-Id"))
			if rec.Status != metering.StatusTimeout || !rec.Usage.Estimated || rec.Usage.OutputTokens == 0 {
				t.Errorf("metered %s, usage %+v; want timeout, the text sent estimated", rec.Status, rec.Usage)
			}
		})
	}
}

// TestCutBackground: a background response the deadline cuts ends
// failed, with a timeout and the text sent, and is metered timed out.
func TestCutBackground(t *testing.T) {
	j := journal.NewMemory(journal.Options{})
	defer j.Close()
	srv, meter := cutServer(t, j)
	code, v := postBody(t, srv.URL, `{"model":"m","input":"hi","background":true}`)
	if code != 200 || v["status"] != "queued" {
		t.Fatalf("%d %v", code, v)
	}
	id := v["id"].(string)
	if rec := meteredAs(t, meter, id); rec.Status != metering.StatusTimeout || !rec.Usage.Estimated {
		t.Errorf("metered %s, usage %+v; want timeout, estimated", rec.Status, rec.Usage)
	}
	resp, err := http.Get(srv.URL + "/v1/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out := string(b); !strings.Contains(out, `"status":"failed"`) || !strings.Contains(out, `"error":{"code":"timeout"`) || !strings.Contains(out, `"text":"Hello world"`) {
		t.Errorf("GET after the cut: %s; want failed (timeout) with the text sent", out)
	}
}

// cutServer serves alias "m", a stallModel with a 300ms timeout, keeping
// background responses in j (nil: none).
func cutServer(t *testing.T, j journal.Journal) (*httptest.Server, *metering.Memory) {
	t.Helper()
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "m", Timeout: 300 * time.Millisecond,
		Deployments: []router.Deployment{{ProviderName: "p", Model: "m", Provider: providertest.Func(stallModel)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	meter := metering.NewMemory(20)
	srv := httptest.NewServer(New(Options{Routes: noLevers(r), Models: r, Meter: meter, Journal: j}))
	t.Cleanup(srv.Close)
	return srv, meter
}

// lastData is the data of the last event in an event stream.
func lastData(body string) string {
	i := strings.LastIndex(body, "data: ")
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(body[i+len("data: "):])
}

// meteredAs waits for request id's record.
func meteredAs(t *testing.T, m *metering.Memory, id string) metering.Record {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if rec, ok := m.Find(id); ok || time.Now().After(deadline) {
			if !ok {
				t.Fatalf("no record for %s", id)
			}
			return rec
		}
	}
}
