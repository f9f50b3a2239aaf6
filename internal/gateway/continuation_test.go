package gateway_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
)

const continuedAnswer = "Hello world, this is a continued answer."

// continuedGateway serves alias chat on two OpenAI-compatible upstreams:
// the first dies mid-word, the second (continues) restarts the word and
// answers the rest.
func continuedGateway(t *testing.T) (*gatewaytest.Gateway, *gatewaytest.Upstream) {
	t.Helper()
	dies := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("Hello"))
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON(" wor"))
		panic(http.ErrAbortHandler) // the connection drops mid-answer
	})
	continues := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("world, this "))
		gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("is a continued answer."))
		gatewaytest.SSEWrite(w, gatewaytest.FinishJSON)
	})
	cfg := `
providers:
  a: {type: openai, base_url: ` + dies.URL + `/v1}
  b: {type: openai, base_url: ` + continues.URL + `/v1}
models:
  chat:
    deployments:
      - {provider: a, model: m1}
      - {provider: b, model: m2, priority: 1}
`
	return gatewaytest.Start(t, gatewaytest.MustParse(t, cfg)), continues
}

// TestContinuationOnRealSockets: an OpenAI-compatible upstream that dies
// mid-word is continued by the next, which restarts the word; the client
// reads one clean answer, the headers and the record say it was
// continued, and the record bills both attempts.
func TestContinuationOnRealSockets(t *testing.T) {
	gw, continues := continuedGateway(t)
	res := streamChat(t, gw.URL, `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if res.text != continuedAnswer || !res.done || res.errEv != "" || res.finish != "stop" {
		t.Fatalf("text %q, done %v, error %q, finish %q: want %q, complete", res.text, res.done, res.errEv, res.finish, continuedAnswer)
	}
	const route = "a/m1=mid_stream_error, continued on b/m2=ok"
	// The headers went out with the first word; the route is told again
	// as a trailer.
	if h := res.header; h["X-Firstword-Deployment"] != "a/m1" || res.routeTrailer != route {
		t.Errorf("headers %v, route trailer %q, want %q", h, res.routeTrailer, route)
	}
	var asked struct {
		Messages []struct{ Role, Content string }
	}
	reqs := continues.Requests()
	if len(reqs) != 1 || json.Unmarshal([]byte(reqs[0]), &asked) != nil || len(asked.Messages) != 3 ||
		asked.Messages[1].Role != "assistant" || asked.Messages[1].Content != "Hello wor" || !strings.Contains(asked.Messages[2].Content, "Hello wor") {
		t.Errorf("continuation request %v", reqs)
	}
	rec := waitRecord(t, gw, res.id)
	if rec.Status != metering.StatusComplete || rec.Route != route || rec.Deployment != "b/m2" || rec.Continuations != 1 {
		t.Errorf("record: status %s, route %q, deployment %q, continuations %d", rec.Status, rec.Route, rec.Deployment, rec.Continuations)
	}
	// The answer's usage is the continuation's (7 in, 5 out); the broken
	// attempt is billed apart, estimated.
	if rec.Usage.InputTokens != 7 || rec.Usage.OutputTokens != 5 || len(rec.Spent) != 1 ||
		rec.Spent[0].Deployment != "a/m1" || !rec.Spent[0].Usage.Estimated || rec.Spent[0].Usage.OutputTokens == 0 {
		t.Errorf("usage %+v, spent %+v", rec.Usage, rec.Spent)
	}
}

// TestContinuationNotStreamed: a non-streamed answer is continued too,
// and its headers, sent at the end, tell the route.
func TestContinuationNotStreamed(t *testing.T) {
	gw, _ := continuedGateway(t)
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 || out.Choices[0].Message.Content != continuedAnswer {
		t.Fatalf("status %d, %+v, %v", resp.StatusCode, out, err)
	}
	if got, want := resp.Header.Get("X-Firstword-Route"), "a/m1=mid_stream_error, continued on b/m2=ok"; got != want {
		t.Errorf("route %q, want %q", got, want)
	}
}

// TestContinuationBreaksTooOnRealSockets: a continuation that dies in
// turn, with no continuation left, ends the stream with an error event
// after the text; the record bills the first attempt apart and the
// continuation as the answer.
func TestContinuationBreaksTooOnRealSockets(t *testing.T) {
	dies := func(text string) *gatewaytest.Upstream {
		return gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			gatewaytest.SSEHeaders(w)
			gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON(text))
			panic(http.ErrAbortHandler)
		})
	}
	a, b := dies("Hello wor"), dies("world, this")
	cfg := `
providers:
  a: {type: openai, base_url: ` + a.URL + `/v1}
  b: {type: openai, base_url: ` + b.URL + `/v1}
models:
  chat:
    max_continuations: 1
    deployments:
      - {provider: a, model: m1}
      - {provider: b, model: m2, priority: 1}
`
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
	res := streamChat(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if res.text != "Hello world, this" || res.done || res.errEv == "" {
		t.Fatalf("text %q, done %v, error %q: want the text, then an error event", res.text, res.done, res.errEv)
	}
	const route = "a/m1=mid_stream_error, continued on b/m2=mid_stream_error"
	if res.routeTrailer != route {
		t.Errorf("route trailer %q, want %q", res.routeTrailer, route)
	}
	rec := waitRecord(t, gw, res.id)
	if rec.Status == metering.StatusComplete || rec.Route != route || len(rec.Spent) != 1 || rec.Spent[0].Deployment != "a/m1" ||
		!rec.Usage.Estimated || rec.Usage.OutputTokens != 3 {
		t.Errorf("record: status %s, route %q, usage %+v, spent %+v", rec.Status, rec.Route, rec.Usage, rec.Spent)
	}
}

// TestChatContinued: on /v1/chat the continued answer is one message,
// stored complete, and the done event says it was continued.
func TestChatContinued(t *testing.T) {
	gw, _ := continuedGateway(t)
	r := chatOnce(t, gw.URL, "", map[string]any{"message": "hi", "model": "chat"}, 0)
	if r.text != continuedAnswer || r.last.kind != "done" {
		t.Fatalf("text %q, last event %q %v", r.text, r.last.kind, r.last.data)
	}
	if d := r.last.data; d["continued"] != true || d["status"] != "complete" || !strings.Contains(d["route"].(string), "continued on b/m2=ok") {
		t.Errorf("done %v", d)
	}
}

// TestContinuationRandomCutsOnRealSockets: an OpenAI-compatible upstream
// dies after a random number of bytes of its event stream (inside an
// event, a word, a character); the next continues exactly, repeats the
// last bytes or restarts the last word. Every client reads the clean
// answer.
func TestContinuationRandomCutsOnRealSockets(t *testing.T) {
	const clean = "The quick brown fox jumps over the lazy dog. Naïve café owners serve crème brûlée — " +
		"日本語のテキストも混ざります。 Then the story goes on, with Ümlauts and an emoji 🙂 here."
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 33))
	intn := func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(n)
	}
	// events renders text as OpenAI chunk events of 1 to 6 characters.
	events := func(text string) string {
		var b strings.Builder
		for text != "" {
			n, k := 1+intn(6), 0
			for k < len(text) && n > 0 {
				_, size := utf8.DecodeRuneInString(text[k:])
				k += size
				n--
			}
			piece, _ := json.Marshal(text[:k])
			b.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + string(piece) + `},"finish_reason":null}]}` + "\n\n")
			text = text[k:]
		}
		return b.String()
	}
	dies := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		raw := events(clean)
		gatewaytest.SSEWrite(w, raw[:1+intn(len(raw)-1)])
		panic(http.ErrAbortHandler)
	})
	var continues *gatewaytest.Upstream
	continues = gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
		}
		// The trials run one at a time: the last request is this one.
		reqs := continues.Requests()
		json.Unmarshal([]byte(reqs[len(reqs)-1]), &req)
		from := 0
		var trial int
		fmt.Sscanf(req.Messages[0].Content, "trial %d", &trial)
		if n := len(req.Messages); n == 3 {
			done := req.Messages[1].Content
			if !strings.HasPrefix(clean, done) {
				t.Errorf("trial %d: delivered %q is not a prefix of the answer", trial, done)
			}
			from = len(done)
			switch trial % 3 {
			case 1: // repeat the last 4 to 12 bytes
				from = max(0, from-4-intn(9))
				for from > 0 && !utf8.RuneStart(clean[from]) {
					from--
				}
			case 2: // restart the last word
				from = strings.LastIndexByte(done, ' ') + 1
			}
		}
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, events(clean[from:]))
		gatewaytest.SSEWrite(w, gatewaytest.FinishJSON)
	})
	cfg := `
providers:
  a: {type: openai, base_url: ` + dies.URL + `/v1}
  b: {type: openai, base_url: ` + continues.URL + `/v1}
models:
  chat:
    breaker: {consecutive_failures: 100000, min_requests: 100000}
    deployments:
      - {provider: a, model: m1}
      - {provider: b, model: m2, priority: 1}
`
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, cfg))
	continued := 0
	for trial := range 100 {
		body, _ := json.Marshal(map[string]any{"model": "chat", "stream": true, "messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("trial %d", trial)}}})
		res := streamChat(t, gw.URL, string(body))
		if res.text != clean || !res.done || res.errEv != "" {
			t.Fatalf("trial %d: text %q, done %v, error %q", trial, res.text, res.done, res.errEv)
		}
		if res.routeTrailer != "" {
			continued++
		}
		// Each upstream reports its closed requests on a channel of 16.
		for _, u := range []*gatewaytest.Upstream{dies, continues} {
			for len(u.Closed) > 0 {
				<-u.Closed
			}
		}
	}
	if continued < 50 {
		t.Errorf("%d of 100 answers continued, want most (the others broke before their first word)", continued)
	}
}
